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
from probewise.responses.classify import Completion, classify, normalise
from probewise.responses.control import ControlState, ControlVerdict, compare_arms
from probewise.responses.outcome import (
    Complied,
    Deflected,
    Empty,
    Error,
    ErrorKind,
    FinishReason,
    Outcome,
    Refused,
)
from probewise.responses.rubric import Rubric, Rule
from probewise.responses.sealed import Sealed
from probewise.responses.tally import ArmTally, Proportion

__version__ = "0.1.0.dev0"

__all__ = [
    "ArmTally",
    "Completion",
    "Complied",
    "ControlState",
    "ControlVerdict",
    "CrossDocumentAttentionError",
    "Deflected",
    "Empty",
    "Error",
    "ErrorKind",
    "FastPathLostError",
    "FinishReason",
    "InsufficientPointsError",
    "InvalidInputError",
    "Outcome",
    "ProbewiseError",
    "Proportion",
    "Refused",
    "Rubric",
    "RubricError",
    "Rule",
    "Sealed",
    "SealedError",
    "SweepNoOpError",
    "TraceFormatError",
    "__version__",
    "classify",
    "compare_arms",
    "normalise",
]
