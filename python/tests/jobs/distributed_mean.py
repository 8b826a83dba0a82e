"""An unmodified gloo DDP job whose loss centres features on their mean over
all ranks, through torch.distributed.nn's out-of-place all_reduce (the
class of Megatron-LM #5337), for `vqcheck watch`.

usage: distributed_mean.py dropped|fixed|async_dropped|async_waited [STEPS]
  dropped        `dist_nn.all_reduce(t)` as if it were in place: t keeps
                 this rank's value, so the "global" mean is the local mean
                 divided by the world size. DDP still averages gradients,
                 so the replicas stay identical: only the bridge sees it.
  fixed          `t = dist_nn.all_reduce(t)`.
  async_dropped  the first step's loss is also all_reduced with
                 async_op=True for logging, and the Work is never waited on.
  async_waited   the same, waited on."""
import datetime
import sys

import torch
import torch.distributed as dist
from torch.distributed import nn as dist_nn


def distributed_mean(t, fixed):
    if fixed:
        t = dist_nn.all_reduce(t)
    else:
        dist_nn.all_reduce(t)  # DROPPED: t is still this rank's value
    return t / dist.get_world_size()


def log_loss(loss, wait):
    logged = loss.detach().clone()
    work = dist.all_reduce(logged, async_op=True)  # ASYNC: logging
    if wait:
        work.wait()
    return logged


def main():
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(10 + rank)
    for step in range(steps):
        opt.zero_grad()
        feats = model(torch.randn(16, 8))
        center = distributed_mean(feats.mean(0), mode != "dropped")
        loss = (feats - center).square().mean()
        loss.backward()
        # At the first step only: an un-waited async call still in a gloo
        # worker at the end can deadlock torch 1.13's teardown (the worker
        # frees the tensor, which needs the GIL, while the main thread joins
        # it in ~ProcessGroupGloo holding the GIL; seen with gdb).
        if mode.startswith("async") and step == 0:
            log_loss(loss, mode == "async_waited")
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
