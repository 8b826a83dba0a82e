"""The state walk: which modules and optimizers the program made, the
training step, and the digests of their state at each step end.

- torch.nn.Module.__init__: every module the program creates is remembered
  (weakly, in creation order); at a step end the digested state is that of
  the ROOT modules, those no other remembered module holds as a child (a
  DistributedDataParallel wrapper and its module count once; torch.compile's
  OptimizedModule is looked through), named "<class name>.<parameter or
  buffer name>" ("VectorQuantize._codebook.embed"; a second root of the
  same class is "<class>#2").
- torch.optim.Optimizer.__init__: every optimizer's step() ends a training
  step (wrapped per instance, as vqcheck.torch.watch does: the two share
  vqcheck.torch.Watch and its optimizer hook); its state is digested too.
  vqcheck.torch.step() ends a step in a program without one (vqcheck._hooks).
- pipeline stages remember their module's stage index (vqcheck._layout
  compares a stage's tensors per stage).
The digest runs on vqcheck._core's digest thread (_overlap), joined before
anything that can write the state: Module.__init__ and load_state_dict
join here, optimizer.step before it runs.

Handed: Records, the _Overlap, what else a step end decides (a function:
the lost results') and the number of the last collective (a function, for
the heartbeat). vqcheck.torch is imported when torch is (the
bridge must not import torch before the program does).
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from .._heartbeat import RUNNING
from ._overlap import _Overlap
from ._patching import lookup, own_attribute, patch, remember_instance
from ._records import Records


class StateCheck:
    """The program's modules, optimizers and pipeline stages, and the
    watch over them (made at the first step end)."""

    def __init__(self, records: Records, overlap: _Overlap, interval: int,
                 at_step_end: Callable[[], None],
                 collective_seq: Callable[[], int]) -> None:
        self.records = records
        self.overlap = overlap
        self.interval = interval
        # what the other parts decide at each step end, before the state's
        # digests (lost results: Lost.at_step_end)
        self.at_step_end = at_step_end
        self.collective_seq = collective_seq
        self.modules: List[weakref.ref] = []  # every module, creation order
        self.optimizers: List[weakref.ref] = []
        self.grad_scalers: List[weakref.ref] = []  # torch.amp.GradScaler
        self.watch: Any = None                # the state watch, at step 1
        # pipeline stages: id(stage module) -> (weakref, stage index)
        self.stages: Dict[int, Tuple[Any, int]] = {}
        # optimizer steps in progress on this thread (an optimizer that
        # drives another, as ZeroRedundancyOptimizer does, ends one step)
        self.step_depth = threading.local()

    def steps(self) -> int:
        """Training steps ended so far: the current step's number."""
        return self.watch.steps if self.watch is not None else 0

    # -- hooks into torch

    def patch(self, torch: Any) -> None:
        self._patch_module_init(torch)
        self._patch_load_state_dict(torch)
        self._patch_optimizer_init(torch)
        self._patch_grad_scaler_init(torch)

    def _patch_module_init(self, torch: Any) -> None:
        overlap, state = self.overlap, self

        def make(original: Any) -> Any:
            def __init__(module: Any, *args: Any, **kwargs: Any) -> None:
                # A module made after a step end may write the state at
                # once (DistributedDataParallel broadcasts its module's
                # parameters and buffers from rank 0, in C++, right after
                # this returns).
                if overlap.pending is not None:
                    overlap.join("module init")
                original(module, *args, **kwargs)
                # Only the outermost __init__ of a subclass chain records
                # it. The mark is read from __dict__: a getattr would reach
                # the module's own __getattr__, which may forward to an
                # attribute its __init__ has not set yet (FSDP1:
                # RecursionError).
                if own_attribute(module, "_vqcheck_seen", False):
                    return
                object.__setattr__(module, "_vqcheck_seen", True)
                state.modules.append(weakref.ref(module))
            return __init__
        patch(torch.nn.Module, "__init__", make)

    def _patch_load_state_dict(self, torch: Any) -> None:
        """Module.load_state_dict copies into the parameters and buffers in
        place: the pending digest is joined first."""
        overlap = self.overlap

        def make(original: Any) -> Any:
            def load_state_dict(module: Any, *args: Any,
                                **kwargs: Any) -> Any:
                if overlap.pending is not None:
                    overlap.join("load_state_dict")
                return original(module, *args, **kwargs)
            return load_state_dict
        patch(torch.nn.Module, "load_state_dict", make)

    def _patch_optimizer_init(self, torch: Any) -> None:
        def make(original: Any) -> Any:
            def __init__(opt: Any, *args: Any, **kwargs: Any) -> None:
                original(opt, *args, **kwargs)
                if opt.__dict__.get("_vqcheck_hooked", False):
                    return
                opt.__dict__["_vqcheck_hooked"] = True
                self.optimizers.append(weakref.ref(opt))
                self.hook_step(opt)
            return __init__
        patch(torch.optim.Optimizer, "__init__", make)

    def _patch_grad_scaler_init(self, torch: Any) -> None:
        """Every GradScaler (torch.amp's, and the CUDA and FSDP ones made
        from it) is remembered: its scale is state every rank must agree
        on."""
        amp = getattr(getattr(torch, "amp", None), "grad_scaler", None)
        cls = getattr(amp, "GradScaler", None)
        if cls is None:  # torch 1.13: torch.cuda.amp's is the base
            cls = getattr(getattr(torch.cuda, "amp", None), "GradScaler",
                          None)
        if cls is None:
            return
        scalers = self.grad_scalers

        def make(original: Any) -> Any:
            def __init__(scaler: Any, *args: Any, **kwargs: Any) -> None:
                original(scaler, *args, **kwargs)
                if scaler.__dict__.get("_vqcheck_seen", False):
                    return
                scaler.__dict__["_vqcheck_seen"] = True
                scalers.append(weakref.ref(scaler))
            return __init__
        patch(cls, "__init__", make)

    def patch_pipeline_stage(self, module: Any) -> None:
        """A pipeline stage (torch.distributed.pipelining) remembers its
        module's stage index: its tensors are compared per stage
        (vqcheck._layout)."""
        base = lookup(module, "_PipelineStageBase")
        if base is None:
            return
        records, stages = self.records, self.stages

        def make(original: Any) -> Any:
            def __init__(stage: Any, submodule: Any, stage_index: int,
                         *args: Any, **kwargs: Any) -> None:
                original(stage, submodule, stage_index, *args, **kwargs)
                with records.lock:
                    stages[id(submodule)] = (weakref.ref(submodule),
                                             int(stage_index))
            return __init__
        patch(base, "__init__", make)

    def hook_step(self, opt: Any) -> None:
        """opt.step() then the step end (vqcheck.torch's optimizer hook);
        before the step, which writes the parameters and the optimizer's
        state, the pending digest is joined. A step taken inside another
        optimizer's step (ZeroRedundancyOptimizer's local optimizer, a
        Lookahead wrapper's inner one) is part of that step: only the
        outermost ends a training step, after all it does (ZeRO's
        broadcast of the updated partitions)."""
        from ..torch import _call_after_step
        overlap = self.overlap
        depth = self.step_depth
        step_end = self.step_end

        def before_step() -> None:
            if getattr(depth, "n", 0) == 0 and overlap.pending is not None:
                overlap.join("optimizer.step")
            depth.n = getattr(depth, "n", 0) + 1

        def after_step() -> None:
            depth.n -= 1
            if depth.n == 0:
                step_end()

        def failed() -> None:
            depth.n -= 1
        d = object.__getattribute__(opt, "__dict__")
        had, held = "step" in d, d.get("step")
        installed = _call_after_step(opt, after_step, before_step, failed)
        remember_instance(opt, "step", had, held, installed)

    # -- what the program holds

    def stage_of(self, module: Any) -> Optional[int]:
        """The pipeline stage index of `module` (or of a module above it in
        a stage), None outside any stage."""
        with self.records.lock:
            stages = list(self.stages.values())
        for ref, index in stages:
            held = ref()
            if held is None:
                continue
            if held is module or any(m is module for m in held.modules()):
                return index
        return None

    def live_modules(self) -> List[Any]:
        alive = [m for m in (r() for r in self.modules) if m is not None]
        self.modules = [weakref.ref(m) for m in alive]  # drop the dead
        return alive

    def live_optimizers(self) -> List[Any]:
        alive = [o for o in (r() for r in self.optimizers) if o is not None]
        self.optimizers = [weakref.ref(o) for o in alive]
        return alive

    def live_grad_scalers(self) -> List[Any]:
        alive = [g for g in (r() for r in self.grad_scalers) if g is not None]
        self.grad_scalers = [weakref.ref(g) for g in alive]
        return alive

    # -- step ends

    def step_end(self) -> None:
        """A training step ends (an optimizer's step returned, or
        vqcheck.torch.step()): what the other parts decide then, then the
        step's digests, its live line and heartbeat."""
        self.at_step_end()
        records, overlap = self.records, self.overlap
        if "state" in records.disabled:
            return
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            with records.lock:
                records.open_live()
                if self.watch is None:
                    self.watch = _make_bridge_watch(self, records, overlap)
                step = self.watch.steps
                overlap.in_step_end = True
                self.watch.step()
                records.live_event({"event": "step", "step": step})
                records.beat(RUNNING, self.collective_seq(), step + 1, "")
        except Exception as e:
            records.fail("state", e)
        finally:
            overlap.in_step_end = False
            overlap.step_end_s += time.perf_counter() - start
            overlap.step_end_cpu_s += time.thread_time() - cpu

    def close(self) -> None:
        """At exit: the last step's digests (if the interval skipped it)."""
        try:
            if self.watch is not None and not self.watch.closed:
                self.watch.close()
        except Exception as e:
            self.records.fail("state", e)


# ---- the state watch: vqcheck.torch.Watch over the roots and optimizers


def _make_bridge_watch(state: StateCheck, records: Records,
                       overlap: _Overlap) -> Any:
    from ..torch import Watch

    class _BridgeWatch(Watch):
        """Watch whose modules are the program's current root modules and
        whose optimizers are every optimizer it created."""

        def __init__(self) -> None:
            self.exclude = []
            self.optimizer = None
            self._setup(records.out, state.interval)
            self._outer: Dict[int, Any] = {}  # inner module id -> wrapper
            self._closing = False

        def _roots(self) -> List[Tuple[str, Any]]:
            self._outer = {}
            self._ddps: Dict[int, Any] = {}
            return _root_modules(state.live_modules(), self._outer,
                                 self._ddps)

        def _write(self, step: int) -> None:
            """The step's digests on the helper thread (the overlap), or
            here with the overlap off and at the last step."""
            overlap.join("step end")  # the previous step's, first
            if not overlap.enabled or self._closing or \
                    _compiled(state.live_modules()):
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
            overlap.join("exit")
            self._closing = True  # the last step: on this thread
            Watch.close(self)

        def _optimizers(self) -> List[Any]:
            return state.live_optimizers()

        def _grad_scalers(self) -> List[Any]:
            return state.live_grad_scalers()

        def _context(self, module: Any) -> Tuple[Any, Optional[int]]:
            stage = state.stage_of(self._outer.get(id(module), module))
            return self._ddps.get(id(module)), stage

        def _not_digested(self, name: str, why: str,
                          unchecked: bool) -> None:
            # said once per name on stderr, and in the live record, which
            # the analysis reads for the report ("not digested: why") and,
            # when its contents went unchecked, the verdict
            if name not in self._skipped:
                records.live_event({"event": "not_digested", "tensor": name,
                                    "why": why[:400],
                                    "unchecked": unchecked,
                                    "step": max(self.steps - 1, 0)})
            Watch._not_digested(self, name, why, unchecked)

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
    from ..torch import _unwrap
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
