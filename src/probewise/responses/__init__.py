"""The response half: classify how a model answered, without ever surfacing the text.

Outcomes (:mod:`~probewise.responses.outcome`), the rubric and its rules, ``classify``,
judges, generators, arms, tallies, paired tests and the control, and calibration against
human labels.
The everyday names are also importable from :mod:`probewise`. Names load lazily (PEP 562):
importing this package imports none of its modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from probewise._lazy import LazyFace

if TYPE_CHECKING:
    from probewise.responses.arms import (
        OutcomePair,
        PairedResult,
        run_arm,
        run_arm_shards,
        run_paired,
    )
    from probewise.responses.calibration import (
        Calibration,
        CorrectedComparison,
        CorrectedRate,
        CorrectionMethod,
        HumanLabel,
        RubricBucket,
        ThreeWayRates,
    )
    from probewise.responses.classifier import (
        Completion,
        classify,
        normalise,
    )
    from probewise.responses.control import (
        ControlState,
        ControlVerdict,
        compare_arms,
    )
    from probewise.responses.decide import (
        StopWhenDecided,
        decided_outcome,
    )
    from probewise.responses.generators import (
        DEFAULT_FINISH_REASONS,
        BatchGenerate,
        Generate,
        OpenAICompatibleGenerator,
        TransformersGenerator,
    )
    from probewise.responses.judge import (
        Judge,
        JudgeAgreement,
        JudgeVerdict,
        TransformersJudge,
        judge_completion,
    )
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
    from probewise.responses.rubric import (
        Rubric,
    )
    from probewise.responses.rules import (
        Rule,
    )
    from probewise.responses.sealed import (
        Sealed,
    )
    from probewise.responses.stats import (
        ArmTally,
        McNemar,
        OutcomeBucket,
        Proportion,
    )

# Where each public name is defined: the same modules and names as the block above
# (tests/test_cli_startup.py holds the two, and ``__all__``, to the same names).
_SOURCES: dict[str, tuple[str, ...]] = {
    "probewise.responses.arms": (
        "OutcomePair",
        "PairedResult",
        "run_arm",
        "run_arm_shards",
        "run_paired",
    ),
    "probewise.responses.calibration": (
        "Calibration",
        "CorrectedComparison",
        "CorrectedRate",
        "CorrectionMethod",
        "HumanLabel",
        "RubricBucket",
        "ThreeWayRates",
    ),
    "probewise.responses.classifier": (
        "classify",
        "Completion",
        "normalise",
    ),
    "probewise.responses.control": (
        "compare_arms",
        "ControlState",
        "ControlVerdict",
    ),
    "probewise.responses.decide": ("decided_outcome", "StopWhenDecided"),
    "probewise.responses.generators": (
        "BatchGenerate",
        "DEFAULT_FINISH_REASONS",
        "Generate",
        "OpenAICompatibleGenerator",
        "TransformersGenerator",
    ),
    "probewise.responses.judge": (
        "Judge",
        "judge_completion",
        "JudgeAgreement",
        "JudgeVerdict",
        "TransformersJudge",
    ),
    "probewise.responses.outcome": (
        "Complied",
        "Deflected",
        "Empty",
        "Error",
        "ErrorKind",
        "FinishReason",
        "Outcome",
        "Refused",
    ),
    "probewise.responses.rubric": ("Rubric",),
    "probewise.responses.rules": ("Rule",),
    "probewise.responses.sealed": ("Sealed",),
    "probewise.responses.stats": (
        "ArmTally",
        "McNemar",
        "OutcomeBucket",
        "Proportion",
    ),
}

__all__ = [
    "DEFAULT_FINISH_REASONS",
    "ArmTally",
    "BatchGenerate",
    "Calibration",
    "Completion",
    "Complied",
    "ControlState",
    "ControlVerdict",
    "CorrectedComparison",
    "CorrectedRate",
    "CorrectionMethod",
    "Deflected",
    "Empty",
    "Error",
    "ErrorKind",
    "FinishReason",
    "Generate",
    "HumanLabel",
    "Judge",
    "JudgeAgreement",
    "JudgeVerdict",
    "McNemar",
    "OpenAICompatibleGenerator",
    "Outcome",
    "OutcomeBucket",
    "OutcomePair",
    "PairedResult",
    "Proportion",
    "Refused",
    "Rubric",
    "RubricBucket",
    "Rule",
    "Sealed",
    "StopWhenDecided",
    "ThreeWayRates",
    "TransformersGenerator",
    "TransformersJudge",
    "classify",
    "compare_arms",
    "decided_outcome",
    "judge_completion",
    "normalise",
    "run_arm",
    "run_arm_shards",
    "run_paired",
]

# At run time only: a module ``__getattr__`` that type checkers see makes them accept any
# attribute of the package, typos included; the names above are all they should know.
if not TYPE_CHECKING:
    __getattr__, __dir__ = LazyFace.of(__name__, _SOURCES)
