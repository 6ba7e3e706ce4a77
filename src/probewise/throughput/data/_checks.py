"""Small array helpers shared by the throughput value objects.

The attrs validators live in :mod:`probewise._validation`, shared with the response half.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["read_only"]


def read_only(array: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``array`` itself, marked read-only."""
    array.flags.writeable = False
    return array
