"""One gloo rank (world 1) making collectives on every kind of argument,
for the bridge's lost-result rules. Only the lines marked LOST may be
reported (two temporaries, a Work never waited on nor ordered before its
function returned, two dropped out-of-place results); run under the bridge (VQC_WATCH_DIR set, python/bridge on
PYTHONPATH)."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed import all_reduce as aliased_all_reduce
from torch.distributed import nn as dist_nn
from torch.distributed.nn import functional as nn_functional


kept_results = []


def keep(t):
    kept_results.append(t)


def returned(t):
    return dist_nn.all_reduce(t)


def log_async(t):
    dist.all_reduce(t, async_op=True)  # LOST: never waited, nor ordered
    return t                           # before this function returns


def reduce_named(t):
    dist.all_reduce(t)                 # the caller still holds t
    return t


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    x = torch.randn(4, 3)
    kept = [torch.randn(3)]
    dist.all_reduce(x)                                  # named
    dist.all_reduce(x[0])                               # a view of a named tensor
    dist.all_reduce(x.contiguous())                     # contiguous() returned x
    dist.all_reduce(kept[0])                            # held by a list
    reduce_named(x)                                     # named, one call down
    dist.broadcast(x.t(), src=0)                        # a view (transpose)
    y = x.t().contiguous()
    dist.all_reduce(y)                                  # a copy, but named
    dist.all_reduce(x.t().contiguous())                 # LOST: a temporary copy
    aliased_all_reduce(x + 1)                           # LOST: through an alias
    work = dist.all_reduce(x, async_op=True)            # waited on below
    work.wait()
    works = [dist.broadcast(y, 0, None, True)]          # kept, then waited
    for w in works:
        w.wait()
    log_async(y)                                        # LOST inside
    del works
    model = torch.nn.Linear(3, 2)
    model(x).sum().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)                         # torch keeps p.grad
        dist.all_reduce(p.data)                         # shares p's storage
        dist.broadcast(p.detach(), 0)                   # shares p's storage
    dist.all_reduce(x.detach())                         # shares x's storage
    for _ in range(2):
        y = dist_nn.all_reduce(y)                       # rebound each time
    _ = dist_nn.all_reduce(y)                           # assigned
    z = dist_nn.all_reduce(y) / 2                       # used in an expression
    keep(dist_nn.all_reduce(z))                         # passed on
    z = returned(z)                                     # returned
    dist_nn.all_reduce(z)                               # LOST: discarded
    nn_functional.broadcast(z, 0)                       # LOST: discarded too
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
