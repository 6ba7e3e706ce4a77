"""Build a large Kineto-style Chrome trace by replicating a small one.

Usage::

    python benchmarks/make_big_trace.py \\
        --source ../shared/fixtures/traces/nccl_data.json.gz \\
        --target-mb 500 --out /tmp/big/rank0.json

The source (plain or gzip JSON, told apart by content) is loaded whole; its
``traceEvents`` are then written again and again, streaming, until the output is at
least ``--target-mb`` MiB of plain JSON. The output is deterministic: the same source
and options give the same bytes.

Each copy ``c`` (0, 1, ...) is shifted so that the copies do not overlap:

* ``ts`` moves by ``c * stride_us`` where ``stride_us`` is the source's time span
  (earliest ``ts`` to latest ``ts + dur``) rounded up to a whole microsecond, plus
  ``--gap-us``. The shift is done in decimal, so a ``ts`` written with three decimals
  (Kineto's nanosecond resolution) keeps exactly three; an integer ``ts`` stays one.
* flow ids (``id`` of ``s``/``f`` events), ``args.correlation`` and
  ``args["External id"]`` move by ``c * id_stride`` (a power of ten above every id in
  the source), so a kernel still pairs with its own launch in its own copy.
* ``ProfilerStep#N`` becomes ``ProfilerStep#(N + c * steps)`` where ``steps`` is the
  number of step numbers the source spans, so every copy has its own steps.
* metadata events (``ph == "M"``: process and thread names) are written once, with
  copy 0, as Kineto writes them once per trace.

``dur`` and everything else stays as it is. The top-level keys of the source are kept
in their order (those before ``traceEvents`` and those after it, such as
``displayTimeUnit`` and ``baseTimeNanoseconds``); a source without
``distributedInfo`` gets ``{"rank": 0}`` so HolisticTraceAnalysis finds its rank.
Events are written one per line (``json.dumps``), joined by ``",\\n"``.

The script prints, and writes to ``<out>.expected.json``, the size, the event count and
the totals a correct reader must find: the sum of ``dur`` over events with ``cat``
``kernel``, ``gpu_memcpy`` and ``gpu_memset`` in every copy (``math.fsum``). It also
writes the totals after HolisticTraceAnalysis's rounding of each event to whole
microseconds (``ceil(ts)`` to ``floor(ts + dur)``), which is what HTA reports.

Note that ``<out>.expected.json`` ends in ``.json``: do not point a tool that reads
every ``*.json`` in a directory (HTA does) at the output's directory.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import math
import os
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
STEP_RE = re.compile(r"ProfilerStep#(\d+)")


def load_source(path: Path) -> tuple[dict[str, Any], str]:
    """The source document and the SHA-256 of its bytes as stored."""
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise SystemExit(f"{path}: not a Chrome trace object with a traceEvents list")
    return doc, digest


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def decimal_of(value: int | float) -> Decimal:
    """The decimal the trace wrote (repr of a parsed float gives back its shortest text)."""
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def time_span(events: list[dict[str, Any]]) -> tuple[Decimal, Decimal]:
    starts: list[Decimal] = []
    ends: list[Decimal] = []
    for event in events:
        ts = event.get("ts")
        if not is_number(ts):
            continue
        start = decimal_of(ts)
        starts.append(start)
        dur = event.get("dur")
        ends.append(start + decimal_of(dur) if is_number(dur) else start)
    if not starts:
        raise SystemExit("the source has no event with a numeric ts")
    return min(starts), max(ends)


def id_stride_of(events: list[dict[str, Any]]) -> int:
    biggest = 0
    for event in events:
        if is_number(event.get("id")):
            biggest = max(biggest, int(event["id"]))
        args = event.get("args")
        if isinstance(args, dict):
            for key in ("correlation", "External id"):
                if is_number(args.get(key)):
                    biggest = max(biggest, int(args[key]))
    return 10 ** len(str(biggest))


def step_count(events: list[dict[str, Any]]) -> int:
    numbers = [
        int(m.group(1))
        for event in events
        if isinstance(event.get("name"), str) and (m := STEP_RE.fullmatch(event["name"]))
    ]
    return max(numbers) - min(numbers) + 1 if numbers else 0


class Template:
    """One source event as JSON text with holes for what changes between copies."""

    def __init__(self, event: dict[str, Any]) -> None:
        holes: dict[str, object] = {}
        shaped = copy.deepcopy(event)
        if is_number(event.get("ts")):
            holes["ts"] = decimal_of(event["ts"])
            shaped["ts"] = "\x00ts\x00"
        if is_number(event.get("id")) and event.get("ph") in {"s", "f", "t"}:
            holes["id"] = int(event["id"])
            shaped["id"] = "\x00id\x00"
        args = shaped.get("args")
        if isinstance(args, dict):
            if is_number(args.get("correlation")):
                holes["corr"] = int(args["correlation"])
                args["correlation"] = "\x00corr\x00"
            if is_number(args.get("External id")):
                holes["ext"] = int(args["External id"])
                args["External id"] = "\x00ext\x00"
        name = event.get("name")
        if isinstance(name, str) and (match := STEP_RE.fullmatch(name)):
            holes["step"] = int(match.group(1))
            shaped["name"] = "\x00step\x00"
        self.holes = holes
        self.ts_is_int = isinstance(event.get("ts"), int)
        if "\\u0000" in json.dumps(event):
            raise SystemExit("the source holds NUL characters; cannot template it")
        text = json.dumps(shaped)
        # JSON escapes NUL as \u0000, so the placeholders read "\u0000ts\u0000".
        text = text.replace("%", "%%")
        self.text = re.sub(r'"\\u0000(\w+)\\u0000"', r"%(\1)s", text)
        self.metadata = event.get("ph") == "M"
        cat = event.get("cat")
        dur = event.get("dur")
        self.device = cat if cat in DEVICE_CATEGORIES and is_number(dur) else None
        self.dur = float(dur) if is_number(dur) else 0.0

    def render(self, shift_us: Decimal, id_shift: int, step_shift: int) -> tuple[str, float]:
        """This event's text in one copy, and its ``ts`` as a reader parses it."""
        values: dict[str, str] = {}
        ts_float = 0.0
        for key, value in self.holes.items():
            if key == "ts":
                assert isinstance(value, Decimal)
                moved = value + shift_us
                if self.ts_is_int and moved == moved.to_integral_value():
                    values["ts"] = str(int(moved))
                    ts_float = float(int(moved))
                else:
                    ts_float = float(moved)
                    values["ts"] = repr(ts_float)
            elif key == "step":
                assert isinstance(value, int)
                values["step"] = json.dumps(f"ProfilerStep#{value + step_shift}")
            else:
                assert isinstance(value, int)
                values[key] = str(value + id_shift)
        return (self.text % values if values else self.text.replace("%%", "%")), ts_float


def top_level_text(key: str, value: object) -> str:
    return f"  {json.dumps(key)}: {json.dumps(value)}"


def build(source: Path, target_bytes: int, out: Path, gap_us: int) -> dict[str, Any]:
    doc, digest = load_source(source)
    events: list[dict[str, Any]] = doc["traceEvents"]
    keys = list(doc)
    if "distributedInfo" not in doc:
        keys.insert(keys.index("traceEvents"), "distributedInfo")
        doc = {**doc, "distributedInfo": {"rank": 0}}
    index = keys.index("traceEvents")
    head = "{\n" + "".join(top_level_text(k, doc[k]) + ",\n" for k in keys[:index])
    head += '  "traceEvents": [\n'
    tail_items = [top_level_text(k, doc[k]) for k in keys[index + 1 :]]
    tail = "\n  ]" + "".join(",\n" + item for item in tail_items) + "\n}\n"

    first, last = time_span(events)
    stride_us = math.ceil(last - first) + gap_us
    id_stride = id_stride_of(events)
    steps = step_count(events)
    templates = [Template(e) for e in events]

    durs: dict[str, list[float]] = {c: [] for c in DEVICE_CATEGORIES}
    rounded: dict[str, int] = dict.fromkeys(DEVICE_CATEGORIES, 0)
    counts: dict[str, int] = dict.fromkeys(DEVICE_CATEGORIES, 0)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    written = 0
    event_count = 0
    copies = 0
    with partial.open("w", encoding="ascii", newline="\n", buffering=8 << 20) as fh:
        fh.write(head)
        written += len(head)
        tail_size = len(tail)
        separator = ""
        while copies == 0 or written + tail_size < target_bytes:
            c = copies
            shift = Decimal(c * stride_us)
            chunk: list[str] = []
            for template in templates:
                if template.metadata and c > 0:
                    continue
                text, ts = template.render(shift, c * id_stride, c * steps)
                chunk.append(text)
                if template.device is not None:
                    durs[template.device].append(template.dur)
                    counts[template.device] += 1
                    rounded[template.device] += math.floor(ts + template.dur) - math.ceil(ts)
            body = separator + ",\n".join(chunk)
            fh.write(body)
            written += len(body)
            event_count += len(chunk)
            separator = ",\n"
            copies += 1
        fh.write(tail)
        written += len(tail)
    os.replace(partial, out)
    size = out.stat().st_size
    assert size == written, (size, written)
    return {
        "trace": str(out),
        "bytes": size,
        "mib": round(size / (1 << 20), 3),
        "events": event_count,
        "copies": copies,
        "source": str(source),
        "source_sha256": digest,
        "source_events": len(events),
        "stride_us": stride_us,
        "gap_us": gap_us,
        "id_stride": id_stride,
        "steps_per_copy": steps,
        "kernel_us": math.fsum(durs["kernel"]),
        "memcpy_us": math.fsum(durs["gpu_memcpy"]),
        "memset_us": math.fsum(durs["gpu_memset"]),
        "kernel_events": counts["kernel"],
        "memcpy_events": counts["gpu_memcpy"],
        "memset_events": counts["gpu_memset"],
        "hta_rounded": {
            "note": "sum of floor(ts + dur) - ceil(ts) per event, HTA's whole-microsecond rounding",
            "kernel_us": rounded["kernel"],
            "memcpy_us": rounded["gpu_memcpy"],
            "memset_us": rounded["gpu_memset"],
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source", type=Path, required=True, help="small Kineto trace (.json[.gz])"
    )
    parser.add_argument("--target-mb", type=float, default=500.0, help="minimum size, MiB")
    parser.add_argument("--out", type=Path, required=True, help="output .json path")
    parser.add_argument("--gap-us", type=int, default=1000, help="idle time between copies")
    args = parser.parse_args(argv)
    if args.target_mb <= 0 or args.gap_us < 0:
        parser.error("--target-mb must be positive and --gap-us not negative")
    result = build(args.source, int(args.target_mb * (1 << 20)), args.out, args.gap_us)
    expected = args.out.with_name(args.out.name + ".expected.json")
    expected.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {result['trace']}: {result['bytes']:,} bytes ({result['mib']:.1f} MiB)")
    print(f"  {result['events']:,} events in {result['copies']} copies of {args.source}")
    print(f"  stride {result['stride_us']} us, id stride {result['id_stride']}")
    print(f"  kernel_us  = {result['kernel_us']!r} ({result['kernel_events']:,} events)")
    print(f"  memcpy_us  = {result['memcpy_us']!r} ({result['memcpy_events']:,} events)")
    print(f"  memset_us  = {result['memset_us']!r} ({result['memset_events']:,} events)")
    hta = result["hta_rounded"]
    print(
        f"  HTA-rounded: kernel {hta['kernel_us']} us, memcpy {hta['memcpy_us']} us,"
        f" memset {hta['memset_us']} us"
    )
    print(f"  expected totals: {expected}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
