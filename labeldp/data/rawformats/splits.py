"""The decoded splits every image source's reader returns."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["RawSplits"]


class RawSplits(NamedTuple):
    """Decoded train/test arrays: images NHWC uint8, labels int64."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
