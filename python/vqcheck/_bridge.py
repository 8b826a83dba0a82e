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
  memory, exit (_Overlap; VQC_WATCH_OVERLAP=0 hashes on the training
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
    stacks and a hang marker (watch_for_hangs), and SIGUSR1 dumps stacks;
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
  stand in for "shares its storage".
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
"""
from __future__ import annotations

import atexit
import bisect
import importlib.abc
import importlib.util
import json
import linecache
import os
import sys
import threading
import time
import weakref
from typing import Any, Dict, List, Optional, Tuple

from ._heartbeat import FINISHED, IN_COLLECTIVE, RUNNING, Heartbeat
from ._trace import open_run_file, replace_run_file

_state: Optional["_Bridge"] = None


def install() -> None:
    """Sets the bridge up in this process (idempotent). Called by
    python/bridge/sitecustomize.py under `vqcheck watch`."""
    global _state
    if _state is not None:
        return
    out = os.environ.get("VQC_WATCH_DIR")
    if not out:
        return
    try:
        interval = max(1, int(os.environ.get("VQC_WATCH_INTERVAL", "1")))
    except ValueError:
        interval = 1
    _state = _Bridge(os.path.abspath(out), interval)
    sys.meta_path.insert(0, _TorchImportHook())
    for name in _PATCHED_MODULES:
        if name in sys.modules:
            _state.patch_module(name)
    atexit.register(_state.at_exit)


def step_end() -> None:
    """Ends a training step (vqcheck.torch.step() under `vqcheck watch`)."""
    if _state is not None:
        _state.step_end()


# ---- torch is hooked right after it is imported, not before: importing it
# at start-up would change when its import-time settings are read.


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Finds the modules the bridge patches (_PATCHED_MODULES) the normal
    way and wraps their loaders, so that the bridge patches each once its
    import has run (before the importer binds any of its names)."""

    def __init__(self) -> None:
        self._busy = False

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _PATCHED_MODULES or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, name)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: Any, name: str) -> None:
        self._inner, self._name = inner, name

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        if _state is not None:
            _state.patch_module(self._name)


# torch itself, and the packages of out-of-place collectives, which torch
# does not import by itself.
_PATCHED_MODULES = ("torch", "torch.distributed.nn",
                    "torch.distributed._functional_collectives",
                    "torch.distributed.pipelining.stage")


# ---- the bridge's state in one process


class _Bridge:
    def __init__(self, out: str, interval: int) -> None:
        self.out = out
        self.interval = interval
        self.lock = threading.RLock()
        self.modules: List[weakref.ref] = []  # every module, creation order
        self.optimizers: List[weakref.ref] = []
        self.watch: Any = None                # the state watch, at step 1
        self.live_fd: Optional[int] = None
        self.heartbeat: Optional[Heartbeat] = None  # with the live record
        self.findings_fd: Optional[int] = None
        self.rank: Optional[int] = None
        self.reported_sites: set = set()
        self.failed = False                   # an unhandled exception
        self.disabled: set = set()            # parts turned off by an error
        self.disabled_by_io = False           # one of them by an OSError
        self.patched: set = set()           # modules hooked
        self.baseline_refs = 0
        self.tensor_holders: Any = None       # see _use_counter
        self.storage_holders: Any = None
        try:
            self.timeout = float(os.environ.get("VQC_WATCH_TIMEOUT", "60"))
        except ValueError:
            self.timeout = 60.0
        # Collectives: a sequence number per call; those in flight (seq ->
        # (op, site text, monotonic start, step)), the last one completed.
        self.seq = 0
        self.in_flight: Dict[int, Tuple[str, str, float, int]] = {}
        # The ledger: collectives of the default (world) group only, so that
        # sequence numbers line up across ranks (see _ledger_fields).
        self.ledger_seq = 0
        self.middles: Dict[Any, str] = {}    # see ledger_middle
        self.nesting = threading.local()  # collectives inside collectives
        self.last_completed: Optional[Dict[str, Any]] = None
        self.watchdog: Optional[threading.Thread] = None
        self.hang_reported = False
        self.stacks_file: Any = None
        # all_gather calls whose input required grad: (output list, the
        # local tensor, its index in the list, site, step), checked at the
        # next step end for the local tensor put back (see _check_gathers).
        self.pending_gathers: List[Tuple[Any, Any, int, Any, int]] = []
        # pipeline stages: id(stage module) -> (weakref, stage index)
        self.stages: Dict[int, Tuple[Any, int]] = {}
        # optimizer steps in progress on this thread (an optimizer that
        # drives another, as ZeroRedundancyOptimizer does, ends one step)
        self.step_depth = threading.local()
        # The step-end digest, off the training thread (see _Overlap).
        self.overlap = _Overlap(self, _overlap_setting())

    # -- where this process writes

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
        os.write(self.live_fd, (json.dumps(event, separators=(",", ":")) +
                                "\n").encode())

    def add_finding(self, finding: Dict[str, Any]) -> None:
        if self.findings_fd is None:
            self.open_live()
            path = os.path.join(self.out, f"rank-{self.rank}.findings.jsonl")
            self.findings_fd = open_run_file(path, truncate=True,
                                             append=True)
        line = json.dumps(finding, separators=(",", ":")) + "\n"
        os.write(self.findings_fd, line.encode("utf-8", "replace"))

    def report_once(self, key: Any, kind: str, where: Tuple[str, int, str],
                    tensor: str, message: str, detail: Dict[str, Any],
                    step: Optional[int] = None) -> None:
        """A finding at the call site where = (file, line, function), once
        per key in this process; step defaults to the current one."""
        if key in self.reported_sites:
            return
        self.reported_sites.add(key)
        file, line, func = where
        if step is None:
            step = self.watch.steps if self.watch is not None else 0
        self.add_finding({
            "kind": kind, "step": step, "ranks": [self.current_rank()],
            "tensor": tensor,
            "site": {"file": file, "line": line, "func": func},
            "message": message,
            "detail": dict(detail, source_of_finding="python bridge"),
            "time": time.time()})

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

    # -- hooks into torch

    def patch_module(self, name: str) -> None:
        """Hooks into module `name` (of _PATCHED_MODULES), once."""
        with self.lock:
            if name in self.patched:
                return
            self.patched.add(name)
        if name == "torch":
            self.patch_torch()
        elif name == "torch.distributed.pipelining.stage":
            self._patch_pipeline_stage(sys.modules[name])
        else:
            self._patch_out_of_place(sys.modules[name])

    def patch_torch(self) -> None:
        torch = sys.modules["torch"]
        self._patch_module_init(torch)
        self._patch_load_state_dict(torch)
        self._patch_optimizer_init(torch)
        self._patch_collectives(torch)
        for name in _PATCHED_MODULES[1:]:
            if name in sys.modules:
                self.patch_module(name)
        excepthook = sys.excepthook

        def note_failure(*args: Any) -> None:
            self.failed = True
            excepthook(*args)
        sys.excepthook = note_failure
        _keep_warnings_at_the_callers_line()

    def _patch_module_init(self, torch: Any) -> None:
        original = torch.nn.Module.__init__
        bridge = self

        def __init__(module: Any, *args: Any, **kwargs: Any) -> None:
            # A module made after a step end may write the state at once
            # (DistributedDataParallel broadcasts its module's parameters
            # and buffers from rank 0, in C++, right after this returns).
            if bridge.overlap.pending is not None:
                bridge.overlap.join("module init")
            original(module, *args, **kwargs)
            # Only the outermost __init__ of a subclass chain records it.
            # The mark is read from __dict__: a getattr would reach the
            # module's own __getattr__, which may forward to an attribute
            # its __init__ has not set yet (FSDP1: RecursionError).
            if module.__dict__.get("_vqcheck_seen", False):
                return
            object.__setattr__(module, "_vqcheck_seen", True)
            bridge.modules.append(weakref.ref(module))
        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        torch.nn.Module.__init__ = __init__

    def _patch_pipeline_stage(self, module: Any) -> None:
        """A pipeline stage (torch.distributed.pipelining) remembers its
        module's stage index: its tensors are compared per stage
        (vqcheck._layout)."""
        base = getattr(module, "_PipelineStageBase", None)
        if base is None or getattr(base.__init__, "_vqcheck", False):
            return
        import functools
        original = base.__init__
        bridge = self

        @functools.wraps(original)
        def __init__(stage: Any, submodule: Any, stage_index: int,
                     *args: Any, **kwargs: Any) -> None:
            original(stage, submodule, stage_index, *args, **kwargs)
            with bridge.lock:
                bridge.stages[id(submodule)] = (weakref.ref(submodule),
                                                int(stage_index))
        __init__._vqcheck = True  # type: ignore[attr-defined]
        base.__init__ = __init__

    def stage_of(self, module: Any) -> Optional[int]:
        """The pipeline stage index of `module` (or of a module above it in
        a stage), None outside any stage."""
        with self.lock:
            stages = list(self.stages.values())
        for ref, index in stages:
            held = ref()
            if held is None:
                continue
            if held is module or any(m is module for m in held.modules()):
                return index
        return None

    def _patch_load_state_dict(self, torch: Any) -> None:
        """Module.load_state_dict copies into the parameters and buffers in
        place: the pending digest is joined first."""
        import functools
        original = torch.nn.Module.load_state_dict
        if getattr(original, "_vqcheck", False):
            return
        overlap = self.overlap

        @functools.wraps(original)
        def load_state_dict(module: Any, *args: Any, **kwargs: Any) -> Any:
            if overlap.pending is not None:
                overlap.join("load_state_dict")
            return original(module, *args, **kwargs)
        load_state_dict._vqcheck = True  # type: ignore[attr-defined]
        torch.nn.Module.load_state_dict = load_state_dict

    def _patch_optimizer_init(self, torch: Any) -> None:
        original = torch.optim.Optimizer.__init__
        bridge = self

        def __init__(opt: Any, *args: Any, **kwargs: Any) -> None:
            original(opt, *args, **kwargs)
            if opt.__dict__.get("_vqcheck_hooked", False):
                return
            opt.__dict__["_vqcheck_hooked"] = True
            bridge.optimizers.append(weakref.ref(opt))
            bridge.hook_step(opt)
        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        torch.optim.Optimizer.__init__ = __init__

    def hook_step(self, opt: Any) -> None:
        """opt.step() then the step end (vqcheck.torch's optimizer hook);
        before the step, which writes the parameters and the optimizer's
        state, the pending digest is joined. A step taken inside another
        optimizer's step (ZeroRedundancyOptimizer's local optimizer, a
        Lookahead wrapper's inner one) is part of that step: only the
        outermost ends a training step, after all it does (ZeRO's
        broadcast of the updated partitions)."""
        from .torch import _call_after_step
        overlap = self.overlap
        depth = self.step_depth

        def before_step() -> None:
            if getattr(depth, "n", 0) == 0 and overlap.pending is not None:
                overlap.join("optimizer.step")
            depth.n = getattr(depth, "n", 0) + 1

        def after_step() -> None:
            depth.n -= 1
            if depth.n == 0:
                self.step_end()

        def failed() -> None:
            depth.n -= 1
        _call_after_step(opt, after_step, before_step, failed)

    def _patch_collectives(self, torch: Any) -> None:
        import torch.distributed as dist
        if not dist.is_available():
            return
        c10d = dist.distributed_c10d
        self.baseline_refs = _probe_refcount(torch)
        self.tensor_holders = _use_counter(torch, "tensor")
        self.storage_holders = _use_counter(torch, "storage")
        for name in _COLLECTIVES:
            original = getattr(c10d, name, None)
            if original is None or getattr(original, "_vqcheck", False):
                continue
            wrapper = _collective_wrapper(
                self, name, original,
                "inplace" if name in _INPLACE else "other")
            setattr(c10d, name, wrapper)
            if getattr(dist, name, None) is original:
                setattr(dist, name, wrapper)
        original = getattr(c10d, "destroy_process_group", None)
        if original is not None and not getattr(original, "_vqcheck", False):
            wrapper = _settle_then(original, self.overlap)
            c10d.destroy_process_group = wrapper
            if getattr(dist, "destroy_process_group", None) is original:
                dist.destroy_process_group = wrapper

    def _patch_out_of_place(self, module: Any) -> None:
        """torch.distributed.nn (its names, and .functional's, which it
        re-exports) or torch.distributed._functional_collectives: the
        collectives that return their result."""
        targets = [module]
        functional = getattr(module, "functional", None)
        if functional is not None and hasattr(functional, "all_reduce"):
            targets.append(functional)
        for target in targets:
            for name in _OUT_OF_PLACE:
                original = getattr(target, name, None)
                if not callable(original):
                    continue
                if getattr(original, "_vqcheck", False):
                    continue
                wrapper = _WRAPPED.get(id(original))
                if wrapper is None:
                    wrapper = _collective_wrapper(self, name, original,
                                                  "out_of_place")
                    _WRAPPED[id(original)] = wrapper
                setattr(target, name, wrapper)

    # -- collectives in flight, and the watchdog that reports a hang

    def enter(self, op: str, frame: Any,
              fields: Optional[Dict[str, Any]]) -> Tuple[int, Any]:
        """Collective `op` called from frame: in flight for the watchdog and,
        with ledger fields, an "entered" line in rank-<r>.live.jsonl (written
        before the call, so a process killed in it keeps the line). Returns
        (seq, the ledger line or None) for leave()."""
        site = _outside(frame)
        text = (f"{site.f_code.co_filename}:{site.f_lineno} "
                f"{site.f_code.co_name}") if site is not None else "?"
        with self.lock:
            self.open_live()
            self.seq += 1
            step = self.watch.steps if self.watch is not None else 0
            self.in_flight[self.seq] = (op, text, time.monotonic(), step)
            if self.heartbeat is not None:
                self.heartbeat.beat(IN_COLLECTIVE, self.seq, step, op)
            if self.watchdog is None:
                self.watchdog = threading.Thread(
                    target=self.watch_for_hangs, name="vqcheck-watchdog",
                    daemon=True)
                self.watchdog.start()
            record = None
            if fields is not None and "ledger" not in self.disabled:
                self.ledger_seq += 1
                library = _library_caller(frame)
                middle = self.ledger_middle(op, fields, library or site,
                                            library is not None)
                record = (self.ledger_seq, middle, time.monotonic_ns())
                self.write_ledger(record, 0, "entered", '""')
            return self.seq, record

    def ledger_middle(self, op: str, fields: Dict[str, Any],
                      site: Any, library: bool = False) -> str:
        """The part of a ledger line between "rank" and "t_enter_ns": the
        same for every call of one collective at one site, so it is made
        once (a training loop repeats a few thousand such lines). library:
        site is torch's own function issuing the call, named by its first
        line (torch too writes `if src: scatter(...) else: scatter(...)`)."""
        file = site.f_code.co_filename if site is not None else "?"
        line = site.f_lineno if site is not None else 0
        if library and site is not None:
            line = site.f_code.co_firstlineno
        func = site.f_code.co_name if site is not None else "?"
        key = (op, fields["redop"], fields["dtype"], fields["count"],
               fields["root"], file, line, func)
        middle = self.middles.get(key)
        if middle is None:
            if len(self.middles) > 4096:
                self.middles.clear()
            # group_size: the default group's, the only one ledgered.
            middle = json.dumps({"op": op, **fields,
                                 "group_size": self.world_size(),
                                 "file": file, "line": line, "func": func},
                                separators=(",", ":"))[1:-1] + ","
            self.middles[key] = middle
        return middle

    def write_ledger(self, record: Tuple[int, str, int], t_exit: int,
                     state: str, status: str) -> None:
        """One ledger line (ledger_analysis.h's format) in the live record,
        one write(2) like every line there; status is JSON text."""
        seq, middle, t_enter = record
        if self.live_fd is None:
            return
        os.write(self.live_fd, (
            f'{{"seq":{seq},"rank":{self.rank},{middle}'
            f'"t_enter_ns":{t_enter},"t_exit_ns":{t_exit},'
            f'"state":"{state}","status":{status}}}\n'
        ).encode("utf-8", "replace"))

    def leave(self, seq: int, record: Any,
              error: Optional[BaseException]) -> None:
        """The call returned (or raised error): its "done" or "failed"
        line, which replaces the "entered" one."""
        with self.lock:
            entry = self.in_flight.pop(seq, None)
            if entry is not None:
                self.last_completed = {"op": entry[0], "seq": seq,
                                       "site": entry[1]}
                if self.heartbeat is not None:
                    self.heartbeat.beat(RUNNING, seq, entry[3], "")
            if record is not None:
                if error is None:
                    self.write_ledger(record, time.monotonic_ns(), "done",
                                      '"VQC_OK"')
                else:
                    self.write_ledger(record, time.monotonic_ns(), "failed",
                                      json.dumps(type(error).__name__[:23]))

    def watch_for_hangs(self) -> None:
        """Every 0.2 s: a collective in flight longer than the timeout
        makes this rank dump its stacks, then write rank-<r>.hang, once.
        `vqcheck watch` then asks the other ranks for their stacks and
        stops the job."""
        while not self.hang_reported:
            time.sleep(0.2)
            with self.lock:
                if not self.in_flight:
                    continue
                seq = min(self.in_flight)
                op, site, start, step = self.in_flight[seq]
                waited = time.monotonic() - start
                if waited <= self.timeout:
                    continue
                self.hang_reported = True
                marker = {"rank": self.rank, "op": op, "seq": seq,
                          "site": site, "step": step,
                          "waited_s": round(waited, 3),
                          "last_completed": self.last_completed}
            # The main thread waits in a collective that writes no state
            # (one that does would have joined): a digest done by now is
            # committed before the job is stopped.
            self.overlap.poke("hang")
            try:
                self.write_hang(marker)
            except Exception as e:
                self.fail("hang", e)

    def write_hang(self, marker: Dict[str, Any]) -> None:
        import faulthandler
        stacks = os.path.join(self.out, f"rank-{self.rank}.stacks.txt")
        with os.fdopen(open_run_file(stacks, append=True), "a") as f:
            faulthandler.dump_traceback(file=f, all_threads=True)
        # The marker last, whole (a rename), so the stacks are there first.
        path = os.path.join(self.out, f"rank-{self.rank}.hang")
        tmp = path + ".tmp"
        with os.fdopen(open_run_file(tmp, truncate=True), "w") as f:
            json.dump(marker, f)
        replace_run_file(tmp, path)

    # -- gradients through gathers (the OpenCLIP pattern)

    def note_gather(self, args: Any, kwargs: Any, frame: Any) -> None:
        """all_gather(tensor_list, tensor, group) of a tensor that requires
        grad while autograd records: the gathered copies carry no gradient
        (torch.distributed.all_gather is not differentiable). Remembered
        until the step end, when the program has had the chance to put its
        own tensor back (gathered[rank] = tensor), as OpenCLIP does."""
        torch = sys.modules["torch"]
        out = args[0] if args else kwargs.get("tensor_list")
        local = args[1] if len(args) > 1 else kwargs.get("tensor")
        group = args[2] if len(args) > 2 else kwargs.get("group")
        if not isinstance(out, list) or not isinstance(local, torch.Tensor):
            return
        if not (torch.is_grad_enabled() and local.requires_grad):
            return
        site = _outside(frame)
        if site is None:
            return
        index = torch.distributed.get_rank(group)
        where = (site.f_code.co_filename, site.f_lineno, site.f_code.co_name)
        step = self.watch.steps if self.watch is not None else 0
        with self.lock:
            self.pending_gathers.append((out, local, index, where, step))

    def check_gathers(self) -> None:
        with self.lock:
            pending, self.pending_gathers = self.pending_gathers, []
        for out, local, index, where, step in pending:
            try:
                back = 0 <= index < len(out) and (
                    out[index] is local or
                    getattr(out[index], "grad_fn", None) is not None)
                if not back:
                    self.report_gather(local, where, step)
            except Exception as e:
                self.fail("gradient", e)

    def report_gather(self, local: Any, where: Tuple[str, int, str],
                      step: int) -> None:
        file, line, func = where
        source = linecache.getline(file, line).strip()
        self.report_once(
            ("gather", file, line), "gradient_mismatch", where,
            _argument_text(source, "all_gather", 1) or "all_gather",
            f"all_gather at {os.path.basename(file)}:{line} ({func}) "
            "gathered a tensor that requires grad while autograd was "
            "recording, and the program did not put its own tensor back "
            "into the gathered list: torch.distributed.all_gather is not "
            "differentiable, so no gradient flows through the gathered "
            "features and the distributed gradient differs from the "
            "single-process one. Use torch.distributed.nn.all_gather, or "
            "put the local tensor back: gathered[rank] = features",
            {"op": "all_gather", "cause": "non-differentiable gather",
             "dtype": str(local.dtype).replace("torch.", ""),
             "shape": list(local.shape), "source": source,
             "rule": "input.requires_grad and grad mode on, and at the next "
                     "step end the list's entry for this rank is neither "
                     "the input nor a tensor with a grad_fn "
                     "(vqcheck._bridge)"},
            step)

    # -- step ends

    def live_modules(self) -> List[Any]:
        alive = [m for m in (r() for r in self.modules) if m is not None]
        self.modules = [weakref.ref(m) for m in alive]  # drop the dead
        return alive

    def live_optimizers(self) -> List[Any]:
        alive = [o for o in (r() for r in self.optimizers) if o is not None]
        self.optimizers = [weakref.ref(o) for o in alive]
        return alive

    def step_end(self) -> None:
        self.check_gathers()
        _sweep_dropped(self)
        if "state" in self.disabled:
            return
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            with self.lock:
                self.open_live()
                if self.watch is None:
                    self.watch = _make_bridge_watch(self)
                step = self.watch.steps
                self.overlap.in_step_end = True
                self.watch.step()
                self.live_event({"event": "step", "step": step})
                if self.heartbeat is not None:
                    self.heartbeat.beat(RUNNING, self.seq, step + 1, "")
        except Exception as e:
            self.fail("state", e)
        finally:
            self.overlap.in_step_end = False
            self.overlap.step_end_s += time.perf_counter() - start
            self.overlap.step_end_cpu_s += time.thread_time() - cpu

    def at_exit(self) -> None:
        self.check_gathers()
        _sweep_dropped(self)
        self.overlap.join("exit")  # the last step's digest, written
        try:
            if self.watch is not None and not self.watch.closed:
                self.watch.close()
        except Exception as e:
            self.fail("state", e)
        if self.live_fd is not None:
            steps = self.watch.steps if self.watch is not None else 0
            event = {"event": "finished", "status": self.status(),
                     "step": steps - 1}
            if self.watch is not None:
                event["digests"] = self.overlap.summary()
            try:
                self.live_event(event)
            except OSError:
                pass  # no end line: the analysis reports the rank unfinished
            if self.heartbeat is not None:
                self.heartbeat.beat(FINISHED, self.seq, steps, "")

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


# ---- the state watch: vqcheck.torch.Watch over the roots and optimizers


def _make_bridge_watch(bridge: _Bridge) -> Any:
    from .torch import Watch

    class _BridgeWatch(Watch):
        """Watch whose modules are the program's current root modules and
        whose optimizers are every optimizer it created."""

        def __init__(self) -> None:
            self.exclude = []
            self.optimizer = None
            self._setup(bridge.out, bridge.interval)
            self._outer: Dict[int, Any] = {}  # inner module id -> wrapper
            self._closing = False

        def _roots(self) -> List[Tuple[str, Any]]:
            self._outer = {}
            self._ddps: Dict[int, Any] = {}
            return _root_modules(bridge.live_modules(), self._outer,
                                 self._ddps)

        def _write(self, step: int) -> None:
            """The step's digests on the helper thread (bridge.overlap),
            or here with the overlap off and at the last step."""
            overlap = bridge.overlap
            overlap.join("step end")  # the previous step's, first
            if not overlap.enabled or self._closing or \
                    _compiled(bridge.live_modules()):
                Watch._write(self, step)
                overlap.on_thread += 1
                return
            self._last_tried = step
            if self._writer is None:
                self._start()
            collected = self._collect(step)
            # Modules whose forward joins: those holding buffers, with the
            # wrappers (DDP) around them, which broadcast buffers before
            # the module's own forward runs.
            relevant = set()
            for inner in self._buffer_roots:
                relevant.add(id(inner))
                relevant.add(id(self._outer.get(id(inner), inner)))
            overlap.submit(self._writer, step, collected, relevant)

        def close(self) -> None:
            bridge.overlap.join("exit")
            self._closing = True  # the last step: on this thread
            Watch.close(self)

        def _optimizers(self) -> List[Any]:
            return bridge.live_optimizers()

        def _context(self, module: Any) -> Tuple[Any, Optional[int]]:
            stage = bridge.stage_of(self._outer.get(id(module), module))
            return self._ddps.get(id(module)), stage

        def _not_digested(self, name: str, why: str) -> None:
            # said once per name on stderr, and in the live record, which
            # the analysis reads for the report ("not digested: why")
            if name not in self._skipped:
                bridge.live_event({"event": "not_digested", "tensor": name,
                                   "why": why[:400],
                                   "step": max(self.steps - 1, 0)})
            Watch._not_digested(self, name, why)

        def _check_layout(self, name: str, dtype: str, shape: Any,
                          step: int) -> None:
            # A job is never stopped for a changed shape: the ranks' shapes
            # are compared per step by the analysis.
            self._layouts[name] = (dtype, shape, step)

    return _BridgeWatch()


def _compiled(modules: List[Any]) -> bool:
    """Whether the program runs torch.compile'd modules (torch.compile(m),
    m.compile()). Their steps are digested on the training thread: the
    overlap's join points are module forward hooks, which compiled code
    would trace (a crash in dynamo's guards, or graph breaks), and the
    bridge must leave the program's graphs as they are without it."""
    return any(type(m).__name__ == "OptimizedModule" or
               m.__dict__.get("_compiled_call_impl") is not None
               for m in modules)


def _root_modules(modules: List[Any],
                  outer: Optional[Dict[int, Any]] = None,
                  ddps: Optional[Dict[int, Any]] = None
                  ) -> List[Tuple[str, Any]]:
    """(prefix, module) for each module no other one holds as a child and
    that holds state, in creation order; wrappers (DDP) looked through
    (outer, if given, maps each looked-through module's id to its outermost
    wrapper)."""
    from .torch import _unwrap
    children = set()
    for m in modules:
        for child in m._modules.values():
            if child is not None:
                children.add(id(child))
    roots, seen_names = [], {}
    for m in modules:
        if id(m) in children:
            continue
        inner, ddp = _unwrap(m)
        if outer is not None and inner is not m:
            outer[id(inner)] = m
        if ddps is not None and ddp is not None:
            ddps[id(inner)] = ddp
        if next(inner.parameters(), None) is None and \
                next(inner.buffers(), None) is None:
            continue
        name = type(inner).__name__
        seen_names[name] = seen_names.get(name, 0) + 1
        if seen_names[name] > 1:
            name = f"{name}#{seen_names[name]}"
        roots.append((name + ".", inner))
    return roots


# ---- the step-end digest off the training thread


# How long a join waits for the helper thread before giving up (it then
# turns the state check off, as any error does): far beyond any digest a
# step's state needs (10 GB at the 1 GB/s of one slow core is 10 s), so
# only a helper that is stuck reaches it.
_JOIN_DEADLINE_S = 300.0


def _overlap_setting() -> bool:
    """VQC_WATCH_OVERLAP: 0 (or off, no, false) digests every step on the
    training thread; unset or anything else, on the helper thread."""
    value = os.environ.get("VQC_WATCH_OVERLAP", "1").strip().lower()
    return value not in ("0", "off", "no", "false")


def _version(t: Any) -> Optional[int]:
    """torch's count of in-place writes to t (shared by its views and
    detach()ed aliases, not by `.data`); None for a tensor without one (an
    inference tensor)."""
    try:
        return int(t._version)
    except RuntimeError:
        return None


class _Job:
    """One step's digest: entries are the step's trace lines [name, dtype,
    shape, digest] in order; the digests of those at `positions` come from
    `batch` (vqcheck._core's digest thread, hashing `items`). `checked` are
    (name, alias, version at the step end) whose version must not have
    moved when the lines are written. A learning job (the first digested
    step, hashed on the training thread and written already) has no batch:
    its items only say which memory the collectives that join touch."""

    def __init__(self, step: int, writer: Any, entries: List[List[Any]],
                 relevant: set, learn: bool) -> None:
        self.step = step
        self.writer = writer
        self.entries = entries
        self.relevant = relevant  # module ids whose forward joins
        self.learn = learn
        self.items: List[Any] = []   # prepared tensors (their aliases)
        self.names: List[str] = []
        self.positions: List[int] = []
        self.checked: List[Tuple[str, Any, Optional[int]]] = []
        self.batch: Any = None
        self.spans: Optional[Tuple[List[int], List[int]]] = None

    def done(self) -> bool:
        return self.batch is None or self.batch.done()

    def touched(self, t: Any) -> bool:
        """Whether tensor t's storage overlaps memory this job hashes."""
        if self.spans is None:
            # merged, sorted (lo, hi) of the hashed bytes, made at the
            # first collective that asks
            merged: List[List[int]] = []
            for lo, hi in sorted(item[3] for item in self.items
                                 if item[3][1] > item[3][0]):
                if merged and lo <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], hi)
                else:
                    merged.append([lo, hi])
            self.spans = ([m[0] for m in merged], [m[1] for m in merged])
        los, his = self.spans
        if not los:
            return False
        try:
            storage = t.untyped_storage() \
                if hasattr(t, "untyped_storage") else t.storage()
            lo = storage.data_ptr()
            hi = lo + storage.nbytes()
        except Exception:
            return True  # no plain storage (sparse): assume it may
        if hi <= lo:
            return False
        k = bisect.bisect_right(his, lo)  # the first span ending after lo
        return k < len(los) and los[k] < hi


class _UnorderedWrite(RuntimeError):
    """A watched tensor written in place while its digest was in flight, by
    code that is no join point."""


# Jobs whose join gave up waiting (a stuck digest thread): kept, so that
# the memory they hash is never freed under the thread.
_abandoned: List[_Job] = []


class _Overlap:
    """The step-end digest on a helper thread while training goes on;
    VQC_WATCH_OVERLAP=0 turns it off. docs/pytorch.md ("The digest off the
    training thread") has the reasoning.

    At a digested step end the training thread collects the tensors and
    checks them (the errors of a synchronous digest are raised there, at
    the same step), keeps an alias of each (its memory stays alive if the
    program rebinds the tensor), records torch's version counter of each,
    and queues them on vqcheck._core's digest thread, a pthread that never
    takes the GIL. The memory must not change until hashed, so the digest
    is JOINED (waited for, then the step's lines written) before anything
    that can write the state:
      - optimizer.step() of every optimizer (parameters, optimizer state);
      - the forward of a module that holds buffers, and of the roots (and
        their DDP wrappers) holding any: buffers change in forward (BN
        statistics, EMA codebooks) and DDP broadcasts them first (a global
        forward pre-hook, registered only while a digest is in flight);
      - a torch.distributed collective of ours whose tensors share storage
        with hashed memory (broadcast of parameters, an in-place
        all_reduce into a buffer, p.data passed in);
      - Module.__init__ (DDP's constructor broadcasts from rank 0),
        Module.load_state_dict, destroy_process_group;
      - the next step end, exit, close.
    Any other hook firing (another module's forward, any collective, a
    hang) writes the lines early when the digest is done by then.

    Writes no join orders (plain Python between steps, an EMA model's
    update after optimizer.step()) are checked, not prevented: when the
    lines are written, every hashed tensor's version counter must be where
    it was at the step end. The first digested step is hashed on the
    training thread, and its job stays pending until the first join point
    (hooks that only find it done do not end it): the tensors whose counter
    moved in that window are digested on the training thread from then on.
    Join points are places in the program, so what is learnt does not
    depend on timing. A tensor whose counter moves at a later step turns
    the state check off with an error naming it, instead of writing a
    digest that may be wrong. Writes through `.data`, numpy or dlpack
    aliases do not move the counter: those stay unseen. CUDA tensors are
    hashed on the training thread (on their stream), as before."""

    def __init__(self, bridge: "_Bridge", enabled: bool) -> None:
        self.bridge = bridge
        self.enabled = enabled
        self.pending: Optional[_Job] = None
        self.lock = threading.RLock()        # joins and commits
        self.pid = os.getpid()
        self.hook: Any = None                # global forward pre-hook
        self.learned = False
        self.sync_names: set = set()         # digested on the thread
        self.on_helper = 0                   # steps hashed by the thread
        self.on_thread = 0                   # steps hashed on the thread
        self.joins: Dict[str, int] = {}      # lines written, by reason
        self.waits: Dict[str, int] = {}      # joins that waited, by reason
        self.waited_s = 0.0
        # the training thread's time in step ends (the digest itself when
        # it is hashed there) and in joins outside them (waits included):
        # what the bridge's state check costs it, bar the hooks' calls
        self.step_end_s = 0.0
        self.join_s = 0.0
        # the same in this thread's CPU time: what other processes and
        # threads took from it meanwhile left out
        self.step_end_cpu_s = 0.0
        self.join_cpu_s = 0.0
        self.in_step_end = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork_in_child)

    def submit(self, writer: Any, step: int, collected: List[Any],
               relevant: set) -> None:
        """Step `step`'s digest of `collected` (vqcheck.torch.Collected:
        name, dtype, shape, tensor, group, shard): the tensors are checked
        and prepared here, hashed on the digest thread, or here: the first
        step (its job, a learning one, stays pending to the first join
        point and teaches which tensors unordered code writes), those
        tensors, CUDA ones. (Tensors the digest cannot read were left out
        by watch._collect; an error here turns the check off.)"""
        from ._digest import _digest_prepared, _digest_start, _prepare, \
            digest
        learn = not self.learned
        kept = []
        entries: List[List[Any]] = []
        for c in collected:
            name, t = c[0], c[3]
            if learn or name in self.sync_names:
                item = None
                value = digest(t, name=name)
            else:
                item = _prepare(t, name)
                value = _digest_prepared([item], [name])[0] \
                    if item[0] != "cpu" else None
            entries.append([name, c[1], c[2], value, c[4], c[5]])
            kept.append((c, item))
        job = _Job(step, writer, entries, relevant, learn)
        if learn:
            writer.write_step(step, [tuple(e) for e in entries])
            self.on_thread += 1
            job.checked = [(c[0], c[3], _version(c[3])) for c, _ in kept]
            # the memory each spans, for the collectives that join
            job.items = [_prepare(c[3], c[0]) for c, _ in kept]
        else:
            for k, (c, item) in enumerate(kept):
                if item is None or item[0] != "cpu":
                    continue  # digested above
                job.items.append(item)
                job.names.append(c[0])
                job.positions.append(k)
                job.checked.append((c[0], item[2], _version(c[3])))
            if job.items:
                job.batch = _digest_start(job.items)
        with self.lock:
            self.pending = job
            if self.hook is None:
                from torch.nn.modules.module import \
                    register_module_forward_pre_hook
                self.hook = register_module_forward_pre_hook(
                    self.forward_pre_hook)

    def join(self, why: str, required: bool = True) -> None:
        """Waits for the pending digest and writes its lines (a no-op with
        none pending). Never raises: an error turns the state check off
        (bridge.fail), as a synchronous digest's does. required=False: a
        hook that writes no state, here only because the digest is done:
        the learning job (see submit) waits for a join point."""
        if self.pending is None:
            return
        if os.getpid() != self.pid:
            self._after_fork_in_child()
            return
        with self.lock:
            job = self.pending
            if job is None or (job.learn and not required):
                return
            entered, cpu = time.perf_counter(), time.thread_time()
            if self.hook is not None:
                self.hook.remove()
                self.hook = None
            try:
                if not job.done():
                    start = time.perf_counter()
                    if not job.batch.wait(_JOIN_DEADLINE_S):
                        _abandoned.append(job)
                        raise TimeoutError(
                            f"the digest of step {job.step} did not finish "
                            f"in {_JOIN_DEADLINE_S:.0f} s on its thread")
                    self.waited_s += time.perf_counter() - start
                    self.waits[why] = self.waits.get(why, 0) + 1
                self._commit(job, why)
            except Exception as e:
                self.bridge.fail("state", e)
            finally:
                self.pending = None
                if not self.in_step_end:
                    self.join_s += time.perf_counter() - entered
                    self.join_cpu_s += time.thread_time() - cpu

    def poke(self, why: str) -> None:
        """Writes the pending digest's lines if it is done (a hook that
        needs no join)."""
        job = self.pending
        if job is not None and job.done():
            self.join(why, required=False)

    def before_collective(self, args: Any, kwargs: Any) -> None:
        job = self.pending
        if job is None:
            return
        torch = sys.modules["torch"]
        for value in list(args) + list(kwargs.values()):
            tensors = value if isinstance(value, (list, tuple)) else (value,)
            for t in tensors:
                if isinstance(t, torch.Tensor) and job.touched(t):
                    self.join("collective")
                    return
        if job.done():
            self.join("collective", required=False)

    def forward_pre_hook(self, module: Any, inputs: Any) -> None:
        job = self.pending
        if job is None:
            return None
        # own buffers (a BN, a codebook) or a root (or its wrapper) with
        # buffers below it: may write state; any other: only if done
        if module._buffers or id(module) in job.relevant:
            self.join("forward")
        elif job.done():
            self.join("forward", required=False)
        return None

    def _commit(self, job: _Job, why: str) -> None:
        """The step's lines, once nothing unordered wrote what was hashed
        (see the class comment); raises what the digest raised."""
        from ._digest import _digest_result
        digests = _digest_result(job.batch, job.names) \
            if job.batch is not None else []
        moved = [name for name, t, v in job.checked
                 if v is not None and _version(t) != v]
        if job.learn:
            self.sync_names.update(moved)
            self.learned = True
            return
        if moved:
            # Written in place by code that is no join point, while the
            # digest was in flight: those tensors' digests of this step may
            # be wrong, so their lines are left out of this step (never a
            # wrong digest), and they are digested on the training thread
            # from now on. The check goes on: a drift they carry shows at
            # the next step.
            self.sync_names.update(moved)
            shown = ", ".join(f"'{n}'" for n in moved[:3]) + \
                (f" and {len(moved) - 3} more" if len(moved) > 3 else "")
            sys.stderr.write(
                f"vqcheck watch: {shown} written in place after step "
                f"{job.step}'s end, before the next module forward, "
                "optimizer step or collective, while its digest was "
                "computed off the training thread: left out of step "
                f"{job.step}, digested on the training thread from now on "
                "(VQC_WATCH_OVERLAP=0 digests everything there)\n")
            skip = set(moved)
            kept = [k for k, e in enumerate(job.entries)
                    if e[0] not in skip]
        else:
            kept = list(range(len(job.entries)))
        for k, d in zip(job.positions, digests):
            job.entries[k][3] = d
        job.writer.write_step(job.step,
                              [tuple(job.entries[k]) for k in kept])
        self.on_helper += 1
        self.joins[why] = self.joins.get(why, 0) + 1

    def summary(self) -> Dict[str, Any]:
        """For the rank's "finished" line: where the steps were hashed and
        where their lines were written."""
        return {"overlap": self.enabled, "on_helper": self.on_helper,
                "on_thread": self.on_thread,
                "sync_tensors": sorted(self.sync_names)[:20],
                "joins": dict(self.joins), "waits": dict(self.waits),
                "waited_ms": round(self.waited_s * 1e3, 3),
                "step_end_ms": round(self.step_end_s * 1e3, 3),
                "join_ms": round(self.join_s * 1e3, 3),
                "step_end_cpu_ms": round(self.step_end_cpu_s * 1e3, 3),
                "join_cpu_ms": round(self.join_cpu_s * 1e3, 3)}

    def _after_fork_in_child(self) -> None:
        """A forked child (a DataLoader worker) has no digest thread: what
        the parent had in flight is the parent's (its Batch is never done
        here, and is dropped without waiting)."""
        self.pid = os.getpid()
        self.pending = None
        self.lock = threading.RLock()
        if self.hook is not None:
            try:
                self.hook.remove()
            except Exception:
                pass
            self.hook = None


# ---- lost results of in-place collectives


def _settle_then(original: Any, overlap: "_Overlap") -> Any:
    """destroy_process_group, after 20 ms without the GIL. torch 1.13's gloo
    can deadlock at teardown: a worker thread that just finished a call
    frees its tensors, which needs the GIL, while the main thread joins that
    worker in ~ProcessGroupGloo holding the GIL (seen with gdb; more likely
    on a loaded machine, and the bridge's work between calls makes it no
    less likely). The pause lets such frees happen first."""
    def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
        overlap.join("destroy_process_group")  # nothing pending at teardown
        time.sleep(0.02)
        return original(*args, **kwargs)
    destroy_process_group._vqcheck = True  # type: ignore[attr-defined]
    destroy_process_group.__wrapped__ = original  # type: ignore
    destroy_process_group.__doc__ = getattr(original, "__doc__", None)
    return destroy_process_group


def _probe_refcount(torch: Any) -> int:
    """The reference count a temporary argument has inside a wrapper made by
    _collective_wrapper (the CPython version decides it): the same code
    shape, called with a fresh tensor."""
    def probe(*args: Any, **kwargs: Any) -> int:
        tensor = args[0] if args else kwargs.get("tensor")
        return sys.getrefcount(tensor)
    return probe(torch.empty(1))


# The collectives the bridge follows (torch.distributed names; those a torch
# version lacks are skipped), and the in-place ones whose first argument
# receives the result.
_COLLECTIVES = ("all_reduce", "all_reduce_coalesced", "all_gather",
                "all_gather_into_tensor", "_all_gather_base",
                "all_gather_object", "reduce_scatter",
                "reduce_scatter_tensor", "_reduce_scatter_base", "broadcast",
                "broadcast_object_list", "barrier", "all_to_all",
                "all_to_all_single", "reduce", "gather", "scatter",
                "gather_object", "scatter_object_list", "send", "recv",
                # torch 2.x: FSDP2's, and point-to-point (pipelining)
                "all_gather_single", "reduce_scatter_single", "isend",
                "irecv", "batch_isend_irecv", "send_object_list",
                "recv_object_list")
_INPLACE = ("all_reduce", "broadcast", "reduce", "all_reduce_coalesced")


# Out-of-place collectives (torch.distributed.nn and _functional_collectives
# names; those a torch version lacks are skipped). Their wrappers, by the
# id of the function wrapped, so that a name re-exported by two modules gets
# one wrapper.
_OUT_OF_PLACE = ("all_reduce", "all_gather", "all_gather_tensor",
                 "all_reduce_coalesced", "all_gather_into_tensor_coalesced",
                 "broadcast", "reduce", "reduce_scatter",
                 "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced",
                 "all_to_all", "all_to_all_single", "gather", "scatter")
_WRAPPED: Dict[int, Any] = {}


def _collective_wrapper(bridge: _Bridge, op: str, original: Any,
                        kind: str) -> Any:
    """The wrapper of collective `op`; kind is "inplace" (the result is
    written into the first argument), "out_of_place" (it is returned) or
    "other"."""
    import inspect
    try:
        params = _parameters(inspect.signature(original))
    except (TypeError, ValueError):
        params = None
    inplace = kind == "inplace"
    module = str(getattr(original, "__module__", ""))

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nesting = bridge.nesting
        if getattr(nesting, "depth", 0):
            # Called by another collective (all_gather_object calls
            # all_gather; torch.distributed.nn's all_reduce calls
            # dist.all_reduce): the outer call stands for it.
            return original(*args, **kwargs)
        caller = sys._getframe(1)
        if _dropped:
            _sweep_dropped(bridge)
        tensor = args[0] if args else kwargs.get("tensor")
        if inplace and tensor is not None and \
                "lost_inplace" not in bridge.disabled:
            try:
                # args and the local name hold it, beside the caller's refs
                if sys.getrefcount(tensor) <= bridge.baseline_refs:
                    _check_temporary(bridge, op, tensor, caller)
            except Exception as e:
                bridge.fail("lost_inplace", e)
        seq, record = 0, None
        if "hang" not in bridge.disabled:
            fields = None
            try:
                if "ledger" not in bridge.disabled and params is not None \
                        and op in _LEDGER_ARGS:
                    fields = _ledger_fields(op, _arguments(params, args,
                                                           kwargs))
            except Exception as e:
                bridge.fail("ledger", e)
            try:
                seq, record = bridge.enter(op, caller, fields)
            except Exception as e:
                bridge.fail("hang", e)
        if bridge.overlap.pending is not None:
            # a digest in flight: joined first if the call may write
            # (or read) memory it hashes
            bridge.overlap.before_collective(args, kwargs)
        nesting.depth = 1
        error: Optional[BaseException] = None
        try:
            result = original(*args, **kwargs)
        except BaseException as e:
            error = e
            raise
        finally:
            nesting.depth = 0
            if seq:
                try:
                    bridge.leave(seq, record, error)
                except Exception as e:
                    bridge.fail("hang", e)
        if op == "all_gather" and kind != "out_of_place" and \
                "gradient" not in bridge.disabled:
            try:
                bridge.note_gather(args, kwargs, caller)
            except Exception as e:
                bridge.fail("gradient", e)
        if "lost_inplace" not in bridge.disabled:
            try:
                if kind == "out_of_place":
                    _check_result(bridge, op, result, caller, module)
                elif inplace and result is not None and \
                        tensor is not None and \
                        _is_async(params, args, kwargs):
                    _watch_work(bridge, op, tensor, result, caller,
                                _group_key(params, args, kwargs))
                elif (_pending_works or _dropped) and error is None and \
                        not _is_async(params, args, kwargs):
                    # a blocking call orders its group's earlier work
                    _ordered(_group_key(params, args, kwargs))
            except Exception as e:
                bridge.fail("lost_inplace", e)
        return result
    wrapper._vqcheck = True  # type: ignore[attr-defined]
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(original, "__name__", op)
    wrapper.__qualname__ = getattr(original, "__qualname__", op)
    wrapper.__module__ = getattr(original, "__module__", wrapper.__module__)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    return wrapper


# What the ledger records of each collective: the argument whose elements
# are counted (None: count 0, for collectives whose sizes may differ by rank:
# objects, all_to_all) and whether it takes a reduction and a root.
_LEDGER_ARGS: Dict[str, Tuple[Optional[str], bool, Optional[str]]] = {
    "all_reduce": ("tensor", True, None),
    "all_reduce_coalesced": ("tensors", True, None),
    "all_gather": ("tensor", False, None),
    "all_gather_into_tensor": ("input_tensor", False, None),
    "_all_gather_base": ("input_tensor", False, None),
    "all_gather_object": (None, False, None),
    "reduce_scatter": ("output", True, None),
    "reduce_scatter_tensor": ("output", True, None),
    "all_gather_single": ("input_tensor", False, None),
    "reduce_scatter_single": ("output", True, None),
    "_reduce_scatter_base": ("output", True, None),
    "broadcast": ("tensor", False, "src"),
    "broadcast_object_list": (None, False, "src"),
    "barrier": (None, False, None),
    "all_to_all": (None, False, None),
    "all_to_all_single": (None, False, None),
    "reduce": ("tensor", True, "dst"),
    "gather": ("tensor", False, "dst"),
    "scatter": ("tensor", False, "src"),
    "gather_object": (None, False, "dst"),
    "scatter_object_list": (None, False, "src"),
}
_REDOPS = ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG")


def _parameters(signature: Any) -> Optional[Tuple[List[str], Dict[str,
                                                                   Any]]]:
    """A function's parameter names in order and their defaults, for
    _arguments (inspect's bind costs ~20 us a call; this ~1 us)."""
    if signature is None:
        return None
    names, defaults = [], {}
    for name, p in signature.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        names.append(name)
        if p.default is not p.empty:
            defaults[name] = p.default
    return names, defaults


def _arguments(params: Tuple[List[str], Dict[str, Any]], args: Any,
               kwargs: Any) -> Dict[str, Any]:
    """Every argument of a call by name, defaults included."""
    names, defaults = params
    given = dict(defaults)
    given.update(zip(names, args))
    given.update(kwargs)
    return given


def _ledger_fields(op: str, given: Optional[Dict[str, Any]]
                   ) -> Optional[Dict[str, Any]]:
    """The ledger fields of a call (redop, dtype, count, root) from its
    arguments by name, or None when it is not compared across ranks:
    point-to-point (send, recv) and collectives on a group other than the
    default one, whose calls only that group's ranks make, in their own
    order. Those are still followed for hangs."""
    spec = _LEDGER_ARGS.get(op)
    if spec is None or given is None:
        return None
    group = given.get("group")
    if group is not None:
        dist = sys.modules["torch.distributed"]
        if group is not dist.GroupMember.WORLD:
            return None
    counted, reduces, root = spec
    dtype, count = "", 0
    value = given.get(counted) if counted else None
    if isinstance(value, (list, tuple)):  # all_reduce_coalesced
        count = sum(int(t.numel()) for t in value)
        value = value[0] if value else None
    elif value is not None:
        count = int(value.numel())
    if value is not None:
        dtype = _dtype_name(value.dtype)
    return {"redop": _redop_name(given.get("op")) if reduces else "",
            "dtype": dtype, "count": count,
            "root": _root_of(given.get(root)) if root else -1}


_dtype_names: Dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    """torch.float32 -> "float32" (the digest's names)."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).replace("torch.", "")
    return name


def _root_of(value: Any) -> int:
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return -1


# ReduceOp's class constants by identity (kept alive here, so an id is never
# reused): the common case without comparisons.
_redop_constants: Dict[int, Tuple[Any, str]] = {}


def _redop_name(op: Any) -> str:
    """torch.distributed.ReduceOp X as the ledger's "x" (premul_sum for the
    per-call reductions torch makes)."""
    if op is None:
        return "sum"
    known = _redop_constants.get(id(op))
    if known is not None:
        return known[1]
    name = getattr(op, "name", None)  # ReduceOp.RedOpType, newer torch
    if isinstance(name, str):
        return name.lower()
    reduce_op = sys.modules["torch.distributed"].ReduceOp
    if not _redop_constants:
        for candidate in _REDOPS:
            constant = getattr(reduce_op, candidate, None)
            if constant is not None and \
                    getattr(reduce_op, candidate) is constant:
                _redop_constants[id(constant)] = (constant,
                                                  candidate.lower())
        known = _redop_constants.get(id(op))
        if known is not None:
            return known[1]
    for candidate in _REDOPS:
        try:
            if op == getattr(reduce_op, candidate):
                return candidate.lower()
        except (TypeError, AttributeError):
            continue
    return "premul_sum"


def _is_async(params: Any, args: Any, kwargs: Any) -> bool:
    if "async_op" in kwargs:
        return bool(kwargs["async_op"])
    if params is None:
        return False
    return bool(_arguments(params, args, kwargs).get("async_op", False))


# Works of async collectives not yet waited on (id(work) -> _PendingWork),
# and those dropped (garbage-collected) unwaited while the function that
# issued them still runs: nothing ordered the program's reads after the
# result yet, but a later blocking call on the same process group still
# may before that function returns (docs/pytorch.md, "Ordering").
class _PendingWork:
    __slots__ = ("op", "where", "described", "group", "order", "frame")

    def __init__(self, op: str, where: Tuple[str, int, str],
                 described: Dict[str, Any], group: int, order: int,
                 frame: Tuple[int, Any]) -> None:
        self.op, self.where, self.described = op, where, described
        self.group, self.order, self.frame = group, order, frame


_pending_works: Dict[int, _PendingWork] = {}
_dropped: List[_PendingWork] = []
_work_order = 0
_work_patched = False


def _group_key(params: Any, args: Any, kwargs: Any) -> int:
    """Which process group a call runs on: id() of its group argument, 0
    for the default group."""
    group = kwargs.get("group") if "group" in kwargs else \
        (_arguments(params, args, kwargs).get("group")
         if params is not None else None)
    dist = sys.modules.get("torch.distributed")
    if group is None or (dist is not None and
                         group is getattr(dist.GroupMember, "WORLD", None)):
        return 0
    return id(group)


def _executing(frame: Tuple[int, Any]) -> bool:
    """Whether the frame (id, code) is still running on this thread's
    stack. Frames are never held: a frame keeps its locals, and so the
    Work, alive."""
    f = sys._getframe(1)
    while f is not None:
        if id(f) == frame[0] and f.f_code is frame[1]:
            return True
        f = f.f_back
    return False


def _watch_work(bridge: _Bridge, op: str, tensor: Any, work: Any,
                frame: Any, group: int) -> None:
    global _work_patched, _work_order
    if not _work_patched:
        _patch_work_class(type(work))
        _work_patched = True
    site = _outside(frame)
    if site is None:
        return
    where = (site.f_code.co_filename, site.f_lineno, site.f_code.co_name)
    described = {"dtype": str(tensor.dtype).replace("torch.", ""),
                 "shape": list(tensor.shape), "count": int(tensor.numel())}
    key = id(work)
    _work_order += 1
    _pending_works[key] = _PendingWork(op, where, described, group,
                                       _work_order, (id(site), site.f_code))

    def collected() -> None:
        entry = _pending_works.pop(key, None)
        if entry is None:
            return  # waited on, or ordered by a later blocking call
        if _executing(entry.frame):
            _dropped.append(entry)  # its function may still order it
        else:
            _report_unwaited(bridge, entry)
    weakref.finalize(work, collected)


def _ordered(group: int, before: Optional[int] = None) -> None:
    """A blocking call on process group `group` returned (or a Work of it
    was waited on, `before` its order): the backend runs a group's work
    in order, so every earlier async call on it has completed."""
    for key, entry in list(_pending_works.items()):
        if entry.group == group and (before is None or entry.order < before):
            del _pending_works[key]
    _dropped[:] = [e for e in _dropped if e.group != group or
                   (before is not None and e.order >= before)]


def _sweep_dropped(bridge: _Bridge) -> None:
    """Dropped Works whose function returned with nothing ordering them
    are findings (at the next collective, step end or exit)."""
    if not _dropped:
        return
    done = [e for e in _dropped if not _executing(e.frame)]
    if done:
        _dropped[:] = [e for e in _dropped if e not in done]
        for entry in done:
            _report_unwaited(bridge, entry)


def _patch_work_class(cls: Any) -> None:
    """Work.wait() and the other ways to observe a result mark the Work as
    waited on (class-level: Work objects are torch's C++ objects), and
    order every earlier Work of its process group."""
    for name in ("wait", "get_future", "result", "synchronize"):
        original = getattr(cls, name, None)
        if original is None:
            continue

        def observed(work: Any, *args: Any, _original: Any = original,
                     **kwargs: Any) -> Any:
            entry = _pending_works.pop(id(work), None)
            result = _original(work, *args, **kwargs)
            if entry is not None and (_pending_works or _dropped):
                _ordered(entry.group, entry.order)
            return result
        setattr(cls, name, observed)


def _report_unwaited(bridge: _Bridge, entry: _PendingWork) -> None:
    op, where, described = entry.op, entry.where, entry.described
    file, line, func = where
    source = linecache.getline(file, line).strip()
    bridge.report_once(
        ("unwaited", op, file, line), "lost_inplace", where,
        _argument_text(source, op) or f"the {op} input",
        f"{op}(..., async_op=True) at {os.path.basename(file)}:{line} "
        f"({func}) returned a Work that was never waited on"
        f"{': `' + source + '`' if source else ''}; nothing orders the "
        "program's reads of the tensor after the result arrives (no wait(), "
        f"and no blocking call on the same process group before {func} "
        "returned). Call work.wait() before using the tensor",
        {"op": op, "out_of_place": False, "result": "not waited",
         "reason": "async collective's Work never waited on",
         **described, "source": source,
         "rule": "the Work was garbage-collected without wait(), "
                 "get_future(), result() or synchronize(), and no blocking "
                 "call on its process group (barrier, a blocking "
                 "collective, a later Work's wait()) came before the "
                 "function that issued it returned"})


def _keep_warnings_at_the_callers_line() -> None:
    """A warning torch raises inside a collective the bridge wraps (with
    stacklevel=2, "your call") would name the bridge's wrapper as its
    place. warnings.showwarning is wrapped (once; whatever the program or
    logging installs later replaces it) to show such a warning at the line
    that called the wrapper, where it would be without the bridge."""
    import warnings
    shown = warnings.showwarning
    if getattr(shown, "_vqcheck", False):
        return

    def showwarning(message: Any, category: Any, filename: str, lineno: int,
                    file: Any = None, line: Any = None) -> None:
        if filename.startswith(_PACKAGE_DIR):
            f = sys._getframe(1)
            while f is not None and \
                    not f.f_code.co_filename.startswith(_PACKAGE_DIR):
                f = f.f_back  # up to the bridge's frame
            while f is not None and \
                    f.f_code.co_filename.startswith(_PACKAGE_DIR):
                f = f.f_back  # and past it: its caller
            if f is not None:
                filename, lineno, line = f.f_code.co_filename, f.f_lineno, \
                    None
        shown(message, category, filename, lineno, file, line)
    showwarning._vqcheck = True  # type: ignore[attr-defined]
    warnings.showwarning = showwarning


# vqcheck's own files (the package's folder, with a separator).
_PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")
# torch's collective API layer: a collective called from here stands for
# the user's call (all_gather_object calls all_gather), not for torch's own.
_API_FILES = (os.path.join("torch", "distributed", "distributed_c10d.py"),
              os.path.join("torch", "distributed", "c10d_logger.py"))


def _library_caller(frame: Any) -> Any:
    """The frame in torch that called a collective torch issues itself
    (pipelining's schedule, FSDP, DTensor redistribution), else None. Such
    a call is identified in the ledger by that library function (its file
    and first line), not by the user's line that led there: two ranks that
    reach the same schedule step from the two branches of `if rank == 0:
    ... else: ...` make the same call, and so do two branches inside the
    function (DTensor's mesh_scatter) (docs/pytorch.md, "Parallel
    layouts")."""
    while frame is not None and \
            frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return None
    file = frame.f_code.co_filename
    if os.sep + "torch" + os.sep not in file or file.endswith(_API_FILES):
        return None
    return frame


def _outside(frame: Any) -> Any:
    """The first frame outside torch and vqcheck: the user's call site."""
    skip = (os.sep + "torch" + os.sep, os.sep + "vqcheck" + os.sep)
    while frame is not None and any(s in frame.f_code.co_filename
                                    for s in skip):
        frame = frame.f_back
    return frame


# ---- lost results: who else holds a tensor, what the caller does next


_instructions: Dict[Any, List[Tuple[int, str]]] = {}


def _code_instructions(code: Any) -> List[Tuple[int, str]]:
    """(offset, opname) of every instruction of code, CACHE entries
    included (f_lasti points at one during a call in CPython 3.11)."""
    found = _instructions.get(code)
    if found is None:
        import dis
        try:
            found = [(i.offset, i.opname) for i in
                     dis.get_instructions(code, show_caches=True)]
        except TypeError:  # Python < 3.11: no caches
            found = [(i.offset, i.opname) for i in dis.get_instructions(code)]
        _instructions[code] = found
    return found


def _result_dropped(caller: Any) -> bool:
    """Whether frame `caller`, now in a call, pops the call's value right
    after it: the first instruction after the call (past its CACHE
    entries) is POP_TOP, which is what an expression statement compiles
    to. An assignment, a return, an argument or an operand is not."""
    code, lasti = caller.f_code, caller.f_lasti
    for offset, name in _code_instructions(code):
        if offset > lasti and name != "CACHE":
            return name == "POP_TOP"
    return False


def _use_counter(torch: Any, of: str) -> Any:
    """A function telling how many holders a tensor's TensorImpl (of=
    "tensor") or storage (of="storage") has, beside the caller's Python
    object; None when this torch does not let it be read reliably.

    Both are c10::intrusive_ptr_target objects: a vtable pointer, then the
    atomic reference count, read at that offset from the address torch
    gives (`tensor._cdata`, `storage._cdata`). torch's own
    `_storage_Use_Count` is used where it exists. The reading is checked on
    probes whose holders are known (a fresh tensor; the same tensor held
    once more by C++: as a parameter's .grad, or by a detach()ed tensor
    sharing its storage); any surprise turns the reader off."""
    import ctypes

    def storage_of(t: Any) -> Any:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") \
            else t.storage()
        return getattr(st, "_storage", st)  # TypedStorage -> Untyped

    official = getattr(torch._C, "_storage_Use_Count", None)

    def raw(t: Any) -> int:
        if of == "tensor":
            address = t._cdata
        else:
            st = storage_of(t)  # alive while its count is read
            if official is not None:
                return int(official(st._cdata))
            address = st._cdata
        return int(ctypes.c_size_t.from_address(
            address + ctypes.sizeof(ctypes.c_void_p)).value)
    try:
        fresh = torch.zeros(4)
        base = raw(fresh)
        if raw(torch.zeros(2)) != base:
            return None
        if of == "tensor":
            holder = torch.nn.Parameter(torch.zeros(4))
            holder.grad = fresh
            held = raw(fresh)
            holder.grad = None
        else:
            holder = fresh.detach()
            held = raw(fresh)
            del holder
        if held != base + 1 or raw(fresh) != base:
            return None
    except Exception:
        return None
    return lambda t: raw(t) - base + 1


def _held_elsewhere(bridge: _Bridge, tensor: Any) -> bool:
    """Whether something besides the call can read what is written into
    tensor: C++ holds the tensor itself (a parameter's .grad, a tensor
    saved for backward) or another tensor shares its storage (p.data,
    x.detach()). Without use counts: the program's parameters, buffers and
    gradients, by address."""
    if bridge.tensor_holders is not None and \
            bridge.tensor_holders(tensor) > 1:
        return True
    if bridge.storage_holders is not None:
        return bool(bridge.storage_holders(tensor) > 1)
    ptr = tensor.data_ptr()
    for module in bridge.live_modules():
        for t in list(module.parameters(recurse=False)) + \
                list(module.buffers(recurse=False)):
            if t.data_ptr() == ptr or \
                    (t.grad is not None and t.grad.data_ptr() == ptr):
                return True
    return False


def _check_temporary(bridge: _Bridge, op: str, tensor: Any,
                     caller: Any) -> None:
    """An in-place collective's tensor that only the call references (the
    caller checked the Python reference count): reported unless it is a
    view or something else holds it (see the rules above). Decided before
    the call runs: afterwards the backend may still hold the tensor for a
    moment (a gloo worker thread), which would blur any later sign."""
    torch = sys.modules["torch"]
    if not isinstance(tensor, torch.Tensor) or tensor._base is not None:
        return
    if _held_elsewhere(bridge, tensor):
        return
    site = _outside(caller)
    if site is None:
        return
    where = (site.f_code.co_filename, site.f_lineno, site.f_code.co_name)
    _report_temporary(bridge, op, where,
                      {"dtype": str(tensor.dtype).replace("torch.", ""),
                       "shape": list(tensor.shape),
                       "count": int(tensor.numel())})


def _report_temporary(bridge: _Bridge, op: str, where: Tuple[str, int, str],
                      described: Dict[str, Any]) -> None:
    file, line, func = where
    source = linecache.getline(file, line).strip()
    bridge.report_once(
        (op, file, line), "lost_inplace", where,
        _argument_text(source, op) or f"a temporary {op} input",
        f"{op} at {os.path.basename(file)}:{line} ({func}) writes its "
        "result into a temporary tensor that nothing else references"
        f"{': `' + source + '`' if source else ''}; the result is thrown "
        "away when the call returns and every rank keeps its own values. "
        f"Keep the tensor and use it: `t = x.contiguous(); {op}(t)`, then "
        "read t",
        dict(described, op=op, out_of_place=False, result="temporary",
             reason="reduced a temporary tensor; the result never reached "
                    "the program",
             source=source,
             rule="at the call, nothing but the call referenced the tensor "
                  "(Python or C++), it was not a view and shared its storage "
                  "with no other tensor (vqcheck._bridge)"))


def _check_result(bridge: _Bridge, op: str, result: Any, caller: Any,
                  module: str) -> None:
    """An out-of-place collective's result that the caller pops unread (an
    expression statement) is reported. A tuple result (all_gather) is
    described by its first tensor."""
    torch = sys.modules["torch"]
    first = result
    if isinstance(result, (tuple, list)):
        first = result[0] if result else None
    if not isinstance(first, torch.Tensor) or not _result_dropped(caller):
        return
    site = _outside(caller)
    if site is None:
        return
    file, line, func = (site.f_code.co_filename, site.f_lineno,
                        site.f_code.co_name)
    source = linecache.getline(file, line).strip()
    bridge.report_once(
        ("discarded", op, file, line), "lost_inplace", (file, line, func),
        _argument_text(source, op) or f"the {op} input",
        f"{op} at {os.path.basename(file)}:{line} ({func}) returns its "
        "result as a new tensor and leaves its input unchanged, but the "
        f"result is discarded{': `' + source + '`' if source else ''}; "
        "the program goes on with this rank's own values. Use the "
        f"result: `t = {op}(t)`",
        {"op": op, "out_of_place": True, "result": "discarded",
         "reason": "out-of-place collective result never read",
         "source": source,
         "dtype": str(first.dtype).replace("torch.", ""),
         "shape": list(first.shape), "count": int(first.numel()),
         "rule": f"the value returned by the out-of-place {op} ({module}) "
                 "is popped by the instruction after the call: an "
                 "expression statement (vqcheck._bridge)"})


def _argument_text(source: str, op: str, index: int = 0) -> str:
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
