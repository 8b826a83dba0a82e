"""HSDP: FSDP2 on a 2-D mesh (dp=2 replicas x shard=N/2) on 4 ranks.
DRIFT=<rank>: noise on that rank's shard of the norm weight at step 1."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
mesh = init_device_mesh("cpu", (2, world // 2),
                        mesh_dim_names=("dp", "shard"))
model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 16))
for layer in model:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
replica = mesh.get_coordinate()[0]
for step in range(3):
    x = torch.randn(8, 16,
                    generator=torch.Generator().manual_seed(10 * step + replica))
    model(x).pow(2).mean().backward()
    if step == 1 and os.environ.get("DRIFT") == str(rank):
        with torch.no_grad():
            model[1].weight.to_local().add_(1e-3)
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
