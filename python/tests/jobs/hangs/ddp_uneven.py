"""Uneven inputs under DDP: rank 0 has 3 batches, rank 1 has 2. Rank 0's
third backward waits in DDP's gradient all_reduce (issued from C++) for a
rank 1 that has moved on: it waits for rank 0's checkpoint, which rank 0
writes only after training."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def wait_for_checkpoint(path):
    while not os.path.exists(path):
        time.sleep(0.05)                 # rank 1 waits here


def main():
    checkpoint = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [torch.randn(16, 8) for _ in range(3 if rank == 0 else 2)]
    for x in batches:
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()                  # rank 0's third one waits here
        opt.step()
    if rank == 0:
        torch.save(model.module.state_dict(), checkpoint)
    else:
        wait_for_checkpoint(checkpoint)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
