"""The fast path: a run of events decoded once, as a tagged union on ``cat``.

The exact path (``Totals.add_exact``) decodes every event of a run into an Event and
then counts (ph, cat) and picks the device events and launches out of them. Most events
(host ops, flows) are only counted, so building their name, ts, dur and args is
wasted. FastPath decodes a run once as a msgspec tagged union on ``cat``, with one
struct class per category seen so far in the file: host categories keep only ``ph``
(msgspec skips, and still validates, the rest); device-lane categories keep the
Event fields; runtime categories keep ``ts`` and a typed ``args`` (the correlation,
so their args need no second decode). ``ph`` is a literal of the phases the trace
format defines, so it allocates nothing, and counting is a Counter over classes. In
a run whose bytes hold a "ProfilerStep#N" string, host ops also keep name, ts and
dur (a second union over the same categories): a step span is a host op.

It never decides what it is not sure of: wherever its decode raises (invalid JSON, a
field of an unexpected type, a ``ph`` outside the format, an event without ``cat`` or
with a non-string one, a run that closes the array, nesting too deep) the parser runs
the exact path on the same bytes, so damage, salvage and every total are the exact
path's. A category not seen before gets its classes and the run is decoded again (a
trace has a few tens of categories).
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Iterator
from itertools import compress, repeat
from typing import ClassVar, Final, Literal, Union, cast, final

import msgspec

from probewise.throughput.readers._steps import step_names
from probewise.throughput.readers._totals import (
    K_CPU,
    K_OTHER,
    K_RUNTIME,
    K_SYNC,
    Args64,
    Event,
    Totals,
    category,
)

__all__ = ["FastPath"]

_PH: Final = operator.attrgetter("ph")
_NAME: Final = operator.attrgetter("name")
_TS: Final = operator.attrgetter("ts")
_ARGS: Final = operator.attrgetter("args")
_CORRELATION_OF: Final = operator.attrgetter("correlation")


_Phase = Literal[
    "B", "E", "X", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "N", "O", "D",
    "M", "V", "v", "R", "c", "S", "T", "p", "F",
]  # fmt: skip
"""Every ``ph`` the Chrome trace event format defines (and its deprecated aliases)."""


class _Tagged(msgspec.Struct, gc=False, tag_field="cat"):
    """An event of a category that is only counted (``cat``: a class attribute)."""

    cat: ClassVar[str]
    ph: _Phase | None = None


class _Device(_Tagged):
    """A device-lane event: the fields :meth:`Totals._lane` reads."""

    name: msgspec.Raw = msgspec.Raw(b"null")
    ts: int | float | None = None
    dur: int | float | str | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


class _Named(_Tagged):
    """A host op in a run that holds a step name: the fields :meth:`Totals._step` reads."""

    name: msgspec.Raw = msgspec.Raw(b"null")
    ts: int | float | None = None
    dur: int | float | str | None = None


class _Launch(_Tagged):
    """A runtime call: its start and correlation id (``None`` where it has none)."""

    ts: int | float | None = None
    args: Args64 = msgspec.field(default_factory=Args64)


_UNKNOWN_CAT: Final = re.compile(r"Invalid value '(.*)' - at `\$\[\d+\]\.cat`", re.DOTALL)
_NO_CATEGORY: Final = "\x00probewise: no category yet"  # a tag no trace uses


@final
class FastPath:
    """Decodes runs of events for :meth:`Totals.tally`; one per file (it learns its categories)."""

    def __init__(self) -> None:
        # [plain, with step names]: category -> class
        self._classes: tuple[dict[str, type[_Tagged]], dict[str, type[_Tagged]]] = ({}, {})
        self._codes: dict[type[_Tagged], int] = {}
        self._decoders: list[msgspec.json.Decoder[list[_Tagged]] | None] = [None, None]

    def add(self, totals: Totals, doc: bytes) -> bool:
        """Add the events of ``doc`` (a JSON array) to ``totals``; False: nothing was added,
        the exact path decides."""
        steps = step_names(doc)
        events = self._decode(doc, steps=bool(steps))
        if events is None:
            return False
        if events:
            self.add_tagged(events, totals, steps)
        return True

    def add_tagged(self, events: list[_Tagged], totals: Totals, steps: set[bytes]) -> None:
        """The fast path: add a run decoded as tagged events, as the exact path would.

        ``steps`` holds the step names the run's bytes contain (the host ops are then
        :class:`_Named`).
        """
        codes = self._codes
        totals.events += len(events)
        classes = cast("Iterator[type[_Tagged]]", map(type, events))
        by_class = Counter(classes)  # first-seen order, as the exact path's cats
        cats: Counter[str | None] = Counter()
        for cls, n in by_class.items():
            cats[cls.cat] += n
        totals.cat_counts.update(cats)
        phases = list(map(_PH, events))
        if phases.count("X") != len(phases):
            not_spans = compress(events, map(operator.ne, phases, repeat("X")))
            for cls, n in Counter(cast("Iterator[type[_Tagged]]", map(type, not_spans))).items():
                totals.not_span_counts[cls.cat] += n
        named = {cls for cls in by_class if issubclass(cls, _Named)}
        if steps and named:
            ops = list(compress(events, map(named.__contains__, map(type, events))))
            names = list(map(_NAME, ops))
            lengths = {len(target) for target in steps}
            for at in compress(range(len(names)), map(lengths.__contains__, map(len, names))):
                if bytes(names[at]) in steps:
                    totals.add_step(cast("Event", ops[at]))
        lane = {cls for cls in by_class if codes[cls] <= K_SYNC}
        runtime = {cls for cls in by_class if codes[cls] == K_RUNTIME}
        if runtime and not (totals.steps or totals.always_launches):
            totals.skipped_launches += sum(by_class[cls] for cls in runtime)
            runtime = set[type[_Tagged]]()
        if lane:
            picked = events if len(lane) == len(by_class) else _pick(events, lane)
            totals.add_lane(cast("list[Event]", picked))
        if runtime:
            launches = cast(
                "list[_Launch]",
                events if len(runtime) == len(by_class) else _pick(events, runtime),
            )
            totals.add_launches(
                list(map(_CORRELATION_OF, map(_ARGS, launches))), list(map(_TS, launches))
            )

    def _decode(self, doc: bytes, *, steps: bool) -> list[_Tagged] | None:
        for _ in range(64):  # a new category per try
            decoder = self._decoders[steps] or self._rebuild(steps=steps)
            try:
                return decoder.decode(doc)
            except msgspec.ValidationError as error:
                unknown = _UNKNOWN_CAT.fullmatch(str(error))
                if unknown is None or not self._learn(unknown.group(1)):
                    return None
            except (msgspec.DecodeError, RecursionError):
                return None
        return None  # pragma: no cover - over 64 new categories in one run

    def _learn(self, cat: str) -> bool:
        """Make the classes of a new category (False: known, so it failed for another reason)."""
        if cat in self._classes[0]:
            return False
        code = category(cat)
        for steps, classes in enumerate(self._classes):
            base = (
                _Device
                if code <= K_SYNC
                else _Launch
                if code == K_RUNTIME
                else _Named
                if steps and code in (K_CPU, K_OTHER)
                else _Tagged
            )
            cls = cast(
                "type[_Tagged]",
                msgspec.defstruct(
                    f"_Category{len(self._codes)}",
                    [],
                    bases=(base,),
                    tag=cat,
                    gc=False,
                    namespace={"cat": cat},
                ),
            )
            classes[cat] = cls
            self._codes[cls] = code
        self._decoders = [None, None]
        return True

    def _rebuild(self, *, steps: bool) -> msgspec.json.Decoder[list[_Tagged]]:
        if not self._classes[0]:
            self._learn(_NO_CATEGORY)  # a union needs a class before any is seen
        classes = tuple(self._classes[steps].values())
        union = classes[0] if len(classes) == 1 else Union[classes]  # noqa: UP007
        decoder = cast(
            "msgspec.json.Decoder[list[_Tagged]]",
            msgspec.json.Decoder(list[union]),  # type: ignore[valid-type]
        )
        self._decoders[steps] = decoder
        return decoder


def _pick(events: list[_Tagged], classes: set[type[_Tagged]]) -> list[_Tagged]:
    """The events of these classes, in order (one C-level pass)."""
    return list(compress(events, map(classes.__contains__, map(type, events))))
