"""A hang before the first step: DistributedDataParallel training whose
data loader (two worker processes) gets stuck on rank 1's first batch
(a read that never returns, as on a hung network filesystem), while rank 0
waits in DDP's first gradient all_reduce, issued from C++. No rank ever
ends a step or makes a collective the bridge sees: only the rendezvous
(init_process_group) and what follows it. SLOW_SETUP=<s>: instead, both
ranks compute for s seconds after init_process_group before training (a
model built or compiled slowly): busy, never a hang. MARKS=<dir>: each
rank writes there when it starts to wait (time.monotonic()), for the test
to time the report from the hang's start."""
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler


def mark(name):
    if os.environ.get("MARKS"):
        with open(os.path.join(os.environ["MARKS"], name), "w") as f:
            f.write(repr(time.monotonic()))


class Batches(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        if os.environ.get("STALL") and int(os.environ["RANK"]) == 1:
            mark(f"stall-{i}")
            time.sleep(3600)  # rank 1's loader is stuck here
        g = torch.Generator().manual_seed(i)
        return torch.randn(8, generator=g), torch.randn(2, generator=g)


def build_slowly(seconds):
    end = time.monotonic() + seconds
    x = 0.0
    while time.monotonic() < end:
        x += sum(i * i for i in range(1000))  # busy, as a slow build is
    return x


def main():
    dist.init_process_group("gloo")
    build_slowly(float(os.environ.get("SLOW_SETUP", "0")))
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = Batches()
    loader = DataLoader(data, batch_size=4, sampler=DistributedSampler(data),
                        num_workers=2)
    for x, y in loader:  # rank 1 waits for its first batch here
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        mark(f"backward-{dist.get_rank()}")
        loss.backward()  # rank 0 waits here, in DDP's all_reduce
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
