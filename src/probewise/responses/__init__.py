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
        OutcomePair as OutcomePair,
        PairedResult as PairedResult,
        run_arm as run_arm,
        run_arm_shards as run_arm_shards,
        run_paired as run_paired,
    )
    from probewise.responses.calibration import (
        Calibration as Calibration,
        CorrectedComparison as CorrectedComparison,
        CorrectedRate as CorrectedRate,
        CorrectionMethod as CorrectionMethod,
        HumanLabel as HumanLabel,
        RubricBucket as RubricBucket,
        ThreeWayRates as ThreeWayRates,
    )
    from probewise.responses.classifier import (
        classify as classify,
        normalise as normalise,
    )
    from probewise.responses.control import (
        ControlState as ControlState,
        ControlVerdict as ControlVerdict,
        compare_arms as compare_arms,
    )
    from probewise.responses.decide import (
        StopWhenDecided as StopWhenDecided,
        decided_outcome as decided_outcome,
    )
    from probewise.responses.generators import (
        DEFAULT_FINISH_REASONS as DEFAULT_FINISH_REASONS,
        BatchGenerate as BatchGenerate,
        Generate as Generate,
        OpenAICompatibleGenerator as OpenAICompatibleGenerator,
        TransformersGenerator as TransformersGenerator,
    )
    from probewise.responses.judge import (
        Judge as Judge,
        JudgeAgreement as JudgeAgreement,
        JudgeVerdict as JudgeVerdict,
        TransformersJudge as TransformersJudge,
        judge_completion as judge_completion,
    )
    from probewise.responses.outcome import (
        Complied as Complied,
        Deflected as Deflected,
        Empty as Empty,
        Error as Error,
        ErrorKind as ErrorKind,
        FinishReason as FinishReason,
        Outcome as Outcome,
        Refused as Refused,
    )
    from probewise.responses.rubric import (
        Rubric as Rubric,
    )
    from probewise.responses.rules import (
        Rule as Rule,
    )
    from probewise.responses.sealed import (
        Completion as Completion,
        Sealed as Sealed,
    )
    from probewise.responses.stats import (
        ArmTally as ArmTally,
        McNemar as McNemar,
        OutcomeBucket as OutcomeBucket,
        Proportion as Proportion,
    )


# At run time only: a module ``__getattr__`` that type checkers see makes them accept any
# attribute of the package, typos included; the names above are all they should know.
if not TYPE_CHECKING:
    __getattr__, __dir__ = LazyFace.of(__name__, __file__)
