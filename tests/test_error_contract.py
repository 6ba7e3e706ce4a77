"""The error contract: every error a user can cause is a ProbewiseError.

Checked on the source itself (an AST walk of every module in ``src/probewise``) and
on the shared validators in :mod:`probewise._validation`.
"""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import probewise.errors as errors

# Private: each shared validator is called on its own; the public classes each use only a few.
from probewise import _validation as v
from probewise.errors import ArgumentTypeError, InvalidInputError, ProbewiseError

SRC = Path(__file__).resolve().parents[1] / "src" / "probewise"

#: Every builtin exception class: raising one bare escapes ``except ProbewiseError``.
BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)

#: The marker a raise that guards an internal invariant (a bug in probewise, never
#: reachable from user input) carries on its line.
INTERNAL = "# internal:"


def _raised_name(node: ast.Raise) -> str | None:
    exc = node.exc
    target = exc.func if isinstance(exc, ast.Call) else exc
    return target.id if isinstance(target, ast.Name) else None


def _uses_attrs_validators(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "validators"
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").endswith(".validators") or any(
            alias.name == "validators" for alias in node.names
        )
    return False


#: The marker, on the line above, of a raise whose message names a type that is not a
#: wrong argument type (a JSON document's content, the type of a caught error).
A_VALUE = "# a value:"


def _names_a_type(node: ast.Raise) -> bool:
    """Whether the raised error's arguments call ``type(...)``: its message names the
    type of what it got, which is what a wrong type's message does."""
    return node.exc is not None and any(
        isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "type"
        for inner in ast.walk(node.exc)
    )


def contract_breaches(source: str, where: str) -> Iterator[str]:
    """``file:line: what`` for every bare builtin raise not marked internal, for every
    ``InvalidInputError`` whose message names the type it got (a wrong type, which is
    an ``ArgumentTypeError``: ``ArgumentTypeValueError`` where the field raised
    ``ValueError``) unless marked a value, and for every use of ``attrs.validators``
    (whose messages echo the value). (The errors of one kind of input, such as
    ``TraceFormatError`` or ``UnsupportedModelError``, name types of what the input
    holds.)"""
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise):
            name = _raised_name(node)
            if name in BUILTIN_EXCEPTIONS:
                span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
                if not any(INTERNAL in line for line in span):
                    yield f"{where}:{node.lineno}: raise {name} (use a probewise.errors class)"
            elif (
                name == "InvalidInputError"
                and _names_a_type(node)
                and not lines[node.lineno - 2].strip().startswith(A_VALUE)
            ):
                yield (
                    f"{where}:{node.lineno}: raise {name} naming a type (a wrong type is an "
                    "ArgumentTypeError, or ArgumentTypeValueError; else mark it a value)"
                )
        elif _uses_attrs_validators(node):
            yield f"{where}:{node.lineno}: attrs validators echo values (use probewise._validation)"


def test_the_walker_finds_what_it_looks_for() -> None:
    snippet = "\n".join(
        [
            "import attrs",
            "from attrs import validators",
            "def f(x):",
            "    if x:",
            "        raise ValueError(x)",
            "    if not x:",
            "        raise KeyError",
            "    raise RuntimeError('bug')  # internal: never reached",
            "x: int = attrs.field(validator=attrs.validators.ge(0))",
            "def g(x):",
            "    if x:",
            "        raise InvalidInputError(f'x must be an int, got {type(x).__name__}')",
            "    # a value: the type named is the error's",
            "    raise InvalidInputError(f'failed: {type(x).__name__}')",
            "    raise ArgumentTypeValueError(f'x must be an int, got {type(x).__name__}')",
        ]
    )
    found = list(contract_breaches(snippet, "m.py"))
    assert sorted(int(line.split(":")[1]) for line in found) == [2, 5, 7, 9, 12]
    assert "raise ValueError" in found[1]


def test_no_bare_builtin_raise_or_attrs_validator_in_src() -> None:
    modules = sorted(SRC.rglob("*.py"))
    assert len(modules) > 30
    breaches = [
        breach
        for path in modules
        for breach in contract_breaches(
            path.read_text(encoding="utf-8"), str(path.relative_to(SRC.parent))
        )
    ]
    assert not breaches, "\n".join(breaches)


def test_every_error_class_also_derives_from_a_builtin() -> None:
    """Each ProbewiseError subclass in probewise.errors is also a ValueError, OSError, ..."""
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, errors.ProbewiseError)
        and value is not errors.ProbewiseError
    ]
    assert len(classes) >= 11
    generic = {errors.ProbewiseError, Exception, BaseException, object}
    for cls in classes:
        builtin = [
            base for base in cls.__mro__ if base.__module__ == "builtins" and base not in generic
        ]
        assert builtin, f"{cls.__name__} derives from no builtin exception but Exception"


def _defined_errors() -> list[type[BaseException]]:
    return [
        value
        for value in vars(errors).values()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == errors.__name__
    ]


def _tree(cls: type[BaseException], classes: list[type[BaseException]], depth: int) -> list[str]:
    """``cls`` and its subclasses as the module docstring draws them: two spaces a level,
    the builtin bases (not our own) in brackets, children by name."""
    builtin = [base.__name__ for base in cls.__bases__ if base not in classes]
    line = "  " * depth + cls.__name__ + (f" ({', '.join(builtin)})" if builtin else "")
    children = [c for c in classes if c.__bases__[0] is cls]  # the first base is our parent
    lines = [line]
    for child in sorted(children, key=lambda c: c.__name__):
        lines += _tree(child, classes, depth + 1)
    return lines


def test_errors_exports_every_class_and_its_docstring_draws_the_tree() -> None:
    classes = _defined_errors()
    assert set(errors.__all__) == {cls.__name__ for cls in classes} | {"DamageKind"}
    drawn = "\n".join("    " + line for line in _tree(errors.ProbewiseError, classes, 0))
    assert drawn in (errors.__doc__ or "")
    assert len(drawn.splitlines()) == len(classes)  # every class is in the tree


# --------------------------------------------------------------------------- validators

_Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]

#: name -> (validator, a value it refuses by range, the builtin base it raised before).
_RANGED: dict[str, tuple[_Validator, object, type[Exception]]] = {
    "count": (v.count, -1, ValueError),
    "non_negative_int": (v.non_negative_int, -1, ValueError),
    "optional(non_negative_int)": (v.optional(v.non_negative_int), -1, ValueError),
    "non_negative": (v.non_negative, -1, ValueError),
    "positive": (v.positive, 0, ValueError),
    "optional(positive)": (v.optional(v.positive), 0, ValueError),
    "finite": (v.finite, math.inf, ValueError),
    "finite_non_negative": (v.finite_non_negative, -0.5, ValueError),
    "share": (v.share, math.nan, ValueError),
    "optional(share)": (v.optional(v.share), 1.5, ValueError),
    "unit_or_nan": (v.unit_or_nan, 2.0, ValueError),
    "non_empty_str": (v.non_empty_str, "", ValueError),
    "non_blank_str": (v.non_blank_str, " \t", ValueError),
    "checked_type(int)": (v.checked_type(int), "", TypeError),
    "optional(checked_type(int))": (v.optional(v.checked_type(int)), "", TypeError),
}


def _holder(validator: _Validator) -> type:
    @attrs.frozen(kw_only=True)
    class Holder:
        field: object = attrs.field(validator=validator)

    return Holder


@pytest.mark.parametrize("name", sorted(_RANGED))
def test_each_validator_refuses_with_a_probewise_error_naming_the_field(name: str) -> None:
    validator, bad, base = _RANGED[name]
    with pytest.raises(ProbewiseError) as caught:
        _holder(validator)(field=bad)
    assert isinstance(caught.value, base)
    assert "Holder.field" in str(caught.value)


@pytest.mark.parametrize("name", sorted(n for n in _RANGED if not n.startswith("optional(")))
def test_optional_accepts_none_and_otherwise_refuses_as_its_inner_validator(name: str) -> None:
    validator, bad, _base = _RANGED[name]
    assert _holder(v.optional(validator))(field=None).field is None
    with pytest.raises(ProbewiseError) as inner:
        _holder(validator)(field=bad)
    with pytest.raises(ProbewiseError) as outer:
        _holder(v.optional(validator))(field=bad)
    assert type(outer.value) is type(inner.value)
    head, got, tail = str(inner.value).partition(", got ")
    assert str(outer.value) == f"{head} or None{got}{tail}"


def test_optional_says_none_is_accepted_where_the_message_shows_the_value() -> None:
    with pytest.raises(InvalidInputError, match=r"^Holder\.field must be >= 1 or None, got 0$"):
        _holder(v.optional(v.positive))(field=0)
    with pytest.raises(ArgumentTypeError, match=r"^Holder\.field must be a int or None, got str$"):
        _holder(v.optional(v.checked_type(int)))(field="x")


_SECRET = st.text(min_size=1).map(lambda text: "\u2063secret:" + text)


@pytest.mark.parametrize("name", sorted(set(_RANGED) - {"non_empty_str", "non_blank_str"}))
@given(text=_SECRET)
def test_a_wrong_typed_value_is_reported_by_type_never_echoed(name: str, text: str) -> None:
    validator, _bad, _base = _RANGED[name]
    with pytest.raises(ProbewiseError) as caught:
        _holder(validator)(field=text)
    message = str(caught.value)
    assert "\u2063secret:" not in message
    assert "str" in message


#: The validators for fields that have always refused any bad value with ValueError.
_VALUE_ERROR_ALWAYS = {"non_negative_int", "non_empty_str", "non_blank_str"}


@pytest.mark.parametrize("name", sorted(n for n in _RANGED if not n.startswith("optional(")))
def test_every_wrong_type_is_an_argument_type_error(name: str) -> None:
    # One convention: a wrong type is an ArgumentTypeError; where the field always raised
    # ValueError it is an ArgumentTypeValueError, an InvalidInputError as well.
    validator, _bad, _base = _RANGED[name]
    wrong = b"bytes" if name.startswith("checked_type") else object()
    with pytest.raises(ArgumentTypeError) as caught:
        _holder(validator)(field=wrong)
    legacy = name in _VALUE_ERROR_ALWAYS
    assert isinstance(caught.value, InvalidInputError) is legacy, type(caught.value)
    assert (type(caught.value) is errors.ArgumentTypeValueError) is legacy


@pytest.mark.parametrize(
    ("validator", "value"),
    [
        (v.strict_int, 1.5),
        (v.true_or_false, "yes"),
        (v.length_int, "8"),
    ],
)
def test_the_fields_that_raised_value_error_still_do_for_a_wrong_type(
    validator: _Validator, value: object
) -> None:
    with pytest.raises(errors.ArgumentTypeValueError) as caught:
        _holder(validator)(field=value)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, TypeError)
    assert repr(value) not in str(caught.value)  # named by its type only


def test_int_at_least_refuses_a_wrong_type_as_both() -> None:
    with pytest.raises(errors.ArgumentTypeValueError, match=r"^n must be an int >= 1, got str$"):
        v.int_at_least("n", "3", 1)


@given(value=st.one_of(st.text(), st.binary(), st.lists(st.integers())))
def test_a_value_that_does_not_compare_is_an_argument_type_error(value: object) -> None:
    # Before the shared set these escaped as the bare TypeError of ``value < 0``.
    for validator in (v.non_negative, v.positive, v.finite, v.share):
        with pytest.raises(ArgumentTypeError, match=r"Holder\.field must be a number, got"):
            _holder(validator)(field=value)


@given(value=st.floats(allow_nan=True))
def test_share_keeps_its_rule(value: float) -> None:
    holder = _holder(v.share)
    if 0.0 <= value <= 1.0:
        assert holder(field=value).field == value
    else:
        with pytest.raises(InvalidInputError):
            holder(field=value)


@given(value=st.floats(allow_nan=True, allow_infinity=True))
def test_duration_rounds_to_the_nanosecond_grid_or_refuses(value: float) -> None:
    # Durations live on a 1 ns grid, so one whose nanoseconds overflow a float is refused.
    if math.isfinite(value * 1000) and value >= 0:
        out = v.duration(value)
        assert math.isclose(out * 1000, round(out * 1000), abs_tol=1e-6)
        assert abs(out - value) <= 0.0005 + 1e-9 * value
    else:
        with pytest.raises(InvalidInputError, match="duration must be finite"):
            v.duration(value)
