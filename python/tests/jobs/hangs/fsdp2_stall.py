"""FSDP2 (fully_shard) on gloo/CPU: at its third step rank 1 waits for a
batch file that never comes (a data loader stuck on a shared filesystem),
while rank 0 goes on into its forward, where FSDP's all_gather of the
first layer's parameters waits for rank 1."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


def next_batch(path, step, rank):
    if rank == 1 and step == 2:
        while not os.path.exists(path):
            time.sleep(0.05)             # rank 1 waits here
    return torch.randn(8, 16, generator=torch.Generator().manual_seed(step))


def main():
    batch_file = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32),
                          nn.Linear(32, 16))
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for step in range(4):
        x = next_batch(batch_file, step, rank)
        loss = model(x).pow(2).mean()    # rank 0 waits in FSDP's all_gather
        loss.backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
