"""DistributedDataParallel with a GradScaler (torch.amp, on CPU), as mixed
precision jobs scale their loss. DRIFT=<rank>: that rank's scaler starts
from another scale (a config read on one rank only), so it unscales the
averaged gradients by another factor."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
init_scale = 2.0 ** 10 if os.environ.get("DRIFT") == str(rank) else 2.0 ** 16
scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
data = torch.Generator().manual_seed(100 + rank)
for step in range(3):
    x = torch.randn(8, 16, generator=data)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
dist.destroy_process_group()
