"""An unmodified job (no vqcheck import, but for fail_thread) that writes
watched state right after each step end, while the bridge's digest of that
step is in flight on its thread: for `vqcheck watch`, overlap on and off
(python/tests/test_overlap.py).

usage: overlap_writes.py MODE [STEPS]
The state that matters is `big`, 16 Mi float32 (64 MiB, some milliseconds to
hash, so a write that is not waited for lands while it is hashed). At step
N's end it holds value(N, rank) (below) everywhere; the trace's digest of
it at step N must be that of torch.full((BIG,), value(N, rank)).

  forward     Holder's forward fills its buffer `big` (as BatchNorm updates
              its statistics), and the next forward comes right after
              optimizer.step()
  ddp         the same under DistributedDataParallel(broadcast_buffers=
              True), with a value per rank: DDP's forward first broadcasts
              rank 0's buffer into rank 1's, in C++, before Holder's forward
  collective  right after optimizer.step(), dist.all_reduce(holder.big):
              an in-place collective into a buffer
  broadcast   `big` is a parameter (requires_grad=False) set to a value per
              rank before the step and dist.broadcast from rank 0 right
              after it
  ema         an EMA copy of the model (a module of its own, as timm's
              ModelEmaV2) updated in place right after every optimizer
              step, in plain Python
  ema_late    the same from step 3 on only
  after_backward
              `big` is a parameter (requires_grad=False; no buffers, so no
              forward is a join point) that plain Python sets between
              backward() and optimizer.step(), while the previous step's
              digest may still be in flight
  fail_thread from step 2 on the library refuses every digest (the job
              sets vqcheck's digest thread count to 0), as a failure inside
              the digest would
  exit        one rank, no process group: the job ends right after its last
              optimizer.step(), its digest in flight
  fork        right after each optimizer.step() a forked child runs a
              forward of Holder and exits at once (a DataLoader worker's
              life)
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

BIG = 16 << 20  # elements


def value(mode, step, rank):
    """What `big` holds at step `step`'s end on `rank`."""
    per_rank = 100 * rank if mode in ("ddp", "broadcast") else 0
    return float(step + 1 + per_rank)


class Holder(torch.nn.Module):
    def __init__(self, as_parameter=False):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        if as_parameter:
            self.big = torch.nn.Parameter(torch.zeros(BIG),
                                          requires_grad=False)
        else:
            self.register_buffer("big", torch.zeros(BIG))

    def forward(self, x, fill=None):
        if fill is not None:
            with torch.no_grad():
                self.big.fill_(fill)
        return self.lin(x)


class EMA(torch.nn.Module):
    """An exponential moving average of a model's parameters."""

    def __init__(self, model, decay=0.9):
        super().__init__()
        import copy
        self.module = copy.deepcopy(model)
        self.decay = decay

    @torch.no_grad()
    def update(self, model):
        for e, p in zip(self.module.parameters(), model.parameters()):
            e.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def main():
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    distributed = mode != "exit"
    if distributed:
        dist.init_process_group("gloo",
                                timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank() if distributed else 0
    torch.manual_seed(0)
    holder = Holder(as_parameter=mode in ("broadcast", "after_backward"))
    model = holder
    if mode == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(
            holder, broadcast_buffers=True)
    ema = EMA(holder) if mode.startswith("ema") else None
    opt = torch.optim.SGD(holder.lin.parameters(), lr=0.1)
    x = torch.randn(8, 4)  # the same on every rank: only `big` may differ
    for step in range(steps):
        if mode == "fail_thread" and step == 2:
            import vqcheck._digest
            vqcheck._digest._threads_for = lambda nbytes, threads: 0
        fill = value(mode, step, rank)
        if mode == "broadcast":
            with torch.no_grad():
                holder.big.fill_(fill)
            fill = None
        opt.zero_grad()
        model(x, None if mode == "after_backward" else fill) \
            .square().mean().backward()
        if mode == "after_backward":
            with torch.no_grad():
                holder.big.fill_(fill)
        opt.step()  # step end: its digest is queued
        if mode == "collective":
            dist.all_reduce(holder.big)
        elif mode == "broadcast":
            dist.broadcast(holder.big, src=0)
        elif mode == "ema" or (mode == "ema_late" and step >= 3):
            ema.update(holder)
        elif mode == "fork":
            fork_and_forward(holder, x)
    if distributed:
        dist.destroy_process_group()


def fork_and_forward(holder, x):
    """A child that runs a forward of a module with buffers (the bridge's
    join there must not wait for the parent's digest thread, which the
    child does not have) and exits; waited for against a deadline."""
    pid = os.fork()
    if pid == 0:
        holder(x, -1.0)  # writes the child's copy of `big` only
        os._exit(0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if status != 0:
                sys.exit(f"the forked child ended with status {status}")
            return
        time.sleep(0.01)
    os.kill(pid, 9)
    sys.exit("the forked child did not end in 30 s")


if __name__ == "__main__":
    main()
