"""The step-end digest off the training thread (docs/pytorch.md, "The
digest off the training thread"): _Overlap queues a step's tensors on
vqcheck._core's digest thread and joins it before anything that can write
them; _Job is one step's digest in flight.

Handed only the function that turns the state check off (Records.fail);
the state walk (_state.py) submits to it, and the hooks at the join points
(module init, load_state_dict, optimizer.step, collectives, a hang, exit)
call join, poke or before_collective.
"""
from __future__ import annotations

import bisect
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple


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
    shape, digest, group, shard, values] in order; the digests of those at `positions` come from
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

    def __init__(self, fail: Callable[[str, BaseException], None],
                 enabled: bool) -> None:
        self.fail = fail  # Records.fail: an error turns the check off
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
        from .._digest import _digest_prepared, _digest_start, _prepare, \
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
            entries.append([name, c[1], c[2], value, c[4], c[5], c[6]])
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
        (Records.fail), as a synchronous digest's does. required=False: a
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
                self.fail("state", e)
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
        from .._digest import _digest_result
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
