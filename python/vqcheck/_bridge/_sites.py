"""Call sites: which frame is the user's, what a call line's argument reads,
and warnings shown at the user's line rather than at a bridge wrapper's.

Frames in any file of the vqcheck package (_PACKAGE_DIR, python/vqcheck/,
this subpackage included) are the bridge's. Imports only _patching.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from ._patching import patch

# vqcheck's own files: the package's folder (the parent of this one), with
# a separator.
_PACKAGE_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")


def outside(frame: Any) -> Any:
    """The first frame outside torch and vqcheck: the user's call site."""
    skip = (os.sep + "torch" + os.sep, os.sep + "vqcheck" + os.sep)
    while frame is not None and any(s in frame.f_code.co_filename
                                    for s in skip):
        frame = frame.f_back
    return frame


def user_frames(tb: Any) -> list:
    """The frames of traceback tb as (file, line, function), outermost
    first, without the bridge's own (a wrapper the exception passed
    through is not where it happened)."""
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(_PACKAGE_DIR):
            frames.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    return frames


def innermost_user_frame(frames: list) -> Any:
    """Of user_frames' list, the innermost outside torch and vqcheck (the
    user's line that led to the error); the innermost of all when every
    frame is torch's; None for none."""
    skip = (os.sep + "torch" + os.sep, os.sep + "vqcheck" + os.sep)
    for f in reversed(frames):
        if not any(s in f[0] for s in skip):
            return f
    return frames[-1] if frames else None


def argument_text(source: str, op: str, index: int = 0) -> str:
    """The text of argument `index` in a call line such as
    `self.all_reduce_fn(embed_sum.contiguous())`: best effort, '' if the
    line is not one call or has fewer arguments."""
    start = source.find("(")
    if start < 0:
        return ""
    depth, begin, args = 0, start + 1, []
    for i in range(start, len(source)):
        ch = source[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(source[begin:i].strip())
                break
        elif ch == "," and depth == 1:
            args.append(source[begin:i].strip())
            begin = i + 1
    return args[index] if index < len(args) else ""


def keep_warnings_at_the_callers_line() -> None:
    """A warning torch raises inside a collective the bridge wraps (with
    stacklevel=2, "your call") would name the bridge's wrapper as its
    place. warnings.showwarning is wrapped (once; whatever the program or
    logging installs later replaces it) to show such a warning at the line
    that called the wrapper, where it would be without the bridge."""
    import warnings

    def make(shown: Any) -> Any:
        def showwarning(message: Any, category: Any, filename: str,
                        lineno: int, file: Any = None,
                        line: Any = None) -> None:
            if filename.startswith(_PACKAGE_DIR):
                f = sys._getframe(1)
                while f is not None and \
                        not f.f_code.co_filename.startswith(_PACKAGE_DIR):
                    f = f.f_back  # up to the bridge's frame
                while f is not None and \
                        f.f_code.co_filename.startswith(_PACKAGE_DIR):
                    f = f.f_back  # and past it: its caller
                if f is not None:
                    filename, lineno, line = f.f_code.co_filename, \
                        f.f_lineno, None
            shown(message, category, filename, lineno, file, line)
        return showwarning
    patch(warnings, "showwarning", make)
