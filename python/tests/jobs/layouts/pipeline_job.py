"""A 2-stage pipeline (torch.distributed.pipelining, GPipe schedule): the
`if rank == 0: ... else: ...` idiom reaches torch's own collectives from
two different lines. DRIFT=<rank>: that rank's stage trains with another
learning rate."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.lin(x))


dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(rank)
block = Block()
stage = PipelineStage(block, rank, world, torch.device("cpu"))
schedule = ScheduleGPipe(stage, n_microbatches=2,
                         loss_fn=lambda out, y: (out - y).pow(2).mean())
lr = 0.01
if os.environ.get("DRIFT") == str(rank):
    lr = 0.02
opt = torch.optim.SGD(block.parameters(), lr=lr)
for step in range(3):
    if rank == 0:
        schedule.step(torch.randn(8, 16))
    else:
        schedule.step(target=torch.zeros(8, 16))
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
