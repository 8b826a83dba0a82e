"""vqcheck.torch: digest traces of a PyTorch job, three lines in your loop.

    import vqcheck.torch
    w = vqcheck.torch.watch(model, optimizer, out="traces")
    for batch in data:
        ...; loss.backward(); optimizer.step()   # each step is digested
    w.close()

Each rank writes out/rank-<r>.trace.jsonl (docs/trace-format.md): after every
`interval`-th optimizer step, and after the last one, the digest of every
parameter and buffer of the watched modules and of every tensor in the
optimizer's state. `vqcheck compare out` then names the first step and
tensor at which the ranks stopped agreeing, and the ranks that are off.

The rank is torch.distributed's (rank 0 of 1 when it is not initialised),
read at the first step, so watch() may come before init_process_group().
"""
from __future__ import annotations

import fnmatch
import math
import os
import sys
import types
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple, Union

import torch

from . import _dense, _hooks, _layout
from ._digest import _dtype_name, digest
from ._trace import TraceWriter, remove_stale_traces

__all__ = ["Watch", "step", "watch"]

# Wrappers whose parameters are their inner module's (class name -> the
# attribute holding it: "module." or "_orig_mod." in the names): the inner
# module is watched instead, so names match the model's own, whatever the
# order of DDP and torch.compile.
_WRAPPERS = {"DistributedDataParallel": "module", "DataParallel": "module",
             "OptimizedModule": "_orig_mod"}


def _unwrap(m: Any) -> Tuple[Any, Any]:
    """(the module inside m's wrappers, the DistributedDataParallel among
    them or None: its process group is the replica group)."""
    ddp = None
    while True:
        inner = m.__dict__.get("_modules", {}).get(
            _WRAPPERS.get(type(m).__name__, ""))
        if inner is None:
            return m, ddp
        if type(m).__name__ == "DistributedDataParallel" and ddp is None:
            ddp = m
        m = inner
# torch dtype -> the trace's dtype name, for each dtype met
_DTYPE_NAMES: Dict[Any, str] = {}
# A step's watched tensor: (name, dtype name, shape, tensor, replica group
# or None for every rank, shard key or "", its values or None: the
# elements of a hyper-parameter or grad scaler line, which the trace tells
# so that a divergence there says "value 0.02 on rank 1 vs 0.01 on rank 0").
Collected = Tuple[str, str, Tuple[int, ...], torch.Tensor,
                  Optional[Tuple[int, ...]], str, Optional[List[float]]]
# The most elements a trace line's "values" holds (checkers/trace.h).
_MAX_VALUES = 8


def _told_values(t: torch.Tensor) -> Optional[List[float]]:
    """The elements of a small CPU tensor as floats, for the trace's
    "values"; None for a larger one, one on a device (reading it would
    wait for the device) or one with a value JSON cannot hold."""
    if t.device.type != "cpu" or t.numel() > _MAX_VALUES or \
            t.is_complex():
        return None
    values = [float(v) for v in t.reshape(-1).tolist()]
    return values if all(math.isfinite(v) for v in values) else None


def watch(
    modules: Union[torch.nn.Module, Sequence[torch.nn.Module]],
    optimizer: Optional[torch.optim.Optimizer] = None,
    out: str = "vqcheck-traces",
    interval: int = 1,
    names: Optional[Union[str, Sequence[str]]] = None,
    exclude: Sequence[str] = (),
) -> "Watch":
    """Watches the replicated state of `modules` (a module or a sequence of
    them) and `optimizer`, writing digest traces to `out`.

    modules    their parameters and buffers are digested, named as by
               named_parameters() / named_buffers(); a DistributedDataParallel
               or DataParallel wrapper is looked through (no "module."
               prefix); a tensor reached twice (tied weights, a module given
               twice) is digested once.
    optimizer  its state tensors (exp_avg, momentum_buffer, step, ...) are
               digested as "<parameter name>.<key>", and its step() ends each
               training step. Without one, call .step() yourself.
    out        the directory of the traces (created if needed).
    interval   digest steps 0, interval, 2*interval, ... and the last.
    names      a prefix for each module's tensor names (default: none for one
               module, "0.", "1.", ... for several).
    exclude    shell-style patterns of tensor names to leave out, for state
               that is per-rank by design: BatchNorm's running statistics
               under DDP, exclude=["*.running_mean", "*.running_var"].

    Returns a Watch: call .close() at the end (or use it as a context
    manager). Raises TypeError for a non-module, ValueError for a bad
    interval or names.
    """
    return Watch(modules, optimizer, out, interval, names, exclude)


def step() -> None:
    """Ends a training step under `vqcheck watch` in a program without an
    optimizer (with one, optimizer.step() ends each step). Does nothing when
    the job is not run by `vqcheck watch`; for vqcheck.torch.watch() use
    its .step(). (The bridge registers its step end in vqcheck._hooks, so
    this module never imports it.)"""
    _hooks.step_end()


class Watch:
    """The digests of a set of modules and an optimizer, one trace line per
    tensor per checked step. Made by vqcheck.torch.watch()."""

    def __init__(self, modules: Any, optimizer: Any, out: str, interval: int,
                 names: Any, exclude: Sequence[str] = ()) -> None:
        self._modules, wrappers = _check_modules(modules)
        self._prefixes = _check_names(names, len(self._modules))
        if optimizer is not None and not isinstance(optimizer,
                                                    torch.optim.Optimizer):
            raise TypeError("vqcheck.torch.watch: optimizer must be a "
                            "torch.optim.Optimizer, got "
                            f"{type(optimizer).__name__}")
        if isinstance(interval, bool) or not isinstance(interval, int) or \
                interval < 1:
            raise ValueError(f"vqcheck.torch.watch: interval={interval!r} "
                             "must be an int >= 1")
        if not isinstance(out, (str, os.PathLike)) or str(out) == "":
            raise ValueError("vqcheck.torch.watch: out= must name a directory")
        if isinstance(exclude, str) or not all(isinstance(p, str)
                                               for p in exclude):
            raise TypeError("vqcheck.torch.watch: exclude= must be a list of "
                            "name patterns, e.g. ['*.running_mean']")
        self.exclude = list(exclude)
        self._valued: Set[str] = set()  # set by each _tensors() walk
        self.optimizer = optimizer
        self._setup(os.fspath(out), interval)
        self._wrappers = wrappers
        if optimizer is not None:
            self._hook_optimizer(optimizer)

    def _setup(self, out: str, interval: int) -> None:
        """The state every watch starts with (vqcheck._bridge's watch, which
        finds its modules and optimizers itself, starts here too)."""
        self.out = out
        self.interval = interval
        self.steps = 0            # optimizer steps (or .step() calls) so far
        self.rank: Optional[int] = None
        self.world_size: Optional[int] = None
        self._writer: Optional[TraceWriter] = None
        self._last_tried = -1     # the last step digested (or that failed)
        self._layouts: Dict[str, Tuple[str, Tuple[int, ...], int]] = {}
        self._closed = False
        self._original_step = None
        # the watched modules that hold buffers (any, excluded ones too),
        # as found by the last _tensors(): vqcheck._bridge joins its
        # pending digest before their forward, which may write them
        self._buffer_roots: List[torch.nn.Module] = []
        # tensors left out of the digests: name -> why (_not_digested)
        self._skipped: Dict[str, str] = {}
        # id(watched module) -> the DistributedDataParallel wrapper it was
        # reached through (its process group is the replica group)
        self._wrappers: Dict[int, torch.nn.Module] = {}

    # ---- public

    @property
    def path(self) -> Optional[str]:
        """This rank's trace file (None before the first step)."""
        return self._writer.path if self._writer else None

    @property
    def closed(self) -> bool:
        return self._closed

    def step(self) -> None:
        """Ends a training step: digests the state if the step is checked.
        Called by optimizer.step() when watch() was given the optimizer."""
        if self._closed:
            raise RuntimeError("vqcheck.torch.watch: step() on a closed watch")
        step = self.steps
        self.steps += 1
        if step % self.interval == 0:
            self._write(step)

    def close(self) -> None:
        """Digests the last step if the interval skipped it, closes the trace
        and unhooks the optimizer. A second close does nothing."""
        if self._closed:
            return
        try:
            last = self.steps - 1
            if last > self._last_tried:
                self._write(last)
        finally:
            self._closed = True
            self._unhook_optimizer()
            if self._writer is not None:
                self._writer.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None:
            # The block failed, perhaps mid-step: its state is not a step's
            # end, so it is not digested as "the last step".
            self._last_tried = max(self._last_tried, self.steps - 1)
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (f"<vqcheck.torch.Watch {state}: {self.steps} steps, "
                f"out={self.out!r}, interval={self.interval}>")

    # ---- the optimizer hook

    def _hook_optimizer(self, optimizer: Any) -> None:
        watch_ref = self

        def after_step() -> None:
            if not watch_ref._closed:
                watch_ref.step()
        self._original_step = optimizer.step
        self._hooked_step = _call_after_step(optimizer, after_step)

    def _unhook_optimizer(self) -> None:
        """Puts the original step back when ours is still the one installed
        (a scheduler created after watch() rebinds it; then the hook stays
        but does nothing once closed)."""
        opt = self.optimizer
        if opt is None or self._original_step is None:
            return
        if opt.__dict__.get("step") is self._hooked_step:
            if getattr(self._original_step, "__self__", None) is opt and \
                    getattr(self._original_step, "__func__", None) is \
                    getattr(type(opt), "step", None):
                del opt.step          # the class's method again
            else:
                opt.step = self._original_step
        self._original_step = None

    # ---- digests

    def _start(self) -> None:
        """Opens this rank's trace at the first checked step (the rank is
        known by then)."""
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        else:
            self.rank, self.world_size = 0, 1
        if self.rank == 0:
            for path in remove_stale_traces(self.out, self.world_size):
                print(f"vqcheck: removed {path}, a trace of a rank this "
                      f"{self.world_size}-rank run does not have",
                      file=sys.stderr)
        program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] \
            else "python"
        self._writer = TraceWriter(self.out, self.rank, program)

    def _write(self, step: int) -> None:
        self._last_tried = step  # a step that raised is not retried at close
        if self._writer is None:
            self._start()
        # A digest error here is not the tensor's (_collect left out those
        # it cannot read): it is raised, and turns the check off.
        entries = [(name, dtype, shape, digest(tensor, name=name), group,
                    shard, values)
                   for name, dtype, shape, tensor, group, shard, values
                   in self._collect(step)]
        assert self._writer is not None
        self._writer.write_step(step, entries)

    def _collect(self, step: int) -> List[Collected]:
        """(name, dtype name, shape, tensor, group, shard) of every watched
        tensor at this step, in trace order, their layouts checked: what a
        step's lines say but the digests (vqcheck._bridge hashes them
        elsewhere). A DTensor is its local shard; group and shard are its
        replica group and piece (vqcheck._layout). A tensor that is not
        one dense array is its dense parts (vqcheck._dense: a quantized
        tensor's integer values and parameters, "NAME:int_repr", ...); one
        the digest cannot read is left out and named once (_not_digested):
        one tensor never switches the check off."""
        out = []
        for whole, tensor, layout in self._tensors():
            if _layout.is_dtensor(tensor):
                tensor, layout = _layout.dtensor_local(tensor)
            parts = _dense.dense_parts(whole, tensor)
            if isinstance(parts, _dense.Left):
                self._not_digested(whole, parts.why, parts.unchecked)
                if self._writer is not None:  # a line in the step's trace
                    self._writer.left_out(step, whole, parts.why,
                                          parts.unchecked)
                continue
            for name, part in parts:
                dtype = _DTYPE_NAMES.get(part.dtype)
                if dtype is None:
                    dtype = _DTYPE_NAMES[part.dtype] = _dtype_name(part.dtype)
                shape = tuple(part.shape)
                self._check_layout(f"{name} (shard {layout.shard})"
                                   if layout.shard else name, dtype, shape,
                                   step)
                values = _told_values(part) if name in self._valued else None
                out.append((name, dtype, shape, part, layout.group,
                            layout.shard, values))
        return out

    def _not_digested(self, name: str, why: str, unchecked: bool) -> None:
        """Tensor `name` is left out of the digests (why; unchecked: it
        holds contents nothing compared, vqcheck._dense); said once per
        name, on stderr (vqcheck._bridge also records it for the report
        and the verdict)."""
        if name in self._skipped:
            return
        self._skipped[name] = why
        tail = "its contents are NOT checked" if unchecked else \
            "it holds nothing to compare"
        print(f"vqcheck: tensor '{name}' is not digested ({why}): {tail}; "
              "the other tensors are checked", file=sys.stderr)

    def _check_layout(self, name: str, dtype: str, shape: Tuple[int, ...],
                      step: int) -> None:
        """A watched tensor keeps its dtype and shape: digests of different
        layouts cannot be compared, and a changed shape is usually a bug
        (dead-code replacement resizing a codebook)."""
        seen = self._layouts.get(name)
        if seen is None:
            self._layouts[name] = (dtype, shape, step)
            return
        if seen[0] != dtype or seen[1] != shape:
            raise ValueError(
                f"vqcheck.torch.watch: tensor '{name}' was {seen[0]} "
                f"{list(seen[1])} at step {seen[2]} and is {dtype} "
                f"{list(shape)} at step {step}; a watched tensor must keep "
                "its dtype and shape")

    def _tensors(self) -> List[Tuple[str, torch.Tensor, _layout.Layout]]:
        """(name, tensor, layout) of every watched tensor, in the same order
        on every rank: each module's parameters, then its buffers, then
        the optimizers' state and hyper-parameters. Read afresh at every
        step, so tensors a program replaces (module.weight = ...) are the
        current ones. layout: the tensor's replica group (vqcheck._layout;
        a DTensor's is found from the DTensor itself)."""
        out: List[Tuple[str, torch.Tensor, _layout.Layout]] = []
        seen = set()
        valued: Set[str] = set()  # lines whose values the trace tells
        param_names: Dict[int, str] = {}
        param_layouts: Dict[int, _layout.Layout] = {}
        WORLD = _layout.WORLD

        def excluded(name: str) -> bool:
            return any(fnmatch.fnmatchcase(name, p) for p in self.exclude)

        def add(name: str, t: Any, layout: _layout.Layout) -> None:
            if t is None or id(t) in seen:
                return
            if excluded(name):
                return
            seen.add(id(t))
            out.append((name, t, layout))

        buffer_roots = []
        for prefix, module in self._roots():
            wrapper, stage = self._context(module)
            params, buffers = _layout.module_layouts(module, wrapper, stage)
            for n, p in module.named_parameters():
                param_names.setdefault(id(p), prefix + n)
                layout = params.get(id(p), WORLD)
                param_layouts.setdefault(id(p), layout)
                add(prefix + n, p, layout)
            holds_buffers = False
            for n, b in module.named_buffers():
                holds_buffers = True
                add(prefix + n, b, buffers.get(id(b), WORLD))
            if holds_buffers:
                buffer_roots.append(module)
            # Whether each module of it trains (module.training, in
            # named_modules order): a rank left in eval mode after its
            # evaluation (dropout off, BatchNorm on running statistics)
            # computes other gradients, which DDP averages into the same
            # update, so no weight shows it
            flags = [m.training for _, m in module.named_modules()]
            add(prefix + "modules.training",
                torch.tensor(flags, dtype=torch.bool),
                _layout.root_layout(module, wrapper, stage))
        self._buffer_roots = buffer_roots
        optimizers = self._optimizers()
        # an optimizer another one drives (ZeroRedundancyOptimizer's
        # local .optim) holds this rank's partition only: no replica
        inner = {id(getattr(o, "optim", None)) for o in optimizers}
        hyper_at = 0  # where the next hyper-parameter line goes
        for k, opt in enumerate(optimizers):
            label = "optimizer" if k == 0 else f"optimizer{k}"
            partition = id(opt) in inner
            for g, group in enumerate(opt.param_groups):
                for i, p in enumerate(group["params"]):
                    pname = param_names.get(id(p))
                    if pname is None:  # a parameter of no watched module
                        pname = f"{label}.param_groups.{g}.params.{i}"
                        add(pname, p, WORLD)
                    layout = param_layouts.get(id(p), WORLD)
                    if partition:
                        layout = _layout.no_replica("zero")
                    for key, value in opt.state.get(p, {}).items():
                        if torch.is_tensor(value):
                            # shaped as (and held as) the parameter's piece
                            add(f"{pname}.{key}", value, layout)
            if not partition:
                # what every rank must agree on whatever the layout (a
                # rank with another learning rate in a pure FSDP job),
                # one line per hyper-parameter, first in the step: a
                # weight that differs because the lr does is then told
                # as the lr's consequence (also_differing), not the cause
                hyper = [(f"{label}.{key}",
                          torch.tensor(values, dtype=torch.float64), WORLD)
                         for key, values in _layout.hyper_parameters(opt)
                         if not excluded(f"{label}.{key}")]
                out[hyper_at:hyper_at] = hyper
                hyper_at += len(hyper)
                valued.update(name for name, _, _ in hyper)
        # each GradScaler's scale and growth tracker (before the step's
        # update()): a rank that skipped another step for an inf, or
        # started from another scale, first in the step like the
        # hyper-parameters. Copied (one element each): update() writes
        # them in place right after the step end, while an overlapped
        # digest of the step may still be reading
        scaled = []
        for k, scaler in enumerate(self._grad_scalers()):
            label = "grad_scaler" if k == 0 else f"grad_scaler{k}"
            for key, attr in (("scale", "_scale"),
                              ("growth_tracker", "_growth_tracker")):
                t = getattr(scaler, attr, None)
                if torch.is_tensor(t) and not excluded(f"{label}.{key}"):
                    scaled.append((f"{label}.{key}", t.detach().clone(),
                                   WORLD))
        out[hyper_at:hyper_at] = scaled
        valued.update(name for name, _, _ in scaled)
        self._valued = valued
        return out

    def _context(self, module: torch.nn.Module
                 ) -> Tuple[Optional[torch.nn.Module], Optional[int]]:
        """(the DistributedDataParallel wrapper looked through to reach
        root module `module`, or None; its pipeline stage index, or
        None)."""
        return self._wrappers.get(id(module)), None

    def _roots(self) -> List[Tuple[str, torch.nn.Module]]:
        """(name prefix, module) of every watched module, in order."""
        return list(zip(self._prefixes, self._modules))

    def _grad_scalers(self) -> List[Any]:
        """The GradScalers whose scale is watched (the bridge's: every one
        the job made; none for an explicit watch())."""
        return []

    def _optimizers(self) -> List[Any]:
        """The optimizers whose state is watched, in order."""
        return [self.optimizer] if self.optimizer is not None else []


# ---- the optimizer hook (shared with vqcheck._bridge)


def _call_after_step(optimizer: Any, after: Any,
                     before: Optional[Any] = None,
                     failed: Optional[Any] = None) -> Any:
    """Replaces optimizer.step (an instance attribute over the class's
    method; torch 1.13 has no step post-hook) with a bound method that calls
    before() (if given), the current step and then after(), or failed() (if
    given) when the step raised. It is a bound method, as LR schedulers
    expect (they rebind optimizer.step.__func__), and it keeps a scheduler's
    marks (`_with_counter` in torch 1.x, `_wrapped_by_lr_sched` in 2.x).
    Returns the installed method."""
    original = optimizer.step

    def step_then(opt: Any, *args: Any, **kwargs: Any) -> Any:
        if before is not None:
            before()
        try:
            result = original(*args, **kwargs)
        except BaseException:
            if failed is not None:
                failed()
            raise
        after()
        return result

    for mark in ("_with_counter", "_wrapped_by_lr_sched"):
        if getattr(original, mark, False):
            setattr(step_then, mark, True)
    step_then.__doc__ = getattr(original, "__doc__", None)
    optimizer.step = types.MethodType(step_then, optimizer)
    return optimizer.step


# ---- argument checks


def _check_modules(modules: Any) -> Tuple[List[torch.nn.Module],
                                          Dict[int, torch.nn.Module]]:
    """The modules to watch, wrappers looked through (_unwrap), and
    {id(inner module): the DistributedDataParallel around it}."""
    if isinstance(modules, torch.nn.Module):
        modules = [modules]
    elif isinstance(modules, (list, tuple)):
        modules = list(modules)
    else:
        raise TypeError("vqcheck.torch.watch: modules must be a "
                        "torch.nn.Module or a list of them, got "
                        f"{type(modules).__name__}")
    if not modules:
        raise ValueError("vqcheck.torch.watch: no modules to watch")
    inner = []
    wrappers: Dict[int, torch.nn.Module] = {}
    for i, m in enumerate(modules):
        if not isinstance(m, torch.nn.Module):
            raise TypeError(f"vqcheck.torch.watch: modules[{i}] is a "
                            f"{type(m).__name__}, not a torch.nn.Module")
        m, ddp = _unwrap(m)
        if ddp is not None:
            wrappers[id(m)] = ddp
        inner.append(m)
    return inner, wrappers


def _check_names(names: Any, count: int) -> List[str]:
    if names is None:
        return [""] if count == 1 else [f"{i}." for i in range(count)]
    if isinstance(names, str):
        names = [names]
    names = list(names)
    if len(names) != count or not all(isinstance(n, str) for n in names):
        raise ValueError(f"vqcheck.torch.watch: names= must give one string "
                         f"prefix per module ({count}), got {names!r}")
    return [n if n == "" or n.endswith(".") else n + "." for n in names]
