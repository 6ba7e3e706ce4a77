"""The one JSON path of the value objects: :func:`unstructure` and :func:`structure`.

Every value object is an attrs class, so its JSON is read off ``attrs.fields``: a field
becomes a key of the same name, in field order; an enum is written as its value, a
tuple (or list) as a list, a NamedTuple as an object, a mapping as an object (enum keys
by value), a nested value object as an object, ``None`` as ``null``, and a float as
it is (NaN and infinities included: the callers that write JSON pass
``allow_nan=False`` where the figure must be finite). :func:`structure` reads the
same shape back, by the fields' annotations, and builds the class (so its validators
run); a key that is not the class's, a missing key without a default, or a value of
the wrong JSON type raises :class:`~probewise.errors.InvalidInputError` naming it
(``ArmTally.complied must be an int, got str``).

Where a class's JSON is not its fields as they stand, the difference is declared
once, as a :class:`Shape` registered for the class (:func:`register`, or the
:func:`shaped` decorator): derived figures written beside the fields (``after``),
fields moved (``after``), left out (``omit``) or left out when None
(``omit_if_none``), a fixed format tag (``constant``), a key computed by a function
of the object (``derived``: a nested figure flattened, a method's result), NaN (or any non-finite float)
written as ``null`` (``nan_as_none``, ``finite_or_none``), and a field with a JSON
form of its own (``codecs``: a matrix as nested objects, a mapping keyed by pairs as
a list of records). The field list itself is never repeated.

**attrs, not cattrs.** cattrs would be a new dependency and it does not earn its
place here: what it adds over ``attrs.fields`` is generic (un)structuring by type and
a hook registry, which is about the smallest part of this module. The classes' JSON
needs derived keys placed among the fields, NaN as ``null`` on some fields only, a
format constant, and the project's own one-line errors
(:class:`~probewise.errors.InvalidInputError` naming ``Class.field``); in cattrs each
of those is a custom hook or an override per class anyway, its structuring errors are
exception groups (``ClassValidationError``) that would have to be translated back,
and its hooks are typed with ``Any``, which the strict typing here would have to wall
off. The walk over attrs fields, enums, tuples, NamedTuples and mappings below is
about 150 lines and has no dependency beyond attrs, which every value object already
uses.

This is the shared base (``probewise._json``): both halves import it.
"""

from __future__ import annotations

import enum
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Final, Never, TypeAlias, TypeVar, cast, final

import attrs

from probewise.errors import ArgumentTypeError, InvalidInputError

__all__ = [
    "Codec",
    "JsonValue",
    "Shape",
    "register",
    "shaped",
    "structure",
    "to_dict",
    "unstructure",
]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""What :func:`json.loads` returns and :func:`json.dumps` takes."""

_T = TypeVar("_T")
_C = TypeVar("_C", bound=type)


@final
@attrs.frozen(kw_only=True)
class Codec:
    """A field's own JSON form: ``dump`` writes the field's value, ``load`` reads it back
    (and raises :class:`~probewise.errors.InvalidInputError` on a bad document).

    ``load`` may return anything the class's constructor accepts for the field (its
    converter runs).
    """

    dump: Callable[[object], JsonValue]
    load: Callable[[JsonValue], object]


def _names(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


def _keys(value: Mapping[str, str | None]) -> Mapping[str, str | None]:
    return types.MappingProxyType(dict(value))


_NO_KEYS: Final[Mapping[str, str | None]] = types.MappingProxyType({})
_NO_CONSTANTS: Final[Mapping[str, JsonValue]] = types.MappingProxyType({})
_NO_CODECS: Final[Mapping[str, Codec]] = types.MappingProxyType({})
_NO_DERIVED: Final[Mapping[str, Callable[[Never], object]]] = types.MappingProxyType({})


@final
@attrs.frozen(kw_only=True)
class Shape:
    """How a class's JSON differs from its fields in field order (every option empty: not at all).

    ``after`` places keys, in the order given: each key goes right after the key it
    maps to (``None``: first). A key that is a field is moved; one that is not is a
    derived figure, read with ``getattr`` (a property) unless ``constant`` gives its
    value or ``derived`` a function that computes it. ``structure`` ignores derived
    keys and checks constant ones.
    """

    after: Mapping[str, str | None] = attrs.field(default=_NO_KEYS, converter=_keys)
    """Keys placed right after another (``None``: first); non-fields are derived."""
    constant: Mapping[str, JsonValue] = attrs.field(default=_NO_CONSTANTS)
    """Keys with a fixed value (a format tag); place them with ``after``."""
    omit: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    """Fields never written (``structure`` then needs their default)."""
    omit_if_none: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    """Fields not written when None."""
    nan_as_none: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    """Keys whose NaN floats (at any depth) are written as null (read back as NaN)."""
    finite_or_none: frozenset[str] = attrs.field(default=frozenset(), converter=_names)
    """Keys whose non-finite floats (NaN, infinities) are written as null."""
    codecs: Mapping[str, Codec] = attrs.field(default=_NO_CODECS)
    """Fields with a JSON form of their own."""
    derived: Mapping[str, Callable[[Never], object]] = attrs.field(default=_NO_DERIVED)
    """Keys computed by a function of the object (typed on its class), written as
    :func:`unstructure` writes the result: for a figure that is no property of the
    class (a nested one flattened, ``operator.attrgetter("call.head_dim")``; a
    method's result, ``operator.methodcaller("lost_reasons")``). Place them with
    ``after``; a field named here is written from the function (dump only)."""


_PLAIN: Final = Shape()
_SHAPES: dict[type, Shape] = {}
_PLANS: dict[type, tuple[Shape, tuple[str, ...]]] = {}
"""Each class's shape and JSON keys, worked out on first use."""
_HINTS: dict[type, dict[str, object]] = {}


def register(cls: type, shape: Shape) -> None:
    """Declare ``cls``'s JSON shape (an attrs class; once, or again with an equal shape)."""
    if not attrs.has(cls):
        raise ArgumentTypeError(f"{cls.__name__} is not an attrs class")
    known = _SHAPES.get(cls)
    if known is not None and known != shape:
        raise ArgumentTypeError(f"{cls.__name__} already has another JSON shape")
    _SHAPES[cls] = shape
    _PLANS.pop(cls, None)


def shaped(shape: Shape) -> Callable[[_C], _C]:
    """:func:`register` as a class decorator (put it above ``@attrs.frozen``)."""

    def apply(cls: _C) -> _C:
        register(cls, shape)
        return cls

    return apply


def _plan(cls: type) -> tuple[Shape, tuple[str, ...]]:
    """The class's shape and its JSON keys, in order."""
    plan = _PLANS.get(cls)
    if plan is None:
        shape = _SHAPES.get(cls, _PLAIN)
        keys = [f.name for f in attrs.fields(cls) if f.name not in shape.omit]
        for key, anchor in shape.after.items():
            if key in keys:
                keys.remove(key)
            keys.insert(0 if anchor is None else keys.index(anchor) + 1, key)
        plan = _PLANS[cls] = (shape, tuple(keys))
    return plan


def _hints(cls: type) -> dict[str, object]:
    """The class's resolved annotations (cached)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


# --------------------------------------------------------------------------- writing

_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def unstructure(value: object) -> JsonValue:
    """``value`` as plain JSON values (see the module docstring for the rules)."""
    if type(value) in _SCALARS:  # the common case first (an enum's type is never one)
        return cast("JsonValue", value)
    if isinstance(value, enum.Enum):
        return unstructure(cast("object", value.value))
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if attrs.has(type(value)):
        return _object(cast("attrs.AttrsInstance", value))
    fields = _named_fields(type(value))
    if fields is not None:
        return {key: unstructure(cast("object", getattr(value, key))) for key in fields}
    if isinstance(value, tuple | list):
        return [unstructure(item) for item in cast("tuple[object, ...]", value)]
    if isinstance(value, Mapping):
        pairs = cast("Mapping[object, object]", value).items()
        return {_key(key): unstructure(item) for key, item in pairs}
    raise ArgumentTypeError(f"no JSON form for {type(value).__name__}")


def _named_fields(cls: type) -> tuple[str, ...] | None:
    """A NamedTuple class's field names (None for any other class)."""
    if not issubclass(cls, tuple):
        return None
    fields = cast("object", getattr(cast("object", cls), "_fields", None))
    return cast("tuple[str, ...]", fields) if isinstance(fields, tuple) else None


def _key(key: object) -> str:
    if isinstance(key, enum.Enum):
        key = cast("object", key.value)
    if not isinstance(key, str):
        raise ArgumentTypeError(
            f"a JSON object key must be a str or a str enum, got {type(key).__name__}"
        )
    return key


def to_dict(value: attrs.AttrsInstance) -> dict[str, object]:
    """A value object as a JSON object, in its :class:`Shape` (the body of its ``to_dict``)."""
    out: dict[str, object] = {**_object(value)}
    return out


def _object(value: attrs.AttrsInstance) -> dict[str, JsonValue]:
    cls = type(value)
    shape, keys = _plan(cls)
    if shape is _PLAIN:
        return {key: unstructure(cast("object", getattr(value, key))) for key in keys}
    out: dict[str, JsonValue] = {}
    for key in keys:
        if key in shape.constant:
            out[key] = shape.constant[key]
            continue
        derive = shape.derived.get(key)
        item = (
            cast("object", getattr(value, key))
            if derive is None
            else cast("Callable[[object], object]", derive)(value)
        )
        if item is None and key in shape.omit_if_none:
            continue
        codec = shape.codecs.get(key)
        written = unstructure(item) if codec is None else codec.dump(item)
        if key in shape.finite_or_none:
            written = _nulled(written, math.isfinite)
        elif key in shape.nan_as_none:
            written = _nulled(written, lambda x: not math.isnan(x))
        out[key] = written
    return out


def _nulled(value: JsonValue, keep: Callable[[float], bool]) -> JsonValue:
    """``value`` with every float that ``keep`` refuses replaced by None."""
    if isinstance(value, float):
        return value if keep(value) else None
    if isinstance(value, list):
        return [_nulled(item, keep) for item in value]
    if isinstance(value, dict):
        return {key: _nulled(item, keep) for key, item in value.items()}
    return value


# --------------------------------------------------------------------------- reading


def structure(data: object, cls: type[_T], *, ignore_unknown: bool = False) -> _T:
    """Build ``cls`` (an attrs class) from what :func:`unstructure` wrote for it.

    A key that is not the class's raises, unless ``ignore_unknown`` (at every depth:
    a reader of documents that others extend, such as the CLI's).
    """
    return _structure(data, cls, strict=not ignore_unknown)


def _structure(data: object, cls: type[_T], *, strict: bool) -> _T:
    make: Callable[..., _T] = cls
    if not attrs.has(cls):
        raise ArgumentTypeError(f"{cls.__name__} is not an attrs class")
    name = cls.__name__
    document = _mapping(data, name)
    shape, expected = _plan(cls)
    unknown = sorted(set(document) - set(expected))
    if unknown and strict:
        raise InvalidInputError(f"unknown {name} fields {unknown}; expected {list(expected)}")
    for key, tag in shape.constant.items():
        if document.get(key) != tag:
            raise InvalidInputError(f"{name}.{key} must be {tag!r}")
    hints = _hints(cls)
    kwargs: dict[str, object] = {}
    for field in attrs.fields(cls):
        if not field.init:
            continue
        key, where = field.name, f"{name}.{field.name}"
        if key in shape.omit or key not in document:
            if field.default is attrs.NOTHING:
                raise InvalidInputError(f"{where} is missing")
            continue
        raw = cast("JsonValue", document[key])
        codec = shape.codecs.get(key)
        nan = key in shape.nan_as_none or key in shape.finite_or_none
        kwargs[field.alias or key] = (
            codec.load(raw)
            if codec is not None
            else _load(raw, hints[key], where, nan=nan, strict=strict)
        )
    return make(**kwargs)


def _mapping(data: object, where: str) -> dict[str, object]:
    if not isinstance(data, Mapping):
        # a value: what a JSON document holds, read as input, not an argument's type
        raise InvalidInputError(f"{where} must be an object, got {type(data).__name__}")
    out: dict[str, object] = {}
    for key, item in cast("Mapping[object, object]", data).items():
        if not isinstance(key, str):
            raise InvalidInputError(f"{where} has a key that is not a string")
        out[key] = item
    return out


def _load(value: object, hint: object, where: str, *, nan: bool, strict: bool) -> object:
    """``value`` read as the annotation ``hint``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType or origin is typing.Union:
        return _load_union(value, args, where, nan=nan, strict=strict)
    if hint is None or hint is types.NoneType:
        if value is not None:
            # a value: what a JSON document holds, read as input, not an argument's type
            raise InvalidInputError(f"{where} must be null, got {type(value).__name__}")
        return None
    if origin is tuple or origin is list:
        items = _list(value, where)
        if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
            if len(items) != len(args):
                raise InvalidInputError(f"{where} must hold {len(args)} items, got {len(items)}")
            return tuple(
                _load(x, t, f"{where}[{i}]", nan=nan, strict=strict)
                for i, (x, t) in enumerate(zip(items, args, strict=True))
            )
        loaded = [
            _load(x, args[0], f"{where}[{i}]", nan=nan, strict=strict) for i, x in enumerate(items)
        ]
        return tuple(loaded) if origin is tuple else loaded
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        pairs = _mapping(value, where).items()
        return {
            _load(k, args[0], where, nan=False, strict=strict): _load(
                v, args[1], f"{where}.{k}", nan=nan, strict=strict
            )
            for k, v in pairs
        }
    if isinstance(hint, type):
        return _load_type(value, hint, where, nan=nan, strict=strict)
    raise ArgumentTypeError(f"{where}: no JSON reading for {hint!r}")


def _load_union(
    value: object, args: tuple[object, ...], where: str, *, nan: bool, strict: bool
) -> object:
    if value is None and types.NoneType in args:
        return None
    options = [arg for arg in args if arg is not types.NoneType]
    for option in options[:-1]:
        try:
            return _load(value, option, where, nan=nan, strict=strict)
        except InvalidInputError:
            pass
    return _load(value, options[-1], where, nan=nan, strict=strict)


def _load_type(value: object, hint: type, where: str, *, nan: bool, strict: bool) -> object:
    got, cls = type(value).__name__, cast("type[object]", hint)
    if hint is bool:
        if not isinstance(value, bool):
            raise InvalidInputError(f"{where} must be a bool, got {got}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputError(f"{where} must be an int, got {got}")
        return value
    if hint is float:
        if value is None and nan:
            return math.nan
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInputError(f"{where} must be a number, got {got}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise InvalidInputError(f"{where} must be a string, got {got}")
        return value
    if issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            raise InvalidInputError(f"{where}: unknown {hint.__name__} {value!r}") from None
    return _load_class(value, cls, where, nan=nan, strict=strict)


def _load_class(
    value: object, hint: type[object], where: str, *, nan: bool, strict: bool
) -> object:
    """``value`` read as a value object or a NamedTuple."""
    if attrs.has(hint):
        return _structure(value, hint, strict=strict)
    fields = _named_fields(hint)
    if fields is not None:
        document = _mapping(value, where)
        hints = _hints(hint)
        make: Callable[..., object] = hint
        unknown = sorted(set(document) - set(fields))
        if unknown and strict:
            raise InvalidInputError(f"unknown {where} fields {unknown}; expected {list(fields)}")
        loaded = {
            key: _load(document.get(key), hints[key], f"{where}.{key}", nan=nan, strict=strict)
            for key in fields
        }
        return make(**loaded)
    raise ArgumentTypeError(f"{where}: no JSON reading for {hint.__name__}")


def _list(value: object, where: str) -> list[object]:
    if not isinstance(value, list | tuple):
        # a value: what a JSON document holds, read as input, not an argument's type
        raise InvalidInputError(f"{where} must be an array, got {type(value).__name__}")
    return list(cast("list[object]", value))
