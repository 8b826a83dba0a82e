"""The rank's files in the run directory: the bottom layer of the bridge.

Every other part of the bridge writes through one Records object, which
imports none of them (the other parts are handed it, as libuv's handles
are handed their loop). What it writes into VQC_WATCH_DIR, per rank r,
lazily at the first activity (a process that never trains, a DataLoader
worker, writes nothing):

  rank-<r>.live.jsonl      start / step / finished events and the ledger
                           lines of the rank's collectives, one write(2)
                           each on an O_APPEND descriptor
  rank-<r>.findings.jsonl  findings made in the process (run.json's finding
                           format), one line each, reported once per key
  rank-<r>.heartbeat       the time of the last sign of progress (_heartbeat)
  rank-<r>.stacks.txt      every thread's stack, on SIGUSR1 and at a hang
  rank-<r>.hang            the hang marker, written whole (a rename)

It also keeps which parts of the bridge an error turned off (fail), which
decides the rank's end status (status), and the lock the parts share.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Dict, Optional, Tuple

from .. import _core
from .._heartbeat import FINISHED, Heartbeat
from .._text import json_line
from .._trace import open_run_file, replace_run_file


class Records:
    """One process's files in run directory `out` (an absolute path)."""

    def __init__(self, out: str) -> None:
        self.out = out
        # The one lock of the bridge's parts: the files, and the tables the
        # parts change from several threads (collectives in flight, stages,
        # pending gathers, the step end).
        self.lock = threading.RLock()
        self.live_fd: Optional[int] = None
        self.heartbeat: Optional[Heartbeat] = None  # with the live record
        self.findings_fd: Optional[int] = None
        self.stacks_file: Any = None
        self.rank: Optional[int] = None
        self.reported_sites: set = set()
        self.failed = False                   # an unhandled exception
        self.disabled: set = set()            # parts turned off by an error
        self.disabled_by_io = False           # one of them by an OSError

    # -- who this process is

    def current_rank(self) -> int:
        torch = sys.modules.get("torch")
        if torch is not None:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                return dist.get_rank()
        try:
            return int(os.environ.get("RANK", "0"))
        except ValueError:
            return 0

    def world_size(self) -> int:
        torch = sys.modules.get("torch")
        if torch is not None:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                return dist.get_world_size()
        try:
            return int(os.environ.get("WORLD_SIZE", "1"))
        except ValueError:
            return 1

    # -- the live record

    def open_live(self) -> None:
        """rank-<r>.live.jsonl with its start line, at the first activity."""
        if self.live_fd is not None:
            return
        self.rank = self.current_rank()
        os.makedirs(self.out, exist_ok=True)
        path = os.path.join(self.out, f"rank-{self.rank}.live.jsonl")
        # Stacks on SIGUSR1 before the start line: `vqcheck watch` asks
        # only ranks with a live record for their stacks.
        self.register_stack_dumps()
        # Never through a link (LinkRefused names it; _trace.open_run_file).
        self.live_fd = open_run_file(path, truncate=True, append=True)
        try:
            self.heartbeat = Heartbeat(os.path.join(
                self.out, f"rank-{self.rank}.heartbeat"))
        except OSError as e:
            self.fail("heartbeat", e)
        self.live_event({"event": "start", "rank": self.rank,
                         "size": self.world_size(), "pid": os.getpid(),
                         "host": os.uname().nodename})
        self.note_termination()

    def note_termination(self) -> None:
        """A SIGTERM (a launcher stopping this rank after another one
        died: torch.multiprocessing.spawn, torchrun) writes a "signal" line
        into the live record before it ends the process as before, so the
        report names the rank that died first, not its victims. Not when
        the program handles SIGTERM itself (vqcheck._core)."""
        import signal
        try:
            if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL,
                                                        None):
                return
            _core.note_termination(self.live_fd)
        except (ValueError, OSError):
            pass  # no line: such a rank is reported as it was before

    def register_stack_dumps(self) -> None:
        """SIGUSR1 makes this rank write every thread's Python stack to
        rank-<r>.stacks.txt (faulthandler, safe in any state), so that
        `vqcheck watch` can say where a rank is when another one hangs. Not
        when the program handles SIGUSR1 itself."""
        import faulthandler
        import signal
        try:
            if signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None):
                return
        except ValueError:
            return
        path = os.path.join(self.out, f"rank-{self.rank}.stacks.txt")
        self.stacks_file = os.fdopen(open_run_file(path, append=True), "a")
        faulthandler.register(signal.SIGUSR1, file=self.stacks_file,
                              all_threads=True, chain=False)

    def live_event(self, event: Dict[str, Any]) -> None:
        if self.live_fd is None:
            return
        # One write(2) per line on an O_APPEND descriptor: a kill between
        # lines never leaves half a line.
        os.write(self.live_fd, json_line(event))

    def ledger_line(self, record: Tuple[int, Tuple[Any, ...], int],
                    t_exit: int, state: str, status: str) -> None:
        """One ledger line in the live record, one write(2) like every line
        there, written by the checkers' codec (checkers/ledger_record.h,
        through vqcheck._core): the format ledger_analysis.h reads. record:
        (seq, the line's fields from "op" to "func" as
        Collectives.ledger_middle makes them, t_enter_ns)."""
        seq, call, t_enter = record
        if self.live_fd is None:
            return
        os.write(self.live_fd, _core.ledger_line(seq, self.rank, call,
                                                 t_enter, t_exit, state,
                                                 status))

    def beat(self, state: int, seq: int, step: int, op: str) -> None:
        """A sign of progress in the heartbeat (none before the live record
        is open, nor once the heartbeat failed)."""
        if self.heartbeat is not None:
            self.heartbeat.beat(state, seq, step, op)

    def finish(self, steps: int, seq: int,
               digests: Optional[Dict[str, Any]]) -> None:
        """The "finished" line (the end status, the last step of `steps`,
        where the digests were made), then the heartbeat's finished state
        (seq: the last collective's number); nothing for a process that
        never opened its live record."""
        if self.live_fd is None:
            return
        event = {"event": "finished", "status": self.status(),
                 "step": steps - 1}
        if digests is not None:
            event["digests"] = digests
        try:
            self.live_event(event)
        except OSError:
            pass  # no end line: the analysis reports the rank unfinished
        self.beat(FINISHED, seq, steps, "")

    # -- findings

    def add_finding(self, finding: Dict[str, Any]) -> None:
        if self.findings_fd is None:
            self.open_live()
            path = os.path.join(self.out, f"rank-{self.rank}.findings.jsonl")
            self.findings_fd = open_run_file(path, truncate=True,
                                             append=True)
        os.write(self.findings_fd, json_line(finding))

    def report_once(self, key: Any, kind: str, where: Tuple[str, int, str],
                    tensor: str, message: str, detail: Dict[str, Any],
                    step: int) -> None:
        """A finding at the call site where = (file, line, function) at
        training step `step`, once per key in this process."""
        if key in self.reported_sites:
            return
        self.reported_sites.add(key)
        file, line, func = where
        self.add_finding({
            "kind": kind, "step": step, "ranks": [self.current_rank()],
            "tensor": tensor,
            "site": {"file": file, "line": line, "func": func},
            "message": message,
            "detail": dict(detail, source_of_finding="python bridge"),
            "time": time.time()})

    # -- a hang

    def write_hang(self, marker: Dict[str, Any]) -> None:
        """Every thread's stack into rank-<r>.stacks.txt, then the hang
        marker rank-<r>.hang."""
        import faulthandler
        stacks = os.path.join(self.out, f"rank-{self.rank}.stacks.txt")
        with os.fdopen(open_run_file(stacks, append=True), "a") as f:
            faulthandler.dump_traceback(file=f, all_threads=True)
        # The marker last, whole (a rename), so the stacks are there first.
        path = os.path.join(self.out, f"rank-{self.rank}.hang")
        tmp = path + ".tmp"
        with os.fdopen(open_run_file(tmp, truncate=True), "wb") as f:
            f.write(json_line(marker))
        replace_run_file(tmp, path)

    # -- errors and the end status

    def fail(self, part: str, error: BaseException) -> None:
        """Turns a part of the bridge off after an error in it: the job goes
        on unchecked there, and says so once."""
        if part in self.disabled:
            return
        self.disabled.add(part)
        self.disabled_by_io = self.disabled_by_io or isinstance(error, OSError)
        sys.stderr.write(f"vqcheck watch: the bridge's {part} check failed "
                         f"and is off for this process: "
                         f"{type(error).__name__}: {error}\n")

    def status(self) -> str:
        """The rank's end status: VQC_OK only when the program ended
        normally and every check ran to the end. A check turned off by an
        error (a full disk) left the rest of the run unchecked, so the
        analysis must not call it clean."""
        if self.failed:
            return "VQC_EINTERNAL"
        if self.disabled:
            return "VQC_EIO" if self.disabled_by_io else "VQC_EINTERNAL"
        return "VQC_OK"
