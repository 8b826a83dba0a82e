"""DDP with ZeroRedundancyOptimizer (each rank steps its partition of the
optimizer state, then broadcasts its parameters). DRIFT=<rank>: that rank
is given another learning rate."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(16, 32), nn.Linear(32, 16)))
lr = 0.01
if os.environ.get("DRIFT") == str(rank):
    lr = 0.02
opt = ZeroRedundancyOptimizer(model.parameters(),
                              optimizer_class=torch.optim.Adam, lr=lr)
for step in range(3):
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(rank))
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
