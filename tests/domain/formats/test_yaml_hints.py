"""A YAML syntax error says what to change, and where the construct it concerns began."""

import pytest

from corral.domain.formats.documents import parse_document
from corral.errors import UserError

CASES = [
    (
        "command: echo a: b\n",
        "w.yaml:1:16: invalid YAML: mapping values are not allowed here; a value holding "
        "': ' must be quoted (\"...\"), and a key must line up with the keys beside it",
    ),
    (
        "a:\n  b: 1\n c: 2\n",
        "w.yaml:3:2: invalid YAML: expected <block end>, but found '<block mapping start>'; "
        "this line's indentation does not match the keys of the mapping that began at line 1, "
        "column 1; line it up with them (with spaces)",
    ),
    (
        "a:\n  - x\n  y: 1\n",
        "w.yaml:3:3: invalid YAML: expected <block end>, but found '?'; this line does not "
        "continue the list that began at line 2, column 3: start each item with '- ' at the "
        "same indentation",
    ),
    (
        "a:\n\tb: 1\n",
        "w.yaml:2:1: invalid YAML: found character '\\t' that cannot start any token; indent "
        "with spaces; YAML does not allow tabs",
    ),
    (
        "a: @x\n",
        "w.yaml:1:4: invalid YAML: found character '@' that cannot start any token; a value "
        'that starts with @ must be quoted ("...")',
    ),
    (
        'a: "abc\n',
        "w.yaml:2:1: invalid YAML: found unexpected end of stream; the quote opened at line 1, "
        "column 4 is never closed",
    ),
    (
        "a: [1, 2\nb: 3\n",
        "w.yaml:2:2: invalid YAML: expected ',' or ']', but got ':'; the [ opened at line 1, "
        "column 4 is not closed; close it, or separate its items with ', '",
    ),
    (
        "a: [1, 2]]\n",
        "w.yaml:1:10: invalid YAML: expected <block end>, but found ']'; this ] closes "
        "nothing; remove it, or quote the value",
    ),
    (
        "a: 1\nb\nc: 2\n",
        "w.yaml:3:1: invalid YAML: could not find expected ':'; the text at line 2, column 1 "
        "is neither a key ('name: value') nor part of the value above it; add ': ' after it, "
        "or indent it under its key",
    ),
    (
        "a: *nope\n",
        "w.yaml:1:4: invalid YAML: found undefined alias 'nope'; a value that starts with * "
        'must be quoted ("..."), or define its &anchor first',
    ),
    (
        "a: &x 1\nb: &x 2\n",
        "w.yaml:2:4: invalid YAML: found duplicate anchor 'x'; the first is at line 1, "
        "column 4; give each anchor its own name",
    ),
    (
        "a: !!python/object x\n",
        "w.yaml:1:4: invalid YAML: could not determine a constructor for the tag "
        "'tag:yaml.org,2002:python/object'; corral reads plain YAML only: remove the tag, "
        "or quote the value",
    ),
]


@pytest.mark.parametrize(("text", "message"), CASES)
def test_a_syntax_error_says_what_to_change(text: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_document(text, "w.yaml")
    assert caught.value.message == message
