"""DDP and torch.compile. ORDER=compile_ddp (default): torch.compile(DDP(m));
ORDER=ddp_compile: DDP(torch.compile(m)). DRIFT=<rank>: that rank's step
counter buffer moves ahead at step 1. GRAPHS_TO=<path>: rank 0 writes what
dynamo compiled (graphs, graph breaks and their reasons) there at the
end."""
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(),
                                  nn.Linear(32, 16))
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x):
        return self.body(x)


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
net = Net()
if os.environ.get("ORDER") == "ddp_compile":
    model = DDP(torch.compile(net))
else:
    model = torch.compile(DDP(net))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(rank))
    model(x).pow(2).mean().backward()
    with torch.no_grad():
        net.seen += 1
        if step == 1 and os.environ.get("DRIFT") == str(rank):
            net.seen += 1
    opt.step()
    opt.zero_grad()
if os.environ.get("GRAPHS_TO") and rank == 0:
    from torch._dynamo.utils import counters
    with open(os.environ["GRAPHS_TO"], "w") as f:
        json.dump({"graph_breaks": dict(counters["graph_break"]),
                   "unique_graphs": counters["stats"]["unique_graphs"],
                   "calls_captured": counters["stats"]["calls_captured"]},
                  f, sort_keys=True)
dist.destroy_process_group()
