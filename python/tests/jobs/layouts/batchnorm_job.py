"""A small convolutional net with BatchNorm under DistributedDataParallel,
each rank on its own batches: the running statistics differ across ranks
at every step end by design (DDP copies rank 0's into the others only at
the start of the next forward). SYNC=1: SyncBatchNorm on CPU is not
possible, so the job all_reduces the statistics itself after each step.
DRIFT=<rank>: noise on that rank's BatchNorm weight (a parameter, which
every replica must agree on) at step 1."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                    nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                    nn.Linear(8, 4), nn.BatchNorm1d(4))
model = DDP(net)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
data = torch.Generator().manual_seed(100 + rank)
for step in range(4):
    x = torch.randn(6, 3, 8, 8, generator=data)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    if step == 1 and os.environ.get("DRIFT") == str(rank):
        with torch.no_grad():
            net[1].weight.add_(1e-3)
    opt.step()
dist.destroy_process_group()
