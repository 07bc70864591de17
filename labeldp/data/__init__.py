"""Data layer: data sources, verified fetching, raw-format parsers, preparation.

* :mod:`.sources` -- one module per data source (its ``SPEC``, reader or preparation, stand-in writer);
  :mod:`.registry` discovers them (and the user's, ``LABELDP_DATA_SOURCES``) by dataset id.
* :mod:`.fetch` -- :func:`fetch_dataset` (mirror first, then official URLs; atomic,
  checksum-verified), :func:`verify_file`.
* :mod:`.rawformats` -- one module per raw format (IDX, CIFAR-10 and CIFAR-100 python, Criteo's archives, the IPUMS
  extract), synthetic stand-ins.
* :mod:`.prepare` -- raw files -> ``.npz``; :func:`load_prepared`.
"""

from importlib import import_module as _import_module

# Lazy attribute access (PEP 562), so that `python -m labeldp.data.fetch` does not import
# the submodule twice (runpy warns when the package already imported it).
_EXPORTS = {
    "DATASETS": "registry",
    "DatasetSpec": "registry",
    "RemoteFile": "registry",
    "get_spec": "registry",
    "fetch_dataset": "fetch",
    "verify_file": "fetch",
    "file_digests": "fetch",
    "DataError": "fetch",
    "DataMissingError": "fetch",
    "ChecksumError": "fetch",
    "read_idx": "rawformats",
    "write_idx": "rawformats",
    "read_cifar10_tar": "rawformats",
    "write_cifar10_tar": "rawformats",
    "read_cifar100_tar": "rawformats",
    "write_cifar100_tar": "rawformats",
    "make_standin_raw_files": "rawformats",
    "RawSplits": "rawformats",
    "STANDIN_MARKER": "rawformats",
    "prepare_image_dataset": "prepare",
    "load_prepared": "prepare",
    "PreparedData": "prepare",
}


def __getattr__(name: str):
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(_import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "DATASETS",
    "DatasetSpec",
    "RemoteFile",
    "get_spec",
    "fetch_dataset",
    "verify_file",
    "file_digests",
    "DataError",
    "DataMissingError",
    "ChecksumError",
    "read_idx",
    "write_idx",
    "read_cifar10_tar",
    "write_cifar10_tar",
    "read_cifar100_tar",
    "write_cifar100_tar",
    "make_standin_raw_files",
    "RawSplits",
    "STANDIN_MARKER",
    "prepare_image_dataset",
    "load_prepared",
    "PreparedData",
]
