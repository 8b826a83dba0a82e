"""The in-process half of `vqcheck watch`: checks an unmodified PyTorch job.

`vqcheck watch` starts the job with VQC_WATCH_DIR set and python/bridge/ first
on PYTHONPATH, whose sitecustomize.py calls install() in every Python
process. Nothing happens until the job imports torch; then the bridge hooks:

- torch.nn.Module.__init__: every module the program creates is remembered
  (weakly, in creation order); at a step end the digested state is that of
  the ROOT modules, those no other remembered module holds as a child (a
  DistributedDataParallel wrapper and its module count once), named
  "<class name>.<parameter or buffer name>" ("VectorQuantize._codebook.embed";
  a second root of the same class is "<class>#2").
- torch.optim.Optimizer.__init__: every optimizer's step() ends a training
  step (wrapped per instance, as vqcheck.torch.watch does); its state is
  digested too. vqcheck.torch.step() ends a step in a program without one.
  The digest runs on vqcheck._core's digest thread while training goes on,
  and is joined before anything that can write the state: the next
  optimizer step, a forward that may write buffers, a collective on that
  memory, exit (_overlap.py; VQC_WATCH_OVERLAP=0 hashes on the training
  thread).
- torch.distributed collectives, every one, under both names libraries use
  (torch.distributed.X, torch.distributed.distributed_c10d.X), and the
  out-of-place ones of torch.distributed.nn (and .functional), hooked
  before the user's imports, numbered with their call sites:
  - those of the default group are written to the rank's ledger lines in
    rank-<r>.live.jsonl (entered before the call, done or failed after it),
    which the C analysis compares across ranks (deadlock,
    collective_mismatch); point-to-point and sub-group calls are followed
    for hangs only;
  - an in-place one on a tensor nobody else can read afterwards, an
    out-of-place one whose result is dropped, and an async_op=True call
    whose Work is never waited on are `lost_inplace` findings at the call
    site (rules below);
  - one in flight longer than VQC_WATCH_TIMEOUT makes the rank dump its
    stacks and a hang marker (_collectives.py), and SIGUSR1 dumps stacks;
  - all_gather of a tensor that requires grad while autograd records, whose
    list entry for this rank is not the local tensor (or another tensor
    with a grad_fn) at the next step end, is a `gradient_mismatch` finding:
    the gathered copies carry no gradient (OpenCLIP's bug; OpenCLIP's own
    `gathered[rank] = features` is the accepted fix). Limits: only the
    list form is checked (not all_gather_into_tensor), and a program that
    gathers grad-requiring tensors for metrics only is reported too.

What it writes into VQC_WATCH_DIR, per rank r (the rank is
torch.distributed's once initialised, else $RANK, else 0), lazily, so a
process that never trains (a DataLoader worker) writes nothing:
  rank-<r>.trace.jsonl     digests at every VQC_WATCH_INTERVAL-th step end
                           and the last (docs/trace-format.md)
  rank-<r>.live.jsonl      start / step / finished events, so a rank that
                           died is told from one that finished, and the
                           ledger lines of its collectives
  rank-<r>.findings.jsonl  findings made in the process (run.json's finding
                           format), one line each, reported once per site

The lost-result rules (docs/pytorch.md has the examples), decided at the
call, from what holds the tensor and what the caller's next instruction is
(a backend may hold a tensor for a moment after the call, in a gloo worker
thread, so nothing is inferred from when objects die):
- In-place collectives (all_reduce, broadcast, reduce, all_reduce_coalesced)
  write their result into the tensor they are given. It is lost when, at
  the call, nothing but the call references that tensor object (CPython's
  reference count against a probe made at install time), C++ does not hold
  it either (the TensorImpl's use count: a parameter's .grad, a tensor saved
  for backward), it is not a view (`_base` is None) and no other tensor
  shares its storage (the storage's use count): `all_reduce(x.contiguous())`
  where contiguous() copied, `all_reduce(a + b)`. Not reported: a named
  tensor, a view, a list element, `p.grad`, `p.data`, `x.detach()`, a
  contiguous() that returned its input. The use counts are read where
  c10::intrusive_ptr_target keeps them, checked on probes (_use_counter);
  where that check fails, the program's parameters, buffers and gradients
  stand in for "shares its storage" (_lost.py).
- Out-of-place collectives (torch.distributed.nn's all_reduce, all_gather,
  broadcast, ...; torch.distributed._functional_collectives where present)
  return a new tensor and leave their input alone. The result is discarded
  when the caller's next instruction after the call is POP_TOP (an
  expression statement: `dist_nn.all_reduce(t)` on a line of its own).
  Assigned (even to `_`), returned, passed on or used in an expression, it
  is never reported.
- An async_op=True collective whose Work is garbage-collected without
  wait() (or get_future(), result(), synchronize()) is reported when the
  function that issued it returns before a blocking call on the same
  process group (barrier, a blocking collective, a later Work's wait())
  ordered it: the backend runs a group's work in order
  (docs/pytorch.md, "Ordering").
Limits: memory shared with numpy or another framework (torch.from_numpy,
dlpack) is not seen, so such a temporary is reported although the array
sees the result; a result dropped by the caller of the user's own helper
that returned it is not reported (only the frame that made the call is
looked at).

The bridge never stops the job: an error inside it is printed once on
stderr and that part of the bridge turns itself off.

The parts, each handed the few objects and functions it uses (as libuv's
handles are handed their loop), none reaching back into this module:

  _records.py      the rank's files (live record, ledger lines, findings,
                   heartbeat, stacks, hang marker), which parts an error
                   turned off, the end status, the parts' one lock; the
                   bottom: imports none of the others
  _patching.py     the import hook, patch() (functools.update_wrapper, the
                   `_vqcheck` mark, an undo list, unpatch_all()); marks
                   read from __dict__
  _sites.py        call sites: the user's frame, a call line's argument,
                   warnings kept at the caller's line
  _overlap.py      the step-end digest off the training thread, its joins
  _lost.py         lost results (temporary, discarded, not waited with the
                   async Work ordering) and gradients through all_gather
  _collectives.py  the collective wrappers, ledger fields, enter/leave,
                   library-caller identity, the hang watchdog
  _state.py        modules, optimizers, pipeline stages, the step end and
                   the state walk (vqcheck.torch.Watch, shared with
                   vqcheck.torch.watch)
  __init__.py      install() wires them and hooks torch; step_end()

vqcheck.torch.step() reaches the bridge through vqcheck._hooks, where
install() registers step_end: vqcheck.torch never imports the bridge.
"""
from __future__ import annotations

import atexit
import os
import sys
import time
from typing import Any, Optional

from .. import _hooks
from ._collectives import Collectives
from ._lost import Lost
from ._overlap import _Overlap, _overlap_setting
from ._patching import hook_imports, patch
from ._records import Records
from ._sites import (innermost_user_frame, keep_warnings_at_the_callers_line,
                     user_frames)
from ._state import StateCheck

__all__ = ["install", "step_end"]

# torch itself, and the packages of out-of-place collectives and pipeline
# stages, which torch does not import by itself.
_PATCHED_MODULES = ("torch", "torch.distributed.nn",
                    "torch.distributed._functional_collectives",
                    "torch.distributed.pipelining.stage")

_parts: Optional["_Parts"] = None


def install() -> None:
    """Sets the bridge up in this process (idempotent). Called by
    python/bridge/sitecustomize.py under `vqcheck watch`."""
    global _parts
    if _parts is not None:
        return
    out = os.environ.get("VQC_WATCH_DIR")
    if not out:
        return
    try:
        interval = max(1, int(os.environ.get("VQC_WATCH_INTERVAL", "1")))
    except ValueError:
        interval = 1
    try:
        timeout = float(os.environ.get("VQC_WATCH_TIMEOUT", "60"))
    except ValueError:
        timeout = 60.0
    _parts = _Parts(os.path.abspath(out), interval, timeout)
    _hooks.on_step_end(step_end)  # vqcheck.torch.step()
    hook_imports(_PATCHED_MODULES, _parts.patch_module)
    for name in _PATCHED_MODULES:
        if name in sys.modules:
            _parts.patch_module(name)
    atexit.register(_parts.at_exit)


def step_end() -> None:
    """Ends a training step (vqcheck.torch.step() under `vqcheck watch`)."""
    if _parts is not None:
        _parts.state.step_end()


def _distributed_rank() -> bool:
    """Whether this process is a rank of an initialised process group."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None)
    try:
        return bool(dist is not None and dist.is_available() and
                    dist.is_initialized())
    except Exception:
        return False


class _Parts:
    """The bridge's parts in one process, wired together. Each is handed
    what it uses; none holds this object."""

    def __init__(self, out: str, interval: int, timeout: float) -> None:
        records = Records(out)
        overlap = _Overlap(records.fail, _overlap_setting())
        # The state's step end first decides the lost results, and its
        # heartbeat names the last collective: functions of parts made
        # after it (closures over the names below).
        state = StateCheck(records, overlap, interval,
                           at_step_end=lambda: lost.at_step_end(),
                           collective_seq=lambda: collectives.seq)
        lost = Lost(records, state.steps, state.live_modules)
        collectives = Collectives(records, state.steps, lost, overlap,
                                  timeout)
        self.records, self.overlap, self.state = records, overlap, state
        self.lost, self.collectives = lost, collectives
        self.patched: set = set()           # modules hooked

    def patch_module(self, name: str) -> None:
        """Hooks into module `name` (of _PATCHED_MODULES), once."""
        with self.records.lock:
            if name in self.patched:
                return
            self.patched.add(name)
        if name == "torch":
            self.patch_torch()
        elif name == "torch.distributed.pipelining.stage":
            self.state.patch_pipeline_stage(sys.modules[name])
        else:
            self.collectives.patch_out_of_place(sys.modules[name])

    def patch_torch(self) -> None:
        torch = sys.modules["torch"]
        self.state.patch(torch)        # Module, Optimizer
        self.collectives.patch(torch)  # torch.distributed
        for name in _PATCHED_MODULES[1:]:
            if name in sys.modules:
                self.patch_module(name)
        records = self.records

        note_exception = self.note_exception

        def make(excepthook: Any) -> Any:
            def note_failure(*args: Any) -> None:
                records.failed = True
                note_exception(*args)
                excepthook(*args)
            return note_failure
        patch(sys, "excepthook", make)
        keep_warnings_at_the_callers_line()

    def note_exception(self, kind: Any, error: Any, tb: Any) -> None:
        """An exception nothing caught is ending this rank: a rank_failure
        finding (rank-<r>.findings.jsonl) naming it, the step, and the
        user's line it came from, or the collective it came out of. Not
        for Ctrl-C (vqcheck watch reports its own interruption)."""
        if kind is None or issubclass(kind, KeyboardInterrupt):
            return
        if self.records.live_fd is None and not _distributed_rank():
            return  # not a rank (a launcher such as torchrun): its
            # record would take the name of rank 0's
        try:
            frames = user_frames(tb)
            where = innermost_user_frame(frames) or ("?", 0, "?")
            step = self.state.steps()
            rank = self.records.current_rank()
            raised_at = time.time()
            text = str(error)
            if len(text) > 1500:
                text = text[:700] + " ... " + text[-700:]
            short = " ".join(text.split())  # one line for the message
            if len(short) > 240:
                short = short[:240] + " ..."
            what = f"{kind.__name__}: {short}" if short else kind.__name__
            place = f"{os.path.basename(where[0])}:{where[1]} ({where[2]})"
            collective = getattr(error, "__vqcheck_collective__", None)
            if collective is not None:
                message = (f"rank {rank}'s {collective[0]} called at "
                           f"{place} failed in step {step}: {what}")
            else:
                message = (f"rank {rank} raised {what}, in step {step} at "
                           f"{place}")
            self.records.add_finding({
                "kind": "rank_failure", "step": step, "ranks": [rank],
                "tensor": "",
                "site": {"file": where[0], "line": where[1],
                         "func": where[2]},
                "message": message,
                "detail": {"exception": kind.__name__,
                           "exception_message": text,
                           "in_collective": collective[0]
                           if collective is not None else None,
                           "traceback": [f"{f}:{n} {fn}"
                                         for f, n, fn in frames[-12:]],
                           "raised_at": raised_at,
                           "source_of_finding": "python bridge"},
                "time": raised_at})
        except Exception:  # the bridge never stands in the error's way
            pass

    def at_exit(self) -> None:
        self.lost.at_step_end()
        self.overlap.join("exit")  # the last step's digest, written
        self.state.close()
        digests = self.overlap.summary() \
            if self.state.watch is not None else None
        self.records.finish(self.state.steps(), self.collectives.seq,
                            digests)
