"""FSDP2 (fully_shard) on gloo/CPU, written as a user writes it.
DRIFT=<rank>: that rank trains with another learning rate."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 16))
for layer in model:
    fully_shard(layer)
fully_shard(model)
lr = 0.01
if os.environ.get("DRIFT") == str(rank):
    lr = 0.02
opt = torch.optim.Adam(model.parameters(), lr=lr)
for step in range(3):
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(step))
    model(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
