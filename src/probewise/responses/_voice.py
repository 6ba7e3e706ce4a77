"""The model's own voice: what :func:`probewise.classify` sets aside before the opening.

Replies to role-play and jailbreak prompts seldom start in the model's own voice. They
open with a speaker or persona tag (``DAN:``, ``[CLASSIC]``, ``**Name**:``, an emoji
tag), a markdown header or emphasis, a stage direction, a quoted echo of the request
or a code fence, and the refusal comes after it. Opening rules anchored on the first
characters miss it. And some answer twice, once per persona: such a reply is read
answer by answer.

This module finds both on the raw text, by shape only (no phrase of any set):

- :func:`voice` gives the text of one answer with its leading tags set aside: tags
  removed, a header or stage direction kept as a sentence of its own (so that the
  rules read it as a short first sentence, and a refusal written as a header or in
  italics still counts), markdown emphasis removed. ``None`` when the text opens in
  plain prose (the common case: :func:`voice` returns at once).
- :func:`later_answers` gives where the later answers of a reply start: a persona tag
  at the start of a line (a bracketed tag, or a name with two or more capitals:
  ``DAN``, ``ChatGPT``, ``Developer Mode``), not a section label (``Note:``).

Nothing here keeps, logs or returns text but to its caller, classify.
"""

from __future__ import annotations

import re

import regex

from probewise.responses import _reach

__all__ = ["LATER_ANSWERS", "NEAR", "later_answers", "plain", "voice"]

# Symbols that tag a speaker: emoji, dingbats, pictographs, private-use glyphs, and the
# joiners and selectors that build emoji sequences.
_SYMBOL = r"[\p{So}\p{Sk}\p{Co}\p{Cs}\u2190-\u2bff\ufe0e\ufe0f\u200d\u20e3]"
# A bracketed tag: [CLASSIC], (Developer Mode Output), 【GPT】, <DAN>. Up to five
# words, no sentence punctuation: "(I can't.)" is not a tag.
_BRACKETED = (
    r"(?:\[[^\[\]\n.,!?;\"]{1,48}\]|\([^()\n.,!?;\"]{1,48}\)|\u3010[^\u3010\u3011\n]{1,48}\u3011"
    r"|<[^<>\n.,!?;\"/=]{1,48}>)"
)
# A name: words that start with a capital or a digit, or have a capital inside
# ("iDAN"), up to four, with symbols and bracketed parts around them.
_NAME_WORD = (
    r"(?:[\p{Lu}\p{N}][\p{L}\p{N}_.'&+\-]{0,24}|\p{Ll}{1,4}\p{Lu}[\p{L}\p{N}_.'&+\-]{0,20})"
)
_NAME = (
    r"(?:"
    + _SYMBOL
    + r"{0,4}[ \t]?"
    + _NAME_WORD
    + r"(?:[ \t]{1,2}(?:"
    + _SYMBOL
    + r"{1,4}|"
    + _NAME_WORD
    + r"|"
    + _BRACKETED
    + r")){0,4}[ \t]?"
    + _SYMBOL
    + r"{0,4})"
)
# Markdown emphasis around a tag ("**DAN:**", "**DAN**:", "_Name_:").
_MARK = r"(?:\*{1,3}|_{1,3}|~~)"
# One item of what is set aside at the start of an answer.
_ITEM = regex.compile(
    r"(?P<space>[ \t\r\n\u00a0\u3000]+)"
    r"|(?P<fence>```[^\n`]{0,40}(?:\n|$))"
    r"|(?P<quote>>[ \t]?)"
    r"|(?P<header>\#{1,6}[ \t]+(?P<heading>[^\n]{0,120}?)[ \t#]*(?:\n|$))"
    r"|(?P<tag>(?:" + _MARK + r")?(?:" + _BRACKETED + r"(?:" + _MARK + r")?[ \t]*:?"
    r"|(?P<named>" + _NAME + r")(?:" + _MARK + r")?[ \t]*:(?:" + _MARK + r")?"
    r"|" + _SYMBOL + r"{1,8}(?:" + _MARK + r")?[ \t]*:?"
    r"|(?![\p{Latin}\p{Common}])\p{L}(?:" + _MARK + r")?:?)(?=[ \t\r\n*_]|$))"
    r"|(?P<aside>(?P<open>\*|_)(?![*_ ])(?P<words>[^*_\n]{1,100}?)(?<! )(?P=open)(?![*_\w]))"
    r"|(?P<mark>" + _MARK + r")",
    regex.V0,
)
# One word with one capital, its first letter: a label, not a persona.
_ONE_CAPITAL = regex.compile(r"[ \t]*\p{Lu}\p{Ll}*[ \t]*", regex.V0)
# A quoted echo of the request: a quoted question at the start.
_ECHO = regex.compile(r"[\"\u201c][^\"\u201c\u201d\n]{1,300}\?[\"\u201d]", regex.V0)
# Emphasis markers inside the text ("I **cannot** help"): removed before normalising.
_EMPHASIS = regex.compile(r"\*{1,3}|(?<![\p{L}\p{N}])_{1,3}|_{1,3}(?![\p{L}\p{N}])|~~", regex.V0)
# Where an answer may start in plain prose: the first character is a letter and no
# colon is near (a name tag ends in one). Anything else is looked at.
_NEAR = 64
NEAR = _NEAR  # (what plain() reads: classify's decision point needs it)
_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# What a name tag at the start of a text that opens with an ASCII letter must look
# like, loosely (every name tag ``_ITEM`` sets aside there matches it): a first word,
# up to four more that do not start with a lower-case letter (but "iDAN"), a colon.
# Prose with a colon ("The short answer is yes: ...") fails it at once.
_NAME_LIKE = re.compile(
    r"[A-Za-z][^\s:]{0,40}(?:[ \t]{1,2}(?:[^\sa-z:]|[a-z]{1,4}[A-Z])[^\s:]{0,40}){0,4}"
    r"[ \t]?[^\s\w:]{0,8}[ \t]*:"
)
_ITEMS_LIMIT = 12
# The most characters other than whitespace and "#" that one match of _ITEM, _ECHO or
# _NAME_LIKE consumes or looks at (about 300: a named tag, the echo): their unbounded
# parts take only those (see _reach.scanned).
_SPAN = 512

# A persona tag at the start of a line, the start of a later answer.
LATER_ANSWERS = regex.compile(
    r"\n[ \t>#*_]*(?:(?P<bracketed>" + _BRACKETED + r")(?:" + _MARK + r")?[ \t]*:?"
    r"|(?P<name>" + _NAME + r")(?:" + _MARK + r")?[ \t]*:)(?=[ \t\r\n*_])",
    regex.V0,
)


def plain(raw: str) -> bool:
    """Whether ``raw`` opens in plain prose, with nothing to set aside: an ASCII letter
    first and no colon or asterisk near (the common case, answered at once)."""
    head = raw[:_NEAR]
    return head[:1] in _ASCII_LETTERS and ":" not in head and "*" not in head


def voice(raw: str) -> tuple[str, bool] | None:
    """The text of an answer with what opens it set aside, and whether a tag was among
    it; None when there is nothing to set aside."""
    if raw[:1] in _ASCII_LETTERS and "*" not in raw[:_NEAR] and _NAME_LIKE.match(raw) is None:
        _reach.scanned(raw, 0, _SPAN)
        return None
    kept: list[str] = []
    at = 0
    tagged = False
    for _ in range(_ITEMS_LIMIT):
        found = _ITEM.match(raw, at)
        if found is None or found.end() == at:
            break
        if found.group("named") is not None and _ONE_CAPITAL.fullmatch(found.group("named")):
            break  # "Note:", "Answer:": a label that the reply's own voice may start with
        if found.group("header") is not None:
            kept.append(found.group("heading"))
        elif found.group("aside") is not None:
            kept.append(found.group("words"))
        # Space, a fence, a quote marker, a tag or a bare emphasis marker: set aside.
        tagged = tagged or found.group("tag") is not None
        at = found.end()
    _reach.scanned(raw, at, _SPAN)  # (every item above was matched at or before at)
    echo = _ECHO.match(raw, at)
    if echo is not None:
        at = echo.end()
    if at == 0 and not kept:
        if "*" in raw[:_NEAR] or "_" in raw[:_NEAR]:
            return _EMPHASIS.sub("", raw), False
        return None
    rest = raw[at:]
    if "*" in rest or "_" in rest or "~" in rest:
        rest = _EMPHASIS.sub("", rest)
    return (f"{_sentence(kept)} {rest}" if kept else rest), tagged


def _sentence(kept: list[str]) -> str:
    """Headers and stage directions as one sentence (the rules read one short first
    sentence before a refusal)."""
    words = ", ".join(filter(None, (_EMPHASIS.sub("", part).strip(" .!?") for part in kept)))
    return words + "." if words else ""


# A name that reads as a persona, not a section label: a capital inside a word or
# next to a digit ("DAN", "ChatGPT", "GPT-4"), not "Note" or "Step one".
_PERSONA = regex.compile(r"\p{Lu}[\p{L}\p{N}]*\p{Lu}|\p{Lu}\p{N}|\p{N}\p{Lu}", regex.V0)


def later_answers(raw: str, start: int, end: int, *, tagged: bool) -> list[int]:
    """Where the later answers of ``raw`` start: the positions (in ``start..end``) of
    persona tags at the start of a line. In a reply whose first answer opened with a
    tag (``tagged``), a bracketed tag or a name with two capitals or more; in one that
    opened in plain prose, a bracketed tag or a persona's name (see ``_PERSONA``):
    there a section label ("Step One:") is part of the first answer."""
    found: list[int] = []
    for match in LATER_ANSWERS.finditer(raw, start, end):
        name = match.group("name")
        if name is not None:
            if tagged and sum(char.isupper() for char in name) < 2:
                continue
            if not tagged and _PERSONA.search(name) is None:
                continue
        found.append(match.start() + 1)
    return found
