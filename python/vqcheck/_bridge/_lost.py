"""Lost results: what a collective computed that the program never gets.

Decided at the call, from what holds the tensor and what the caller's next
instruction is (a backend may hold a tensor for a moment after the call,
in a gloo worker thread, so nothing is inferred from when objects die):

- temporary: an in-place collective's tensor that only the call references
  (the wrapper checks the Python reference count, _collectives.py), that
  C++ does not hold either (a parameter's .grad, a tensor saved for
  backward), that is no view and shares its storage with no other tensor
  (_use_counter);
- discarded: an out-of-place collective's result that the caller pops
  unread (its next instruction is POP_TOP: an expression statement);
- not waited: an async_op=True call's Work garbage-collected unwaited, when
  the function that issued it returns before a blocking call of the same
  process group ordered it (docs/pytorch.md, "Ordering");
- a gradient through all_gather: a gathered tensor that requires grad,
  whose list entry for this rank is not the local tensor (or another
  tensor with a grad_fn) at the next step end (OpenCLIP's bug).

Each is a finding written through Records (the only part this one is
handed, with the current step and the program's modules as functions).
"""
from __future__ import annotations

import linecache
import os
import sys
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._patching import patch
from ._records import Records
from ._sites import argument_text, outside


class _PendingWork:
    """An async collective's Work not yet waited on (or dropped unwaited
    while the function that issued it still runs)."""
    __slots__ = ("op", "where", "described", "group", "order", "frame")

    def __init__(self, op: str, where: Tuple[str, int, str],
                 described: Dict[str, Any], group: int, order: int,
                 frame: Tuple[int, Any]) -> None:
        self.op, self.where, self.described = op, where, described
        self.group, self.order, self.frame = group, order, frame


class Lost:
    """The lost-result checks of one process. steps(): the current
    training step; live_modules(): the program's modules (the stand-in for
    storage use counts where torch's cannot be read)."""

    def __init__(self, records: Records, steps: Callable[[], int],
                 live_modules: Callable[[], List[Any]]) -> None:
        self.records = records
        self.steps = steps
        self.live_modules = live_modules
        self.tensor_holders: Any = None       # see _use_counter
        self.storage_holders: Any = None
        # Works of async collectives not yet waited on (id(work) ->
        # _PendingWork), and those dropped (garbage-collected) unwaited
        # while the function that issued them still runs: nothing ordered
        # the program's reads after the result yet, but a later blocking
        # call on the same process group still may before that function
        # returns.
        self.pending_works: Dict[int, _PendingWork] = {}
        self.dropped: List[_PendingWork] = []
        self.work_order = 0
        self.work_patched = False
        # all_gather calls whose input required grad: (output list, the
        # local tensor, its index in the list, site, step), checked at the
        # next step end for the local tensor put back (check_gathers).
        self.pending_gathers: List[Tuple[Any, Any, int, Any, int]] = []

    def probe(self, torch: Any) -> None:
        """Reads how this torch keeps its use counts (_use_counter)."""
        self.tensor_holders = _use_counter(torch, "tensor")
        self.storage_holders = _use_counter(torch, "storage")

    def at_step_end(self) -> None:
        """What is decided at a step end (and at exit): gathers whose
        tensor was not put back, dropped Works nothing ordered."""
        self.check_gathers()
        self.sweep()

    # -- temporary: in-place collectives

    def held_elsewhere(self, tensor: Any) -> bool:
        """Whether something besides the call can read what is written into
        tensor: C++ holds the tensor itself (a parameter's .grad, a tensor
        saved for backward) or another tensor shares its storage (p.data,
        x.detach()). Without use counts: the program's parameters, buffers
        and gradients, by address."""
        if self.tensor_holders is not None and \
                self.tensor_holders(tensor) > 1:
            return True
        if self.storage_holders is not None:
            return bool(self.storage_holders(tensor) > 1)
        ptr = tensor.data_ptr()
        for module in self.live_modules():
            for t in list(module.parameters(recurse=False)) + \
                    list(module.buffers(recurse=False)):
                if t.data_ptr() == ptr or \
                        (t.grad is not None and t.grad.data_ptr() == ptr):
                    return True
        return False

    def check_temporary(self, op: str, tensor: Any, caller: Any) -> None:
        """An in-place collective's tensor that only the call references
        (the caller checked the Python reference count): reported unless it
        is a view or something else holds it (see the rules above). Decided
        before the call runs: afterwards the backend may still hold the
        tensor for a moment (a gloo worker thread), which would blur any
        later sign."""
        torch = sys.modules["torch"]
        if not isinstance(tensor, torch.Tensor) or tensor._base is not None:
            return
        if self.held_elsewhere(tensor):
            return
        site = outside(caller)
        if site is None:
            return
        where = (site.f_code.co_filename, site.f_lineno, site.f_code.co_name)
        self.report_temporary(op, where,
                              {"dtype": str(tensor.dtype).replace("torch.",
                                                                  ""),
                               "shape": list(tensor.shape),
                               "count": int(tensor.numel())})

    def report_temporary(self, op: str, where: Tuple[str, int, str],
                         described: Dict[str, Any]) -> None:
        file, line, func = where
        source = linecache.getline(file, line).strip()
        self.records.report_once(
            (op, file, line), "lost_inplace", where,
            argument_text(source, op) or f"a temporary {op} input",
            f"{op} at {os.path.basename(file)}:{line} ({func}) writes its "
            "result into a temporary tensor that nothing else references"
            f"{': `' + source + '`' if source else ''}; the result is thrown "
            "away when the call returns and every rank keeps its own values. "
            f"Keep the tensor and use it: `t = x.contiguous(); {op}(t)`, "
            "then read t",
            dict(described, op=op, out_of_place=False, result="temporary",
                 reason="reduced a temporary tensor; the result never "
                        "reached the program",
                 source=source,
                 rule="at the call, nothing but the call referenced the "
                      "tensor (Python or C++), it was not a view and shared "
                      "its storage with no other tensor (vqcheck._bridge)"),
            self.steps())

    # -- discarded: out-of-place collectives

    def check_result(self, op: str, result: Any, caller: Any,
                     module: str) -> None:
        """An out-of-place collective's result that the caller pops unread
        (an expression statement) is reported. A tuple result (all_gather)
        is described by its first tensor."""
        torch = sys.modules["torch"]
        first = result
        if isinstance(result, (tuple, list)):
            first = result[0] if result else None
        if not isinstance(first, torch.Tensor) or \
                not _result_dropped(caller):
            return
        site = outside(caller)
        if site is None:
            return
        file, line, func = (site.f_code.co_filename, site.f_lineno,
                            site.f_code.co_name)
        source = linecache.getline(file, line).strip()
        self.records.report_once(
            ("discarded", op, file, line), "lost_inplace", (file, line, func),
            argument_text(source, op) or f"the {op} input",
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
             "rule": f"the value returned by the out-of-place {op} "
                     f"({module}) is popped by the instruction after the "
                     "call: an expression statement (vqcheck._bridge)"},
            self.steps())

    # -- not waited: async Works, and what orders them

    def watch_work(self, op: str, tensor: Any, work: Any, frame: Any,
                   group: int) -> None:
        """Follows the Work of an async in-place call on process group
        `group` (a key: 0 for the default group) issued from frame."""
        if not self.work_patched:
            self.patch_work_class(type(work))
            self.work_patched = True
        site = outside(frame)
        if site is None:
            return
        where = (site.f_code.co_filename, site.f_lineno, site.f_code.co_name)
        described = {"dtype": str(tensor.dtype).replace("torch.", ""),
                     "shape": list(tensor.shape),
                     "count": int(tensor.numel())}
        key = id(work)
        self.work_order += 1
        self.pending_works[key] = _PendingWork(
            op, where, described, group, self.work_order,
            (id(site), site.f_code))
        pending, dropped = self.pending_works, self.dropped

        def collected() -> None:
            entry = pending.pop(key, None)
            if entry is None:
                return  # waited on, or ordered by a later blocking call
            if _executing(entry.frame):
                dropped.append(entry)  # its function may still order it
            else:
                self.report_unwaited(entry)
        weakref.finalize(work, collected)

    def ordered(self, group: int, before: Optional[int] = None) -> None:
        """A blocking call on process group `group` returned (or a Work of
        it was waited on, `before` its order): the backend runs a group's
        work in order, so every earlier async call on it has completed."""
        for key, entry in list(self.pending_works.items()):
            if entry.group == group and (before is None or
                                         entry.order < before):
                del self.pending_works[key]
        self.dropped[:] = [e for e in self.dropped if e.group != group or
                           (before is not None and e.order >= before)]

    def sweep(self) -> None:
        """Dropped Works whose function returned with nothing ordering them
        are findings (at the next collective, step end or exit)."""
        if not self.dropped:
            return
        done = [e for e in self.dropped if not _executing(e.frame)]
        if done:
            self.dropped[:] = [e for e in self.dropped if e not in done]
            for entry in done:
                self.report_unwaited(entry)

    def patch_work_class(self, cls: Any) -> None:
        """Work.wait() and the other ways to observe a result mark the Work
        as waited on (class-level: Work objects are torch's C++ objects),
        and order every earlier Work of its process group."""
        pending, dropped, ordered = self.pending_works, self.dropped, \
            self.ordered
        for name in ("wait", "get_future", "result", "synchronize"):
            def make(original: Any) -> Any:
                def observed(work: Any, *args: Any, **kwargs: Any) -> Any:
                    entry = pending.pop(id(work), None)
                    result = original(work, *args, **kwargs)
                    if entry is not None and (pending or dropped):
                        ordered(entry.group, entry.order)
                    return result
                return observed
            patch(cls, name, make)

    def report_unwaited(self, entry: _PendingWork) -> None:
        op, where, described = entry.op, entry.where, entry.described
        file, line, func = where
        source = linecache.getline(file, line).strip()
        self.records.report_once(
            ("unwaited", op, file, line), "lost_inplace", where,
            argument_text(source, op) or f"the {op} input",
            f"{op}(..., async_op=True) at {os.path.basename(file)}:{line} "
            f"({func}) returned a Work that was never waited on"
            f"{': `' + source + '`' if source else ''}; nothing orders the "
            "program's reads of the tensor after the result arrives (no "
            "wait(), and no blocking call on the same process group before "
            f"{func} returned). Call work.wait() before using the tensor",
            {"op": op, "out_of_place": False, "result": "not waited",
             "reason": "async collective's Work never waited on",
             **described, "source": source,
             "rule": "the Work was garbage-collected without wait(), "
                     "get_future(), result() or synchronize(), and no "
                     "blocking call on its process group (barrier, a "
                     "blocking collective, a later Work's wait()) came "
                     "before the function that issued it returned"},
            self.steps())

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
        site = outside(frame)
        if site is None:
            return
        index = torch.distributed.get_rank(group)
        where = (site.f_code.co_filename, site.f_lineno, site.f_code.co_name)
        step = self.steps()
        with self.records.lock:
            self.pending_gathers.append((out, local, index, where, step))

    def check_gathers(self) -> None:
        with self.records.lock:
            pending, self.pending_gathers = self.pending_gathers, []
        for out, local, index, where, step in pending:
            try:
                back = 0 <= index < len(out) and (
                    out[index] is local or
                    getattr(out[index], "grad_fn", None) is not None)
                if not back:
                    self.report_gather(local, where, step)
            except Exception as e:
                self.records.fail("gradient", e)

    def report_gather(self, local: Any, where: Tuple[str, int, str],
                      step: int) -> None:
        file, line, func = where
        source = linecache.getline(file, line).strip()
        self.records.report_once(
            ("gather", file, line), "gradient_mismatch", where,
            argument_text(source, "all_gather", 1) or "all_gather",
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


# ---- what the caller does next, and who else holds a tensor


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
