"""Collectives: the wrappers of torch.distributed's collectives, their
ledger lines, and the watchdog that reports a hang.

Every collective, under both names libraries use (torch.distributed.X,
torch.distributed.distributed_c10d.X), and the out-of-place ones of
torch.distributed.nn (and .functional) and
torch.distributed._functional_collectives, is wrapped (_patching.patch)
and numbered with its call site:
- collectives are written to the rank's ledger lines in
  rank-<r>.live.jsonl (entered before the call, done or failed after it),
  which the C analysis compares across ranks (deadlock,
  collective_mismatch): those of the default group numbered in one
  sequence, those of a sub-group (a DeviceMesh dimension, DDP's
  process_group, a pipeline stage's replicas) in that group's own, with
  the group's world ranks and name, compared among its members only;
  point-to-point calls are followed for hangs only. A collective torch issues itself (a pipeline schedule's,
  FSDP's, DTensor's) is identified by the torch function issuing it
  (_library_caller), not by the user's line that led there;
- one in flight longer than VQC_WATCH_TIMEOUT makes the rank dump its
  stacks and a hang marker (watch_for_hangs);
- around the call, the wrapper asks the other parts what they need: the
  lost-result checks (_lost.Lost) and the digest in flight (_overlap, which
  is joined first when the call may touch memory it hashes).

Handed: Records (the rank's files), the current step (a function), Lost
and the _Overlap; none of them calls back into this part.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .._heartbeat import IN_COLLECTIVE, RUNNING, SETUP
from ._lost import Lost
from ._overlap import _Overlap
from ._patching import lookup, own_attribute, patch
from ._records import Records
from ._sites import _PACKAGE_DIR, outside

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
# names; those a torch version lacks are skipped). A name re-exported by two
# modules gets one wrapper (_patching.patch).
_OUT_OF_PLACE = ("all_reduce", "all_gather", "all_gather_tensor",
                 "all_reduce_coalesced", "all_gather_into_tensor_coalesced",
                 "broadcast", "reduce", "reduce_scatter",
                 "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced",
                 "all_to_all", "all_to_all_single", "gather", "scatter")


class Collectives:
    """The collectives of one process: in flight, in the ledger, watched
    for hangs. timeout: VQC_WATCH_TIMEOUT, seconds."""

    def __init__(self, records: Records, steps: Callable[[], int],
                 lost: Lost, overlap: _Overlap, timeout: float) -> None:
        self.records = records
        self.steps = steps
        self.lost = lost
        self.overlap = overlap
        self.timeout = timeout
        # A sequence number per call; those in flight (seq -> (op, site
        # text, monotonic start, step)), the last one completed.
        self.seq = 0
        self.in_flight: Dict[int, Tuple[str, str, float, int]] = {}
        # The ledger: a sequence per process group, so that sequence
        # numbers line up across its ranks (see _ledger_fields); "" the
        # default group's.
        self.ledger_seqs: Dict[Any, int] = {}
        self.middles: Dict[Any, str] = {}    # see ledger_middle
        self.nesting = threading.local()  # collectives inside collectives
        self.last_completed: Optional[Dict[str, Any]] = None
        self.watchdog: Optional[threading.Thread] = None
        self.hang_reported = False
        self.baseline_refs = 0                # see _probe_refcount

    # -- hooks into torch

    def patch(self, torch: Any) -> None:
        """Wraps torch.distributed's collectives (both names of each) and
        destroy_process_group."""
        import torch.distributed as dist
        if not dist.is_available():
            return
        c10d = dist.distributed_c10d
        self.baseline_refs = _probe_refcount(torch)
        self.lost.probe(torch)
        for name in _COLLECTIVES:
            kind = "inplace" if name in _INPLACE else "other"
            self._patch_both(dist, c10d, name,
                             lambda original, name=name, kind=kind:
                             self.wrapper(name, original, kind))
        overlap = self.overlap
        self._patch_both(dist, c10d, "destroy_process_group",
                         lambda original: _settle_then(original, overlap))
        self._patch_both(dist, c10d, "init_process_group",
                         self.rendezvous_wrapper)

    def rendezvous_wrapper(self, original: Any) -> Any:
        """init_process_group: the rank's first signs of progress, so that
        a hang before its first step or collective (a rank stuck in its
        data loader while another waits in DDP's gradient all_reduce, a
        rank that never arrives at the rendezvous) is one: the heartbeat
        says "in the rendezvous" while it waits (only where the rank is
        known before the group is: RANK in the environment, as torchrun
        and `vqcheck watch --nproc` set it, and no other rank passed), and
        "set up" once it is made, until its first collective or step end
        (watch_heartbeat.h: a busy rank is not hung then)."""
        records, steps = self.records, self.steps

        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            given = kwargs.get("rank", args[4] if len(args) > 4 else -1)
            env = os.environ.get("RANK")
            if "hang" not in records.disabled and env is not None and \
                    (given in (-1, None) or str(given) == env):
                try:
                    with records.lock:
                        records.open_live()
                        records.beat(IN_COLLECTIVE, self.seq, steps(),
                                     "rendezvous")
                except Exception as e:
                    records.fail("hang", e)
            result = original(*args, **kwargs)
            if "hang" not in records.disabled:
                try:
                    with records.lock:
                        records.open_live()
                        records.beat(SETUP, self.seq, steps(), "")
                except Exception as e:
                    records.fail("hang", e)
            return result
        return init_process_group

    @staticmethod
    def _patch_both(dist: Any, c10d: Any, name: str, make: Any) -> None:
        """c10d's `name`, and torch.distributed's where it is the same
        function: one wrapper under both names."""
        original = lookup(c10d, name)
        if patch(c10d, name, make) is not None and \
                lookup(dist, name) is original:
            patch(dist, name, make)

    def patch_out_of_place(self, module: Any) -> None:
        """torch.distributed.nn (its names, and .functional's, which it
        re-exports) or torch.distributed._functional_collectives: the
        collectives that return their result."""
        targets = [module]
        functional = own_attribute(module, "functional")
        if functional is not None and \
                own_attribute(functional, "all_reduce") is not None:
            targets.append(functional)
        for target in targets:
            for name in _OUT_OF_PLACE:
                patch(target, name, lambda original, name=name:
                      self.wrapper(name, original, "out_of_place"))

    def wrapper(self, op: str, original: Any, kind: str) -> Any:
        """The wrapper of collective `op` (patch gives it the original's
        name, signature and docstring); kind is "inplace" (the result is
        written into the first argument), "out_of_place" (it is returned)
        or "other"."""
        import inspect
        try:
            params = _parameters(inspect.signature(original))
        except (TypeError, ValueError):
            params = None
        inplace = kind == "inplace"
        module = str(getattr(original, "__module__", ""))
        records, lost, overlap = self.records, self.lost, self.overlap
        disabled, fail = records.disabled, records.fail
        nesting = self.nesting
        baseline_refs = self.baseline_refs

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if getattr(nesting, "depth", 0):
                # Called by another collective (all_gather_object calls
                # all_gather; torch.distributed.nn's all_reduce calls
                # dist.all_reduce): the outer call stands for it.
                return original(*args, **kwargs)
            caller = sys._getframe(1)
            if lost.dropped:
                lost.sweep()
            tensor = args[0] if args else kwargs.get("tensor")
            if inplace and tensor is not None and \
                    "lost_inplace" not in disabled:
                try:
                    # args and the local name hold it, beside the caller's
                    # refs (_probe_refcount measures this very shape)
                    if sys.getrefcount(tensor) <= baseline_refs:
                        lost.check_temporary(op, tensor, caller)
                except Exception as e:
                    fail("lost_inplace", e)
            seq, record = 0, None
            if "hang" not in disabled:
                fields = None
                try:
                    if "ledger" not in disabled and params is not None \
                            and op in _LEDGER_ARGS:
                        fields = _ledger_fields(op, _arguments(params, args,
                                                               kwargs))
                except Exception as e:
                    fail("ledger", e)
                try:
                    seq, record = self.enter(op, caller, fields)
                except Exception as e:
                    fail("hang", e)
            if overlap.pending is not None:
                # a digest in flight: joined first if the call may write
                # (or read) memory it hashes
                overlap.before_collective(args, kwargs)
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
                        self.leave(seq, record, error)
                    except Exception as e:
                        fail("hang", e)
            if op == "all_gather" and kind != "out_of_place" and \
                    "gradient" not in disabled:
                try:
                    lost.note_gather(args, kwargs, caller)
                except Exception as e:
                    fail("gradient", e)
            if "lost_inplace" not in disabled:
                try:
                    if kind == "out_of_place":
                        lost.check_result(op, result, caller, module)
                    elif inplace and result is not None and \
                            tensor is not None and \
                            _is_async(params, args, kwargs):
                        lost.watch_work(op, tensor, result, caller,
                                        _group_key(params, args, kwargs))
                    elif (lost.pending_works or lost.dropped) and \
                            error is None and \
                            not _is_async(params, args, kwargs):
                        # a blocking call orders its group's earlier work
                        lost.ordered(_group_key(params, args, kwargs))
                except Exception as e:
                    fail("lost_inplace", e)
            return result
        return wrapper

    # -- collectives in flight, and the watchdog that reports a hang

    def enter(self, op: str, frame: Any,
              fields: Optional[Dict[str, Any]]) -> Tuple[int, Any]:
        """Collective `op` called from frame: in flight for the watchdog
        and, with ledger fields, an "entered" line in rank-<r>.live.jsonl
        (written before the call, so a process killed in it keeps the
        line). Returns (seq, the ledger line or None) for leave()."""
        site = outside(frame)
        text = (f"{site.f_code.co_filename}:{site.f_lineno} "
                f"{site.f_code.co_name}") if site is not None else "?"
        records = self.records
        with records.lock:
            records.open_live()
            self.seq += 1
            step = self.steps()
            self.in_flight[self.seq] = (op, text, time.monotonic(), step)
            records.beat(IN_COLLECTIVE, self.seq, step, op)
            if self.watchdog is None:
                self.watchdog = threading.Thread(
                    target=self.watch_for_hangs, name="vqcheck-watchdog",
                    daemon=True)
                self.watchdog.start()
            record = None
            if fields is not None and "ledger" not in records.disabled:
                group = fields.get("group")
                seq = self.ledger_seqs.get(group, 0) + 1
                self.ledger_seqs[group] = seq
                library = _library_caller(frame)
                middle = self.ledger_middle(op, fields, library or site,
                                            library is not None)
                record = (seq, middle, time.monotonic_ns())
                records.ledger_line(record, 0, "entered", "")
            return self.seq, record

    def ledger_middle(self, op: str, fields: Dict[str, Any],
                      site: Any, library: bool = False) -> Tuple[Any, ...]:
        """The fields of a ledger line between "rank" and "t_enter_ns", as
        vqcheck._core.ledger_line takes them: (op, redop, dtype, count,
        root, group_size, group, group_name, file, line, func), the same for
        every call of one collective at one site, so it is made once (a
        training loop repeats a few thousand such lines). library: site is
        torch's own function issuing the call, named by its first line
        (torch too writes `if src: scatter(...) else: scatter(...)`), and
        the line gets a twelfth field, any_site: such a call is paired
        across ranks by what it moves, its site told but not compared
        (ledger_analysis.h): torch pairs different functions of its own by
        design (Join: a joined rank's _get_num_nonjoined_procs with the
        others' notify_join_context)."""
        file = site.f_code.co_filename if site is not None else "?"
        line = site.f_lineno if site is not None else 0
        if library and site is not None:
            line = site.f_code.co_firstlineno
        func = site.f_code.co_name if site is not None else "?"
        group = fields.get("group")
        key = (op, fields["redop"], fields["dtype"], fields["count"],
               fields["root"], file, line, func, group, library)
        middle = self.middles.get(key)
        if middle is None:
            if len(self.middles) > 4096:
                self.middles.clear()
            if group is not None:  # (name, world ranks)
                group_size, ranks, name = (len(group[1]), tuple(group[1]),
                                           group[0])
            else:
                group_size, ranks, name = (self.records.world_size(), None,
                                           "")
            middle = (op, fields["redop"], fields["dtype"], fields["count"],
                      fields["root"], group_size, ranks, name, file, line,
                      func, library)
            self.middles[key] = middle
        return middle

    def leave(self, seq: int, record: Any,
              error: Optional[BaseException]) -> None:
        """The call returned (or raised error): its "done" or "failed"
        line, which replaces the "entered" one."""
        records = self.records
        with records.lock:
            entry = self.in_flight.pop(seq, None)
            if entry is not None and error is not None:
                try:  # for the rank_failure, if nothing catches it
                    error.__vqcheck_collective__ = (entry[0], entry[1])
                except Exception:
                    pass  # an exception type without a __dict__
            if entry is not None:
                self.last_completed = {"op": entry[0], "seq": seq,
                                       "site": entry[1]}
                records.beat(RUNNING, seq, entry[3], "")
            if record is not None:
                if error is None:
                    records.ledger_line(record, time.monotonic_ns(), "done",
                                        "VQC_OK")
                else:
                    records.ledger_line(
                        record, time.monotonic_ns(), "failed",
                        type(error).__name__[:23])

    def watch_for_hangs(self) -> None:
        """Every 0.2 s: a collective in flight longer than the timeout
        makes this rank dump its stacks, then write rank-<r>.hang, once.
        `vqcheck watch` then asks the other ranks for their stacks and
        stops the job."""
        records = self.records
        while not self.hang_reported:
            time.sleep(0.2)
            with records.lock:
                if not self.in_flight:
                    continue
                seq = min(self.in_flight)
                op, site, start, step = self.in_flight[seq]
                waited = time.monotonic() - start
                if waited <= self.timeout:
                    continue
                self.hang_reported = True
                marker = {"rank": records.rank, "op": op, "seq": seq,
                          "site": site, "step": step,
                          "waited_s": round(waited, 3),
                          "last_completed": self.last_completed}
            # The main thread waits in a collective that writes no state
            # (one that does would have joined): a digest done by now is
            # committed before the job is stopped.
            self.overlap.poke("hang")
            try:
                records.write_hang(marker)
            except Exception as e:
                records.fail("hang", e)


def _settle_then(original: Any, overlap: _Overlap) -> Any:
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
    return destroy_process_group


def _probe_refcount(torch: Any) -> int:
    """The reference count a temporary argument has inside a wrapper made by
    Collectives.wrapper (the CPython version decides it): the same code
    shape, called with a fresh tensor."""
    def probe(*args: Any, **kwargs: Any) -> int:
        tensor = args[0] if args else kwargs.get("tensor")
        return sys.getrefcount(tensor)
    return probe(torch.empty(1))


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
    # torch.distributed._functional_collectives (its input is `self`, or
    # `inputs`; the others' names are c10d's above)
    "all_gather_tensor": ("self", False, None),
    "all_gather_into_tensor_coalesced": ("self", False, None),
    "reduce_scatter_tensor_coalesced": ("inputs", True, None),
}
_REDOPS = ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG")
_REDOP_NAMES = frozenset(r.lower() for r in _REDOPS)


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
    """The ledger fields of a call (redop, dtype, count, root, and for a
    sub-group "group": (its name, its world ranks)) from its arguments by
    name, or None when it is not compared across ranks: point-to-point
    (send, recv), a call on a group this rank is not in (torch returns at
    once), a group torch does not describe. Those are still followed for
    hangs."""
    spec = _LEDGER_ARGS.get(op)
    if spec is None or given is None:
        return None
    group = given.get("group")
    described = None
    if group is not None:
        dist = sys.modules["torch.distributed"]
        if not isinstance(group, dist.ProcessGroup):
            # a functional collective's: a DeviceMesh, (mesh, dim), a name
            group = _functional_group(dist, group, given.get("tag", ""))
            if group is None:
                return None
        if group is not dist.GroupMember.WORLD:
            described = _subgroup(dist, group)
            if described is None:
                return None
    counted, reduces, root = spec
    dtype, count = "", 0
    value = given.get(counted) if counted else None
    if value is None and counted and "self" in given:
        value = given["self"]  # a functional collective's input
    if isinstance(value, (list, tuple)):  # all_reduce_coalesced
        count = sum(int(t.numel()) for t in value)
        value = value[0] if value else None
    elif value is not None:
        count = int(value.numel())
    if value is not None:
        dtype = _dtype_name(value.dtype)
    redop = given.get("op", given.get("reduceOp"))  # c10d's, functional's
    fields = {"redop": _redop_name(redop) if reduces else "",
              "dtype": dtype, "count": count,
              "root": _root_of(given.get(root)) if root else -1}
    if described is not None:
        fields["group"] = described
    return fields


def _functional_group(dist: Any, group: Any, tag: Any) -> Any:
    """The ProcessGroup a functional collective's `group` names (a
    DeviceMesh, (mesh, dim), a group name, a list of ranks), or None when
    this torch cannot say."""
    funcol = sys.modules.get("torch.distributed._functional_collectives")
    resolve = getattr(dist.distributed_c10d, "_resolve_process_group", None)
    if funcol is None or resolve is None or isinstance(group, list):
        return None  # a list of ranks may make a group: left to torch
    try:
        return resolve(funcol._resolve_group_name(group, tag or ""))
    except Exception:  # private API: any failure means "cannot say"
        return None


# Process groups described (id -> (the group, its description or None)):
# the group is kept so that its id is never reused.
_subgroups: Dict[int, Tuple[Any, Optional[Tuple[str, Tuple[int, ...]]]]] = {}


def _subgroup(dist: Any, group: Any
              ) -> Optional[Tuple[str, Tuple[int, ...]]]:
    """(name, world ranks in group-rank order) of process group `group`, or
    None when it is not a ProcessGroup torch knows, or this rank is not in
    it."""
    known = _subgroups.get(id(group))
    if known is not None and known[0] is group:
        return known[1]
    described = None
    c10d = dist.distributed_c10d
    try:
        ranks_of = getattr(c10d, "get_process_group_ranks", None)
        if ranks_of is not None:
            ranks = tuple(int(r) for r in ranks_of(group))
        else:  # torch 1.13: {world rank: group rank}
            mapping = c10d._pg_group_ranks[group]
            ranks = tuple(sorted(mapping, key=mapping.get))
        name = getattr(group, "group_name", None)
        if not isinstance(name, str):
            name = c10d._pg_names.get(group, "")
        if dist.get_rank() in ranks:
            described = (str(name)[:63], ranks)
    except (KeyError, RuntimeError, ValueError, TypeError, AttributeError):
        described = None
    if len(_subgroups) > 4096:
        _subgroups.clear()
    _subgroups[id(group)] = (group, described)
    return described


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
    if isinstance(op, str):  # a functional collective's "sum", "avg"
        lower = op.lower()
        return lower if lower in _REDOP_NAMES else "premul_sum"
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
