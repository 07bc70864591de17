"""Turn raw image-dataset files into one ``.npz`` the experiments load.

:func:`prepare_image_dataset` parses the raw files with the real parsers of
:mod:`labeldp.data.rawformats` (IDX for the MNIST family, the CIFAR-10 and CIFAR-100 python archives)
and writes

* ``x_train``, ``x_test``: uint8 NHWC, (n, 28, 28, 1) or (n, 32, 32, 3)
* ``y_train``, ``y_test``: int64
* ``metadata``: a JSON string (0-d array) with the dataset name, ``source``
  (``"official"`` or ``"synthetic_standin"``), ``subset``, split sizes, number of classes
  and the sha256 of every raw file.

``source`` is decided by the raw directory, never by the caller: a directory with a
``STANDIN_SYNTHETIC`` marker is ``"synthetic_standin"``; otherwise every raw file must
match the registry's official checksum (else :class:`ChecksumError`), and the result is
``"official"``. ``subset=n`` keeps the first ``n`` examples of each split, in file order
(deterministic). The ``.npz`` is written to a temporary name and renamed into place.
No pickles are stored, so :func:`load_prepared` uses ``allow_pickle=False``.

Tabular datasets (Criteo Search, Census, RAND HIE) are prepared by their own module,
``labeldp/data/<dataset>.py`` (``prepare_dataset``), into :mod:`labeldp.data.tabular`'s format;
the CLI dispatches to it.

CLI::

    python -m labeldp.data.prepare <dataset> --raw-dir R --out O [--subset N]
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from labeldp.atomic_io import atomic_output
from labeldp.data.fetch import ChecksumError, DataError, DataMissingError, file_digests
from labeldp.data.rawformats import (
    RawSplits,
    is_standin_dir,
    read_standin_marker,
)
from labeldp.data import views
from labeldp.data.registry import DATASETS, DatasetSpec, get_spec, source_module
from labeldp import __version__ as labeldp_version
from labeldp.data.tabular import load_prepared_tabular

__all__ = [
    "SOURCE_OFFICIAL",
    "SOURCE_STANDIN",
    "FORMAT_VERSION",
    "PreparedData",
    "prepare_image_dataset",
    "load_prepared",
    "main",
]

SOURCE_OFFICIAL = "official"
SOURCE_STANDIN = "synthetic_standin"
FORMAT_VERSION = 1


@dataclass(frozen=True, eq=False)
class PreparedData:
    """A prepared image dataset (see module docstring for the array layout)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    name: str
    source: str
    subset: int | None
    metadata: dict[str, Any] = field(default_factory=dict)
    # Inputs at which every method reports its trained model's log-probabilities
    # (MethodResult.audit_log_probs): the label-canary audit's canaries (labeldp.audit) or the held-out
    # rows of honest selection (labeldp.selection.heldout_data). None otherwise; never saved with the prepared file.
    audit_inputs: np.ndarray | None = None
    # Networks pre-trained on public labels that a variant starts from (option init_from;
    # labeldp.pretrained_init.attach): {name: PretrainedState}. Attached by the runner; never saved.
    pretrained: Mapping[str, Any] | None = None

    @property
    def is_synthetic(self) -> bool:
        return self.source != SOURCE_OFFICIAL

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    @property
    def kind(self) -> str:
        """``image`` (uint8 NHWC images) or ``features`` (float32 (n, D) SimCLR representations of an
        image dataset, :mod:`labeldp.feature_datasets`; the same layout otherwise)."""
        return str(self.metadata.get("kind", "image"))


def _raw_file(raw_dir: Path, filename: str) -> Path:
    """The raw file, also accepting the un-gzipped name (as torchvision leaves them)."""
    path = raw_dir / filename
    if path.is_file():
        return path
    if filename.endswith(".gz") and (raw_dir / filename[:-3]).is_file() and filename.startswith(("train-", "t10k-")):
        return raw_dir / filename[:-3]
    raise DataMissingError(
        f"raw file {filename} not found in {raw_dir}; fetch it first "
        f"(python -m labeldp.data.fetch <dataset> --data-dir ...; raw files land in <data-dir>/<dataset>/)"
    )


def _check_official(spec: DatasetSpec, paths: dict[str, Path], digests: dict[str, dict[str, str]]) -> None:
    for fname, path in paths.items():
        rf = spec.file(fname)
        if path.name != fname:
            # an uncompressed copy cannot be compared with the official (gzip) checksum
            raise ChecksumError(
                path,
                "md5",
                rf.md5 or "?",
                digests[fname]["md5"],
                filename=fname,
                hint=(
                    f"Only the official compressed file {fname} can be verified; keep the .gz file in "
                    f"{path.parent} (fetch it again)."
                ),
            )
        for alg, exp in (("sha256", rf.sha256), ("md5", rf.md5)):
            if exp and digests[fname][alg] != exp:
                raise ChecksumError(
                    path,
                    alg,
                    exp,
                    digests[fname][alg],
                    filename=fname,
                    hint=(
                        "The raw file is not the official one. Fetch it again (python -m labeldp.data.fetch); "
                        "if it is a synthetic stand-in, its directory must carry the STANDIN_SYNTHETIC marker "
                        "(make_standin_raw_files writes it)."
                    ),
                )


def atomic_savez(out_path: Path, arrays: dict[str, np.ndarray]) -> None:
    with atomic_output(out_path) as fh:
        np.savez(fh, **arrays)


def prepare_image_dataset(
    name: str,
    *,
    raw_dir: str | os.PathLike,
    out_path: str | os.PathLike,
    subset: int | None = None,
    classes: int | None = None,
    view: str | None = None,
) -> Path:
    """Parse the raw files of image dataset ``name`` in ``raw_dir`` into ``out_path`` (.npz).

    ``subset``: keep the first ``subset`` examples of each split (in file order); a split
    smaller than ``subset`` is kept whole and the actual sizes are recorded. ``classes``: keep
    only the examples of the first ``classes`` classes (labels ``0 .. classes - 1``, before
    ``subset``; 000 Table 12 restricts MNIST to its first K classes), so the data has K classes.
    ``view``: the :mod:`labeldp.data.views` id this preparation is made for (``metadata["view"]``).
    Returns ``out_path``.
    """
    spec = get_spec(name)
    if spec.kind != "image":
        raise NotImplementedError(f"{name} is a {spec.kind} dataset; prepare_image_dataset handles image datasets only")
    if subset is not None and (isinstance(subset, bool) or int(subset) < 1):
        raise ValueError(f"subset must be a positive integer or None, got {subset!r}")
    raw_dir, out_path = Path(raw_dir), Path(out_path)
    if not raw_dir.is_dir():
        raise DataMissingError(f"raw directory {raw_dir} does not exist; fetch {name} first")

    paths = {f: _raw_file(raw_dir, f) for f in spec.filenames}
    digests = {f: file_digests(p) for f, p in paths.items()}
    synthetic = is_standin_dir(raw_dir)
    if synthetic:
        source = SOURCE_STANDIN
        marker = read_standin_marker(raw_dir)
        if marker.get("dataset", name) != name:
            raise DataError(f"{raw_dir} holds stand-ins for {marker.get('dataset')!r}, not {name!r}")
    else:
        source = SOURCE_OFFICIAL
        marker = None
        _check_official(spec, paths, digests)

    module = source_module(name)
    if not hasattr(module, "read_raw"):
        raise NotImplementedError(
            f"no parser for raw format {spec.raw_format!r} of {name}: its data source module ({module.__name__}) "
            "defines read_raw(paths)"
        )
    splits = RawSplits(*module.read_raw(paths))

    expected_shape = tuple(spec.input_shape or ())
    k = int(spec.num_classes or 0)
    for split, x, y in (("train", splits.x_train, splits.y_train), ("test", splits.x_test, splits.y_test)):
        if tuple(x.shape[1:]) != expected_shape or x.dtype != np.uint8:
            raise DataError(f"{name} {split}: images {x.shape} {x.dtype}, expected (n, {expected_shape}) uint8")
        if y.size and (y.min() < 0 or y.max() >= k):
            raise DataError(f"{name} {split}: labels outside 0..{k - 1} (min {y.min()}, max {y.max()})")

    if classes is not None:
        if isinstance(classes, bool) or not 2 <= int(classes) <= k:
            raise ValueError(f"classes must be an integer in [2, {k}] ({name} has {k} classes), got {classes!r}")
        k = int(classes)
        tr, te = splits.y_train < k, splits.y_test < k
        splits = RawSplits(splits.x_train[tr], splits.y_train[tr], splits.x_test[te], splits.y_test[te])
    n_full = {"train": int(splits.x_train.shape[0]), "test": int(splits.x_test.shape[0])}
    if subset is not None:
        n = int(subset)
        splits = RawSplits(splits.x_train[:n], splits.y_train[:n], splits.x_test[:n], splits.y_test[:n])
        for split, full in n_full.items():
            if full < n:
                print(
                    f"[labeldp.data] note: {name} {split} has only {full} examples (< subset {n}); keeping all",
                    file=sys.stderr,
                )

    metadata = {
        "format_version": FORMAT_VERSION,
        "dataset": name,
        "source": source,
        "synthetic": synthetic,
        "subset": None if subset is None else int(subset),
        "n_train": int(splits.x_train.shape[0]),
        "n_test": int(splits.x_test.shape[0]),
        "n_train_full": n_full["train"],
        "n_test_full": n_full["test"],
        "num_classes": k,
        "input_shape": list(expected_shape),
        "raw_files": {
            f: {"path": str(p), "sha256": digests[f]["sha256"], "md5": digests[f]["md5"]} for f, p in paths.items()
        },
        "raw_sha256": {f: digests[f]["sha256"] for f in paths},
        "standin_marker": marker,
        "labeldp_version": labeldp_version,
        **({"view": view} if view else {}),
        **({"classes_kept": list(range(k))} if classes is not None else {}),
    }
    arrays = {
        "x_train": np.ascontiguousarray(splits.x_train, dtype=np.uint8),
        "y_train": np.ascontiguousarray(splits.y_train, dtype=np.int64),
        "x_test": np.ascontiguousarray(splits.x_test, dtype=np.uint8),
        "y_test": np.ascontiguousarray(splits.y_test, dtype=np.int64),
        "metadata": np.array(json.dumps(metadata, sort_keys=True)),
    }
    atomic_savez(out_path, arrays)
    return out_path


def load_prepared(path: str | os.PathLike):
    """Load an ``.npz`` written by :func:`prepare_image_dataset` or :mod:`labeldp.ssl.features` (a
    :class:`PreparedData`, of kind ``image`` or ``features``) or by a tabular preparation (a :class:`labeldp.data.tabular.PreparedTabular`); no pickles."""
    with np.load(Path(path), allow_pickle=False) as npz:
        if "metadata" in npz.files and json.loads(str(npz["metadata"][()])).get("kind") == "tabular":
            return load_prepared_tabular(path)
        missing = {"x_train", "y_train", "x_test", "y_test", "metadata"} - set(npz.files)
        if missing:
            raise DataError(f"{path}: not a prepared dataset (missing {sorted(missing)})")
        metadata = json.loads(str(npz["metadata"][()]))
        arrays = {k: npz[k] for k in ("x_train", "y_train", "x_test", "y_test")}
    return PreparedData(
        **arrays,
        num_classes=int(metadata["num_classes"]),
        name=str(metadata["dataset"]),
        source=str(metadata["source"]),
        subset=metadata.get("subset"),
        metadata=metadata,
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m labeldp.data.prepare",
        description="Parse raw image-dataset files into an .npz (x/y train/test + metadata).",
    )
    parser.add_argument("dataset", choices=sorted([*DATASETS, *views.VIEWS]))
    parser.add_argument(
        "--raw-dir",
        required=True,
        type=Path,
        help="directory holding the raw files (<data-dir>/<dataset>; a split view's: its base dataset's)",
    )
    parser.add_argument("--out", required=True, type=Path, help="output .npz path")
    parser.add_argument("--subset", type=int, default=None, help="keep the first N examples of each split")
    args = parser.parse_args(argv)
    try:
        view = views.view_of(args.dataset)
        if view is not None and DATASETS[view.base].kind == "image":  # e.g. MNIST's first K classes (000 Table 12)
            out = prepare_image_dataset(
                view.base,
                raw_dir=args.raw_dir,
                out_path=args.out,
                subset=args.subset,
                view=args.dataset,
                **dict(view.options),
            )
        elif view is not None:  # labeldp.data.views: the base module with the view's split
            source = SOURCE_STANDIN if is_standin_dir(args.raw_dir) else SOURCE_OFFICIAL
            out = views.prepare_view(
                args.dataset, raw_dir=args.raw_dir, out_path=args.out, subset=args.subset, source=source
            )
        elif DATASETS[args.dataset].kind == "image":
            out = prepare_image_dataset(args.dataset, raw_dir=args.raw_dir, out_path=args.out, subset=args.subset)
        else:  # tabular: the dataset's source module prepares it
            module = source_module(args.dataset)
            source = SOURCE_STANDIN if is_standin_dir(args.raw_dir) else SOURCE_OFFICIAL
            out = module.prepare_dataset(raw_dir=args.raw_dir, out_path=args.out, subset=args.subset, source=source)
    except (DataError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    data = load_prepared(out)
    print(
        f"{out}: {data.name} source={data.source} train={data.x_train.shape} test={data.x_test.shape}"
        + (" [SYNTHETIC STAND-IN]" if data.is_synthetic else "")
        + (" [STAND-IN for the paper's data]" if getattr(data, "is_standin", False) and not data.is_synthetic else "")
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
