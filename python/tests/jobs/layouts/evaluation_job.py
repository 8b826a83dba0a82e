"""DistributedDataParallel training with dropout, validated on rank 0 only
after step 1 (model.eval(), then model.train() again). DRIFT=0: rank 0
forgets model.train() after its validation: it trains on in eval mode
(no dropout), its gradients differ, DDP averages them into the same
update, so no weight shows it; the modules' training flags do."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(8, 32), nn.Dropout(0.2),
                          nn.Linear(32, 2)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.Generator().manual_seed(100 + rank)
for step in range(4):
    loss = model(torch.randn(4, 8, generator=data)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 1 and rank == 0:
        model.eval()
        with torch.no_grad():
            model.module(torch.randn(4, 8, generator=data)).sum()
        if os.environ.get("DRIFT") != str(rank):
            model.train()
dist.destroy_process_group()
