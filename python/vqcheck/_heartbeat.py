"""A rank's heartbeat: the time of its last sign of progress, for `vqcheck
watch` to tell a hang from slow work wherever the rank is.

Signs of progress are a collective entered or left, a step end, and
init_process_group entered and returned (op "rendezvous" while it waits;
the first signs, so a hang before the first step is one too) (a rank
looping in Python without either makes none; a rank in a collective torch
issues from C++, DDP's gradient all_reduce, makes none until it returns).
`vqcheck watch` reads every rank's heartbeat with the ranks' process states:
a rank with no progress for --timeout is a hang (docs/pytorch.md, "Hangs").

The file, rank-<r>.heartbeat in the run directory, is 64 bytes, rewritten
in place (one pwrite(2) per sign; no line grows), little-endian:

  offset  size  field
       0     4  magic "VQHB"
       4     4  u32 version (1)
       8     4  u32 pid
      12     4  u32 state: 0 running (between signs), 1 in a collective
                (op "rendezvous": in init_process_group), 2 finished (the
                bridge's exit hook ran), 3 set up (init_process_group
                returned; no collective or step end since: `vqcheck watch`
                counts the rank's CPU use as progress then)
      16     8  u64 beats: signs so far
      24     8  u64 last_ns: CLOCK_MONOTONIC of the last sign (time.
                monotonic_ns(); one clock for every process of a machine)
      32     8  u64 seq: the bridge's number of the collective in flight
                (state 1), else of the last one
      40     8  u64 step: the training step (optimizer steps so far)
      48    16  the collective's name (state 1), NUL-padded ASCII

A reader may catch a write half done: it reads twice and keeps a read where
both agree (checkers: watch_heartbeat.c).
"""
from __future__ import annotations

import os
import struct
import time

from ._trace import open_run_file

_FORMAT = "<4sIII QQQQ 16s"
SIZE = struct.calcsize(_FORMAT)  # 64
RUNNING, IN_COLLECTIVE, FINISHED, SETUP = 0, 1, 2, 3


class Heartbeat:
    """This rank's heartbeat file; beat() never raises (a full disk turns
    it off, as any failure of a bridge part does: see off)."""

    def __init__(self, path: str) -> None:
        self.fd = open_run_file(path, truncate=True)
        self.pid = os.getpid()
        self.beats = 0
        self.off = False
        self.beat(RUNNING, 0, 0, "")

    def beat(self, state: int, seq: int, step: int, op: str) -> None:
        if self.off or os.getpid() != self.pid:
            return  # off, or a forked child (a DataLoader worker)
        self.beats += 1
        data = struct.pack(_FORMAT, b"VQHB", 1, self.pid, state, self.beats,
                           time.monotonic_ns(), seq, step,
                           op.encode("ascii", "replace")[:16])
        try:
            os.pwrite(self.fd, data, 0)
        except OSError:
            self.off = True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.off = True
