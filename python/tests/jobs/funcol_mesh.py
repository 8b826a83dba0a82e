"""Functional collectives on a 2 x 2 DeviceMesh ("dp", "tp"), as a torch
2.x user reduces metrics: each step a statistic over the data-parallel
dimension ((mesh, 0): ranks {0, 2} and {1, 3}) and a loss averaged over the
tensor-parallel one (mesh["tp"]: {0, 1} and {2, 3}).

usage: funcol_mesh.py clean|count [STEPS]
With `count`, rank 3's statistic at step 1 has 3 elements where rank 1's
has 2 (a shape taken from its own shard): a mismatch inside dp group
{1, 3}."""
import datetime
import sys

import torch
import torch._dynamo  # noqa: F401  (what a first funcol call imports)
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh


def main():
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)  # replicated on every rank
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        opt.zero_grad()
        model(torch.ones(8, 4)).square().mean().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        opt.step()
        size = 3 if mode == "count" and rank == 3 and step == 1 else 2
        stats = torch.full((size,), float(rank))
        stats = funcol.all_reduce(stats, "sum", (mesh, 0))  # DP_STATS
        stats = funcol.wait_tensor(stats)
        loss = torch.tensor([float(step + rank)])
        loss = funcol.wait_tensor(funcol.all_reduce(loss, "avg",
                                                    mesh["tp"]))  # TP_LOSS
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
