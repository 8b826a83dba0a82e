"""FSDP1 (FullyShardedDataParallel) on gloo/CPU. STRATEGY: FULL_SHARD
(default) or HYBRID_SHARD (a 2 x N/2 mesh: replicated across the first
dimension, sharded across the second). DRIFT=<rank>: that rank trains with
another learning rate."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import ShardingStrategy

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
strategy = os.environ.get("STRATEGY", "FULL_SHARD")
extra = {}
if strategy == "HYBRID_SHARD":
    extra["device_mesh"] = init_device_mesh("cpu", (2, world // 2))
model = FSDP(nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32),
                           nn.Linear(32, 16)),
             sharding_strategy=ShardingStrategy[strategy],
             device_id=torch.device("cpu"), **extra)
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
