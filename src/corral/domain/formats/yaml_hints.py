"""What to change when YAML does not parse.

PyYAML says what its parser found ("mapping values are not allowed here"); a user needs
to know what to change in the file. Each hint names the mistake that most often causes
that problem, and where the construct it concerns began.
"""

from __future__ import annotations

import re

import yaml

_UNSTARTABLE = re.compile(r"found character '(.+)' that cannot start any token")
_UNCLOSED_FLOW = re.compile(r"expected ',' or '([\]}])', but got")
_BLOCK_END = re.compile(r"expected <block end>, but found '(.+)'")
_OPENER = {"]": "[", "}": "{"}


def yaml_problem(err: yaml.MarkedYAMLError) -> str:
    """PyYAML's problem, and what to change to fix it when a common cause is known."""
    problem = err.problem or err.context or "syntax error"
    if problem == "second occurrence" and err.context:  # PyYAML's words for a duplicate anchor
        problem = err.context.split(";")[0]
    hint = _hint(problem, err.context or "", _where(err.context_mark))
    return f"{problem}; {hint}" if hint else problem


def _where(mark: yaml.Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "above"


def _hint(problem: str, context: str, began: str) -> str:
    for matches in _HINTS:
        hint = matches(problem, context, began)
        if hint:
            return hint
    return ""  # no common cause is known: PyYAML's own words are all there is


def _mapping_value(problem: str, context: str, began: str) -> str:
    if problem != "mapping values are not allowed here":
        return ""
    return (
        "a value holding ': ' must be quoted (\"...\"), and a key must line up with "
        "the keys beside it"
    )


def _unstartable(problem: str, context: str, began: str) -> str:
    found = _UNSTARTABLE.match(problem)
    if not found:
        return ""
    if found.group(1) == "\\t":
        return "indent with spaces; YAML does not allow tabs"
    return f'a value that starts with {found.group(1)} must be quoted ("...")'


def _unclosed_quote(problem: str, context: str, began: str) -> str:
    if context != "while scanning a quoted scalar":
        return ""
    return f"the quote opened at {began} is never closed"


def _unclosed_flow(problem: str, context: str, began: str) -> str:
    found = _UNCLOSED_FLOW.match(problem)
    if found:
        opener = _OPENER[found.group(1)]
        return (
            f"the {opener} opened at {began} is not closed; close it, or separate its "
            "items with ', '"
        )
    if problem.startswith("expected the node content, but found '<stream end>'"):
        return "the text ends inside a [ or {; close it"
    return ""


def _block_end(problem: str, context: str, began: str) -> str:
    found = _BLOCK_END.match(problem)
    if not found:
        return ""
    if found.group(1) in _OPENER:
        return f"this {found.group(1)} closes nothing; remove it, or quote the value"
    if context == "while parsing a block collection":
        return (
            f"this line does not continue the list that began at {began}: start each item "
            "with '- ' at the same indentation"
        )
    return (
        f"this line's indentation does not match the keys of the mapping that began at "
        f"{began}; line it up with them (with spaces)"
    )


def _missing_colon(problem: str, context: str, began: str) -> str:
    if context != "while scanning a simple key":
        return ""
    return (
        f"the text at {began} is neither a key ('name: value') nor part of the value "
        "above it; add ': ' after it, or indent it under its key"
    )


def _undefined_alias(problem: str, context: str, began: str) -> str:
    if not problem.startswith("found undefined alias"):
        return ""
    return 'a value that starts with * must be quoted ("..."), or define its &anchor first'


def _duplicate_anchor(problem: str, context: str, began: str) -> str:
    if not context.startswith("found duplicate anchor"):
        return ""
    return f"the first is at {began}; give each anchor its own name"


def _unknown_tag(problem: str, context: str, began: str) -> str:
    if not problem.startswith("could not determine a constructor for the tag"):
        return ""
    return "corral reads plain YAML only: remove the tag, or quote the value"


_HINTS = (
    _mapping_value,
    _unstartable,
    _unclosed_quote,
    _unclosed_flow,
    _block_end,
    _missing_colon,
    _undefined_alias,
    _duplicate_anchor,
    _unknown_tag,
)
