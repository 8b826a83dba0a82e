"""Writes one rank's digest trace, format `vqcheck-trace/1`
(docs/trace-format.md): one JSON line per tensor per checked step, flushed at
the end of every step so a killed job keeps every step it finished.

A file of that name that is not a vqcheck trace is never overwritten: a job's
own `rank-0.trace.jsonl` (say, from another tool) raises FileExistsError."""
from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import IO, Any, Dict, Iterable, List, Optional, Tuple

from ._text import json_text

SCHEMA = "vqcheck-trace/1"
DIGEST_ALGO = "vqc-xxh3-tree-1"

# (tensor name, dtype name, shape, digest)
# (name, dtype, shape, digest), or with (..., group, shard) for a tensor a
# replica group holds (docs/trace-format.md "Replica groups").
Entry = Tuple[Any, ...]


class LinkRefused(OSError):
    """A file of a run directory that vqcheck will not write: a symbolic
    link (never followed), a file that is not a regular one, or a hard link
    (another name of a file elsewhere). The message names it and says what
    to do, as the C library's (vqc/fsutil.h "Links")."""


def open_run_file(path: str, truncate: bool = False,
                  append: bool = False) -> int:
    """Opens path for writing as every writer of a run directory does
    (vqc/fsutil.h vqc_open_write): O_WRONLY | O_CREAT | O_NOFOLLOW |
    O_CLOEXEC (and O_APPEND when asked), mode 0644; raises LinkRefused for a
    link, a file that is not regular or one with other hard links, before
    anything is truncated; truncates after that check when asked. Returns
    the descriptor (the caller closes it)."""
    flags = (os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC |
             os.O_NONBLOCK | (os.O_APPEND if append else 0))
    link = (f"refusing to write through the link {path}: remove it (vqcheck "
            "never follows links in a run directory)")
    try:
        # O_NONBLOCK: a FIFO planted there must not block the open.
        fd = os.open(path, flags, 0o644)
    except OSError:
        if os.path.islink(path):
            raise LinkRefused(link) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise LinkRefused(f"refusing to write {path}: it is not a regular "
                              "file; move it away and run again")
        if st.st_nlink > 1:
            raise LinkRefused(f"refusing to write {path}: it is a hard link "
                              f"({st.st_nlink} names), so another file would "
                              "be written through it; remove it (vqcheck "
                              "writes only files of its own in a run "
                              "directory)")
        os.set_blocking(fd, True)
        if truncate:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_run_file(tmp: str, path: str) -> None:
    """os.replace(tmp, path), refusing (LinkRefused) a link at path: a
    rename would replace the link, not follow it, but the rule is the C
    library's: a link in a run directory is an error, never used."""
    if os.path.islink(path):
        os.unlink(tmp)
        raise LinkRefused(f"refusing to write through the link {path}: remove "
                          "it (vqcheck never follows links in a run "
                          "directory)")
    os.replace(tmp, path)


def trace_path(out_dir: str, rank: int) -> str:
    return os.path.join(out_dir, f"rank-{rank}.trace.jsonl")


def is_vqcheck_trace(path: str) -> bool:
    """True for an empty file or one whose first line is a trace line."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1 << 20)
    except OSError:
        return False
    if not first.strip():
        return True
    try:
        line = json.loads(first)
    except ValueError:
        return False
    return isinstance(line, dict) and line.get("schema") == SCHEMA


def line_name(name: str) -> str:
    """A tensor's name as a trace line may hold it (docs/trace-format.md:
    non-empty, under 256 bytes of UTF-8, no NUL): itself when it fits;
    else its first 200 bytes, "...#" and 16 hex digits of a hash of the
    whole name, the same on every rank, so a deeply nested module's
    tensor still has a line (a longer name made a trace vqcheck compare
    itself refused, exit 2)."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    text = text.replace("\0", "?") or "?"
    raw = text.encode("utf-8")
    if len(raw) < 256:
        return text
    tag = hashlib.blake2b(raw, digest_size=8).hexdigest()
    return raw[:200].decode("utf-8", "ignore") + "...#" + tag


def _clean_program(program: Optional[str]) -> Optional[str]:
    """The program name as valid UTF-8 (a file name with undecodable bytes
    reaches Python as lone surrogates, which no JSON reader accepts) of at
    most 200 bytes (the trace format allows < 256)."""
    if not program:
        return None
    text = program.encode("utf-8", "surrogateescape").decode("utf-8",
                                                             "replace")
    return text.encode("utf-8")[:200].decode("utf-8", "ignore")


class TraceWriter:
    """rank-<rank>.trace.jsonl in out_dir. The directory is created if
    needed; an existing vqcheck trace of that name is replaced."""

    def __init__(self, out_dir: str, rank: int, program: Optional[str]):
        self.path = trace_path(out_dir, rank)
        self.rank = rank
        self.program = _clean_program(program)
        os.makedirs(out_dir, exist_ok=True)
        if os.path.islink(self.path):
            raise LinkRefused(f"refusing to write through the link "
                              f"{self.path}: remove it (vqcheck never follows "
                              "links in a run directory)")
        if os.path.lexists(self.path) and not is_vqcheck_trace(self.path):
            raise FileExistsError(
                f"{self.path} exists and is not a vqcheck trace; vqcheck "
                "never overwrites it: choose another out= directory or move "
                "the file")
        # O_NOFOLLOW: a link put there since the check is refused too.
        fd = open_run_file(self.path, truncate=True)
        self._file: Optional[IO[str]] = os.fdopen(fd, "w", encoding="utf-8")
        # step -> [(name, why, unchecked)]: the tensors left out of that
        # step's digests (left_out), written after its lines
        self._left_out: Dict[int, List[Tuple[str, str, bool]]] = {}

    def left_out(self, step: int, name: str, why: str,
                 unchecked: bool) -> None:
        """Tensor `name` is left out of step `step`'s digests (why;
        unchecked: it held contents nothing compared): a not_digested line
        (docs/trace-format.md) goes after that step's lines, so that a
        comparison of these traces never reads as clean while the tensor
        went unchecked. (A step's lines may be written on another thread,
        later: each step keeps its own.)"""
        # (a reason is under 512 bytes of UTF-8 in a trace: cut at 500)
        why = why.encode("utf-8", "replace")[:500].decode("utf-8", "ignore")
        self._left_out.setdefault(step, []).append(
            (name, why, bool(unchecked)))

    def write_step(self, step: int, entries: Iterable[Entry]) -> None:
        """The lines of one step, in the given order, then a flush."""
        f = self._file
        if f is None:
            raise ValueError(f"{self.path} is closed")
        for entry in entries:
            # (name, dtype, shape, digest) or, for a tensor held by a
            # replica group (docs/trace-format.md "Replica groups"),
            # (name, dtype, shape, digest, group, shard[, values]): group a
            # list of ranks or None (every rank), shard a string or None,
            # values None or the elements of a small tensor (at most 8
            # finite floats: docs/trace-format.md "values").
            name, dtype, shape, digest = entry[:4]
            group = entry[4] if len(entry) > 4 else None
            shard = entry[5] if len(entry) > 5 else None
            values = entry[6] if len(entry) > 6 else None
            line = {"schema": SCHEMA, "rank": self.rank, "step": step,
                    "tensor": line_name(name), "dtype": dtype,
                    "shape": list(shape),
                    "digest_algo": DIGEST_ALGO, "digest": f"{digest:016x}"}
            if self.program:
                line["program"] = self.program
            if group is not None:
                line["group"] = sorted(int(r) for r in group)
            if shard:
                line["shard"] = str(shard)
            if values:
                line["values"] = [float(v) for v in values]
            f.write(json_text(line))
            f.write("\n")
        for name, why, unchecked in self._left_out.pop(step, ()):
            line = {"schema": SCHEMA, "rank": self.rank, "step": step,
                    "tensor": line_name(name),
                    "not_digested": why or "no reason given",
                    "unchecked": unchecked}
            if self.program:
                line["program"] = self.program
            f.write(json_text(line))
            f.write("\n")
        f.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def remove_stale_traces(out_dir: str, world_size: int) -> list:
    """Removes vqcheck traces of ranks >= world_size from out_dir (left by an
    earlier run with more ranks; `vqcheck compare` would read them as ranks
    of this run). Only files that are vqcheck traces are removed; returns
    their paths."""
    removed = []
    try:
        names = os.listdir(out_dir)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith("rank-") and name.endswith(".trace.jsonl")):
            continue
        digits = name[len("rank-"):-len(".trace.jsonl")]
        if not digits.isdigit() or int(digits) < world_size:
            continue
        path = os.path.join(out_dir, name)
        if not os.path.islink(path) and os.path.isfile(path) and \
                is_vqcheck_trace(path):
            os.remove(path)
            removed.append(path)
    return removed
