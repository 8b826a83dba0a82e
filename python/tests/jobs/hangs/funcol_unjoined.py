"""Functional collectives (torch.distributed._functional_collectives): an
all_reduce returns at once and its wait_tensor blocks. Rank 0 reduces a
metric that rank 1 never reduces: rank 0 waits in wait_tensor, rank 1
waits for rank 0's results file."""
import datetime
import os
import sys
import time

import torch
import torch._dynamo  # noqa: F401  (what a first funcol call imports, ~5 s)
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def wait_for_results(path):
    while not os.path.exists(path):
        time.sleep(0.05)                 # rank 1 waits here


def main():
    results = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    group = dist.group.WORLD
    loss = torch.ones(4) * (rank + 1)
    total = funcol.wait_tensor(funcol.all_reduce(loss, "sum", group))
    if rank == 0:
        metric = funcol.all_reduce(total.mean().reshape(1), "sum", group)
        metric = funcol.wait_tensor(metric)  # rank 0 waits here
        with open(results, "w") as f:
            f.write(str(metric.item()))
    else:
        wait_for_results(results)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
