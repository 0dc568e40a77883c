"""Text that corral shows to other people as it was written: a node change's reason, a cancel's
message, a checkpoint's description, a config revision's description and tags.

Such text may not hold NUL (no database stores it) nor a Unicode bidirectional control
(U+202A-U+202E, U+2066-U+2069): a right-to-left override makes text display in another order
than it is stored, so that ``drain\u202e...`` reads as something else on every page and in
every log that shows it (CVE-2021-42574's "Trojan Source").
"""

from __future__ import annotations

#: The characters that reorder how text displays.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: A JSON Schema pattern of text without them (nor NUL).
SHOWN_PATTERN = "^[^\\u0000\\u202a-\\u202e\\u2066-\\u2069]*$"


def shown_text_refusal(text: str) -> str | None:
    """Why ``text`` may not be shown as written, or None."""
    for character in text:
        if character == "\x00":
            return "text must not contain NUL characters (\\u0000)"
        if character in BIDI_CONTROLS:
            return (
                f"text must not contain the bidirectional control U+{ord(character):04X}: it "
                "makes the text display in another order than it is written"
            )
    return None
