"""Two DistributedDataParallel models on two process subgroups of 4 ranks
({0, 1} and {2, 3}), each with its own initial weights and data.
DRIFT=<rank>: noise on that rank's weight at step 1."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
mine = groups[rank // 2]
torch.manual_seed(rank // 2)
model = DDP(nn.Linear(16, 16), process_group=mine)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(rank))
    model(x).pow(2).mean().backward()
    if step == 1 and os.environ.get("DRIFT") == str(rank):
        with torch.no_grad():
            model.module.weight.add_(1e-3)
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
