"""One gloo rank (world 1) making in-place collectives on every kind of
argument, for the bridge's lost-result rule. Only the two temporaries
(lines marked LOST) may be reported; run under the bridge
(VQC_WATCH_DIR set, python/bridge on PYTHONPATH)."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed import all_reduce as aliased_all_reduce


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
    dist.all_reduce(y, async_op=True)                   # LOST: never waited
    del works
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
