"""What the data layer knows about one dataset: :class:`DatasetSpec` and its :class:`RemoteFile` entries
(the shipped specs: the modules of :mod:`labeldp.data.sources`; lookup: :mod:`labeldp.data.registry`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

__all__ = ["DatasetSpec", "RemoteFile"]


@dataclass(frozen=True)
class RemoteFile:
    """One raw file of a dataset.

    ``url`` is the official location; ``mirrors`` are alternative full URLs tried in
    order after it. ``md5``/``sha256`` are the expected checksums (either, both or none;
    with none, fetch records a sha256 sidecar on first download).
    """

    filename: str
    url: str | None
    md5: str | None = None
    sha256: str | None = None
    mirrors: tuple[str, ...] = ()
    size: int | None = None  # bytes, informational (progress messages)

    @property
    def urls(self) -> tuple[str, ...]:
        """All download URLs, official first."""
        return tuple(u for u in ((self.url,) + tuple(self.mirrors)) if u)

    @property
    def has_published_checksum(self) -> bool:
        return bool(self.md5 or self.sha256)


@dataclass(frozen=True)
class DatasetSpec:
    """Everything the data layer knows about one dataset.

    kind:
        ``"image"`` (classification on images; ``prepare_image_dataset`` handles it) or
        ``"tabular"`` (Criteo, Census; fetched here, prepared elsewhere).
    raw_format:
        ``"idx"`` (MNIST family), ``"cifar10_python"``, ``"cifar100_python"``, ``"criteo_attribution_zip"``,
        ``"criteo_search_targz"``, ``"ipums_extract"``, ``"statsmodels_package"`` (a file
        shipped inside an installed package: :mod:`labeldp.data.sources.rand_hie`).
    manual:
        True when the files cannot be fetched automatically (Census 1940): ``files`` is
        empty and ``manual_instructions`` says what the user must download.
    standin_allowed:
        Whether :func:`labeldp.data.rawformats.make_standin_raw_files` may write
        synthetic stand-ins in this dataset's raw format (tests / CPU smoke only).
    members:
        For archives: member name -> md5 of the member (checked when reading).
    model:
        The model an image dataset trains (a :mod:`labeldp.models` id: 000 Table 10's ``mnist_cnn`` or
        ``cifar_cnn``); None for tabular data (its pipeline chooses).
    train_examples:
        Examples in the official training split, where the files fix it (the image datasets);
        the planner refuses, before any job, a Poisson batch larger than the data
        (:func:`labeldp.batch_fit.check_batches_fit`). None: known only once prepared.
    """

    name: str
    files: tuple[RemoteFile, ...]
    kind: str
    num_classes: int | None
    input_shape: tuple[int, ...] | None
    homepage: str
    title: str = ""
    raw_format: str = ""
    task: str = "classification"
    license: str = ""
    citation: str = ""
    label: str | None = None
    manual: bool = False
    manual_instructions: str = ""
    standin_allowed: bool = False
    members: Mapping[str, str] = field(default_factory=dict)
    notes: str = ""
    train_examples: int | None = None
    model: str | None = None

    def file(self, filename: str) -> RemoteFile:
        for f in self.files:
            if f.filename == filename:
                return f
        raise KeyError(f"{self.name} has no file {filename!r}; files: {[f.filename for f in self.files]}")

    @property
    def filenames(self) -> tuple[str, ...]:
        return tuple(f.filename for f in self.files)
