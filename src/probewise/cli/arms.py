"""``probewise arms``: one prompt set through two models (what it does: ``DESCRIPTION``,
its ``--help``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, cast

from probewise._files import read_regular_file
from probewise.cli._jsonl import json_object, numbered_lines
from probewise.errors import InvalidInputError, ProbewiseError

if TYPE_CHECKING:
    from probewise.responses.arms import PairedResult
    from probewise.responses.calibration import Calibration
    from probewise.responses.generators import OpenAICompatibleGenerator
    from probewise.responses.stats import ArmTally

HELP = "run a prompt set through two models on OpenAI-compatible servers; compare"
DESCRIPTION = """``probewise arms``: one prompt set through two models behind OpenAI-compatible servers.

PROMPTS is a JSONL file of ``{"id": ..., "prompt": ...}`` records (ids are strings
or integers), or a text file with one prompt per line (ids are the 1-based line
numbers; blank lines are skipped). The format is JSONL when the first non-blank line
starts with ``{``.

Each arm's server comes from ``--a URL#MODEL`` / ``--b URL#MODEL``, or from one
``--url URL`` with ``--model-a`` and ``--model-b`` (the two can be mixed: an arm's URL
is its ``--a``/``--b`` URL or else ``--url``, its model the ``#MODEL`` part or else
``--model-a``/``--model-b``). URL is where the API lives, e.g.
``http://localhost:8000/v1``. An API key is read from the environment variable that
``--api-key-env`` names, never from the command line.

``--calibration FILE`` reads a :class:`~probewise.Calibration` saved as JSON
(``json.dumps(calibration.to_dict())``, from a sample of the same rubric's outcomes
against human labels) and also prints both arms' declined rates corrected for the
rubric's measured error, with their difference and its interval
(:meth:`~probewise.Calibration.compare`). A calibration that cannot correct (a rubric
no better than chance on it) is an error, exit 2, after the run.

Both arms run through :func:`~probewise.run_paired` with
:class:`~probewise.OpenAICompatibleGenerator`; it prints the tallies with Wilson
intervals, the control verdict and the exact McNemar test per bucket. Completions are
classified as they arrive and never written anywhere; ``--checkpoint PATH`` keeps
outcomes only (``PATH`` with ``.a``/``.b`` before the suffix) and a rerun of the same
command resumes from them. A checkpoint is bound to its run: a rerun with another
server, model, generation setting or prompt text under an id it holds is refused
(exit 2, naming what differs); delete the files to start fresh, or pass
``--resume-anyway`` to keep their outcomes. A second run on the same checkpoint at
once is refused too.

Exit status: 0 when the run completed, every prompt in both arms classified; 1 when
it did not: some prompts ended in the Error bucket (no usable answer from the server
after the retries; the report is printed, the Error rows say how many), or the run
was interrupted (nothing printed; the checkpoint keeps every finished batch); 2 for
bad input (one line on stderr).
"""
RAW_DESCRIPTION = True


class _Target(NamedTuple):
    url: str
    model: str


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompts", type=Path, metavar="PROMPTS", help="JSONL or one prompt a line")
    parser.add_argument("--a", metavar="URL[#MODEL]", help="arm A's server (and model)")
    parser.add_argument("--b", metavar="URL[#MODEL]", help="arm B's server (and model)")
    parser.add_argument("--url", metavar="URL", help="the server of an arm that --a/--b leave out")
    parser.add_argument("--model-a", metavar="MODEL", help="arm A's model, if --a has no #MODEL")
    parser.add_argument("--model-b", metavar="MODEL", help="arm B's model, if --b has no #MODEL")
    parser.add_argument(
        "--max-tokens", type=int, default=256, metavar="N", help="tokens per completion (256)"
    )
    parser.add_argument(
        "--temperature", type=float, default=0.0, metavar="T", help="sampling temperature (0)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=8, metavar="N", help="requests in flight per arm (8)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds per attempt, from connecting to the last byte of the body (60)",
    )
    parser.add_argument(
        "--max-response-bytes",
        type=int,
        default=8 << 20,
        metavar="N",
        help="largest response body kept, before and after decompression (8 MiB); "
        "a larger one is an Error outcome",
    )
    parser.add_argument(
        "--retries", type=int, default=3, metavar="N", help="retries on 408/429/5xx/timeouts (3)"
    )
    parser.add_argument(
        "--stop-when-decided",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stream each reply and stop it once its outcome is decided (on: the outcome "
        "is the whole reply's; a server that does not stream sends whole replies)",
    )
    parser.add_argument(
        "--completions",
        action="store_true",
        help="POST /completions with the raw prompt instead of /chat/completions",
    )
    parser.add_argument("--system-prompt", metavar="TEXT", help="a system message for chat")
    parser.add_argument(
        "--api-key-env", metavar="VAR", help="the environment variable that holds the API key"
    )
    parser.add_argument(
        "--checkpoint", type=Path, metavar="PATH", help="outcomes file(s) to resume from"
    )
    parser.add_argument(
        "--resume-anyway",
        action="store_true",
        help="resume a checkpoint whose server, model, settings or prompts differ",
    )
    parser.add_argument(
        "--calibration",
        type=Path,
        metavar="FILE",
        help="a Calibration saved as JSON (Calibration.to_dict): also print the declined "
        "rates corrected for the rubric's measured error",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def read_prompts(path: Path) -> dict[str | int, str]:
    """Prompts by id from a JSONL file of ``{"id", "prompt"}`` or one prompt a line."""
    numbered = numbered_lines(path)  # a FIFO or a device is refused, never read
    if not numbered:
        raise InvalidInputError(f"{path} holds no prompts")
    if not numbered[0][1].lstrip().startswith("{"):
        return {n: line for n, line in numbered}
    prompts: dict[str | int, str] = {}
    for n, line in numbered:
        fields = json_object(path, n, line)
        prompt_id, prompt = fields.get("id"), fields.get("prompt")
        if isinstance(prompt_id, bool) or not isinstance(prompt_id, str | int):
            raise InvalidInputError(f'{path}:{n}: "id" must be a string or an integer')
        if not isinstance(prompt, str):
            raise InvalidInputError(f'{path}:{n}: "prompt" must be a string')
        if prompt_id in prompts:
            raise InvalidInputError(f"{path}:{n}: id {prompt_id!r} appears twice")
        prompts[prompt_id] = prompt
    return prompts


def read_calibration(path: Path) -> Calibration:
    """A :class:`~probewise.Calibration` from the JSON document ``Calibration.to_dict`` gives."""
    from probewise.responses.calibration import Calibration

    raw = read_regular_file(path)  # a FIFO or a device is refused, never read
    try:
        data: object = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInputError(f"cannot read {path}: it is not UTF-8") from None
    except (ValueError, RecursionError):
        raise InvalidInputError(f"{path}: not a JSON document") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path}: not a JSON object (Calibration.to_dict())")
    try:
        return Calibration.from_dict(cast("dict[str, object]", data))
    except ProbewiseError as error:
        raise InvalidInputError(f"{path}: {error}") from None


def _target(arm: str, spec: str | None, url: str | None, model: str | None) -> _Target:
    spec_url, _, spec_model = (spec or "").partition("#")
    chosen_url = spec_url or url  # --a's own URL wins; --url serves an arm that names none
    if spec_model and model is not None:
        raise InvalidInputError(
            f"arm {arm}: the model is named twice (--{arm.lower()} URL#MODEL and "
            f"--model-{arm.lower()})"
        )
    chosen_model = spec_model or model
    if not chosen_url:
        raise InvalidInputError(f"arm {arm}: no server: give --{arm.lower()} URL#MODEL or --url")
    if not chosen_model:
        raise InvalidInputError(
            f"arm {arm}: no model: give --{arm.lower()} URL#MODEL or --model-{arm.lower()}"
        )
    return _Target(url=chosen_url, model=chosen_model)


def _generator(
    args: argparse.Namespace, target: _Target, api_key: str | None
) -> OpenAICompatibleGenerator:
    from probewise.responses.generators import OpenAICompatibleGenerator

    return OpenAICompatibleGenerator(
        target.url,
        target.model,
        api_key=api_key,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        concurrency=args.concurrency,
        timeout=args.timeout,
        retries=args.retries,
        max_response_bytes=args.max_response_bytes,
        chat=not args.completions,
        system_prompt=args.system_prompt,
        stream=args.stop_when_decided,
    )


def run(args: argparse.Namespace) -> int:
    from probewise.cli._tables import paired_document
    from probewise.responses.arms import run_paired
    from probewise.responses.generators import shown_url
    from probewise.responses.stats import OutcomeBucket

    prompts = read_prompts(args.prompts)
    # Read before any request is sent: a bad file must not cost a whole run.
    calibration = None if args.calibration is None else read_calibration(args.calibration)
    targets = (
        _target("A", args.a, args.url, args.model_a),
        _target("B", args.b, args.url, args.model_b),
    )
    api_key: str | None = None
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise InvalidInputError(f"the environment variable {args.api_key_env} is not set")
    generator_a, generator_b = (_generator(args, t, api_key) for t in targets)
    try:
        result = run_paired(
            prompts,
            generator_a,
            generator_b,
            progress=False if args.no_progress else None,
            checkpoint=args.checkpoint,
            resume_anyway=args.resume_anyway,
            stop_when_decided=args.stop_when_decided,
        )
    except KeyboardInterrupt:
        resume = " (rerun the same command to resume)" if args.checkpoint else ""
        print(f"probewise arms: interrupted{resume}", file=sys.stderr)
        return 1
    errors = result.tally_a.error + result.tally_b.error
    # A rubric indistinguishable from chance on the labelled sample raises
    # CalibrationError here (exit 2), after the run: its outcomes are checkpointed.
    corrected = None if calibration is None else calibration.compare(result.tally_a, result.tally_b)
    if args.json:
        document = paired_document(result)
        document.update(
            {
                "prompts": len(prompts),
                "complete": errors == 0,
                "arms": {
                    name: {"url": shown_url(t.url), "model": t.model}
                    for name, t in zip(("a", "b"), targets, strict=True)
                },
                "rates": {
                    "a": _rates(result.tally_a),
                    "b": _rates(result.tally_b),
                },
                "pairs": [
                    {
                        "id": p.prompt_id,
                        "a": OutcomeBucket.of(p.a).value,
                        "b": OutcomeBucket.of(p.b).value,
                    }
                    for p in result.pairs
                ],
            }
        )
        if corrected is not None:
            document["corrected"] = corrected.to_dict()
        print(json.dumps(document, indent=2, sort_keys=True))
    else:
        _print(result, targets)
        if corrected is not None:
            print(f"calibrated: {corrected}")
    if errors:
        print(
            f"probewise arms: incomplete: {result.tally_a.error} prompts in arm A and "
            f"{result.tally_b.error} in arm B got no usable answer (the Error bucket)",
            file=sys.stderr,
        )
        return 1
    return 0


def _rates(tally: ArmTally) -> dict[str, object]:
    from probewise.cli._tables import BUCKET_ROWS

    return {
        name: {"over": over, **tally.rate(bucket, over=over).to_dict()}
        for name, bucket, over in BUCKET_ROWS
    }


def _tokens(tally: ArmTally) -> str:
    """Tokens generated per prompt, over the prompts whose count the server gave."""
    if not tally.counted:
        return "not counted"
    return f"{tally.tokens_per_prompt:.1f} ({tally.counted} prompts)"


def _print(result: PairedResult, targets: tuple[_Target, _Target]) -> None:
    from probewise.cli._tables import BUCKET_ROWS
    from probewise.responses.generators import shown_url
    from probewise.responses.stats import OutcomeBucket

    a, b = result.tally_a, result.tally_b
    print(f"probewise arms: {len(result.pairs)} prompts (texts are never shown)")
    for name, target in zip("AB", targets, strict=True):
        print(f"  arm {name}: {shown_url(target.url)} #{target.model}")
    print()
    header = (
        f"{'bucket':<10} {'over':<9} {'arm A':<30} {'arm B':<30} "
        f"{'only A':>6} {'only B':>6} {'McNemar p':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, bucket, over in BUCKET_ROWS:
        test = result.test(OutcomeBucket(name))
        ra, rb = a.rate(bucket, over=over), b.rate(bucket, over=over)
        print(
            f"{name:<10} {over:<9} {ra!s:<30} {rb!s:<30} "
            f"{test.only_a:>6} {test.only_b:>6} {test.p_value:>9.3g}"
        )
    print(f"{'truncated':<10} {'all':<9} {f'{a.truncated}/{a.n}':<30} {b.truncated}/{b.n}")
    print(f"{'decided':<10} {'all':<9} {f'{a.decided}/{a.n}':<30} {b.decided}/{b.n}")
    print(f"{'tokens':<10} {'/prompt':<9} {_tokens(a):<30} {_tokens(b)}")
    print(
        "\nintervals: Wilson score, 95%. McNemar: exact, two-sided, over the prompts whose "
        "bucket differs between the arms."
    )
    print(f"control: {result.control.state.value}: {result.control.summary()}")
