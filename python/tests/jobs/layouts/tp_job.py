"""Tensor parallel (colwise/rowwise Linear pair) with a replicated
LayerNorm. DRIFT=<rank>: noise on that rank's copy of the norm weight at
step 1 (the tensor-parallel copies drift apart)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (ColwiseParallel,
                                               RowwiseParallel,
                                               parallelize_module)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.down(torch.relu(self.up(x))))


dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
model = parallelize_module(MLP(), mesh, {"up": ColwiseParallel(),
                                         "down": RowwiseParallel()})
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for step in range(3):
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(step))
    model(x).pow(2).mean().backward()
    if step == 1 and os.environ.get("DRIFT") == str(rank):
        with torch.no_grad():
            model.norm.weight.add_(1e-3)
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
