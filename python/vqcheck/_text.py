"""_text: one JSON line as vqcheck's readers take it.

Python's json.dumps writes a lone surrogate (a file or tensor name decoded
with "surrogateescape", a str cut between the halves of a pair) as a \\udcXX
escape, which is valid JSON text but not UTF-8: jansson refuses the whole
line. The rule is checkers/utf8.h's: a character that is not valid UTF-8
becomes '?'."""

import json
from typing import Any


def json_line(obj: Any) -> bytes:
    """obj as one JSON line (compact, ending in a newline), UTF-8, every
    lone surrogate replaced by '?'."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return (text + "\n").encode("utf-8", "replace")


def json_text(obj: Any) -> str:
    """json_line(obj) as a str, without the newline."""
    return json_line(obj)[:-1].decode("utf-8")
