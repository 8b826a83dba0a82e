"""An unmodified gloo DDP job (no vqcheck import), for `vqcheck watch`.

usage: plain_ddp.py clean|lr_change [STEPS]
  lr_change: rank 1 sets another learning rate from step 3 (its weights
  leave the others' at step 3)."""
import datetime
import sys

import torch
import torch.distributed as dist


def main():
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(100 + rank)
    for step in range(steps):
        if mode == "lr_change" and rank == 1 and step == 3:
            for group in opt.param_groups:
                group["lr"] = 0.1
        opt.zero_grad()
        model(torch.randn(8, 16)).square().mean().backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
