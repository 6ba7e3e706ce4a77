"""probewise: measurement discipline for model probes.

Everything public is re-exported here; nothing else lives in this module.
"""

from probewise.errors import (
    CrossDocumentAttentionError,
    FastPathLostError,
    InsufficientPointsError,
    InvalidInputError,
    ProbewiseError,
    RubricError,
    SealedError,
    SweepNoOpError,
    TraceFormatError,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "CrossDocumentAttentionError",
    "FastPathLostError",
    "InsufficientPointsError",
    "InvalidInputError",
    "ProbewiseError",
    "RubricError",
    "SealedError",
    "SweepNoOpError",
    "TraceFormatError",
    "__version__",
]
