"""The job bench_bridge.py times: an ordinary gloo DDP training loop with no
vqcheck import, as `vqcheck watch` would meet it.

usage: ddp_step.py STEPS WARMUP OUT.json
Model: Linear(512, 1024) -> ReLU -> Linear(1024, 512) (1,050,112 float32
parameters, 4.2 MB), batch 64 per rank, SGD with momentum; each step also
all_reduces the loss for logging from Python (as most training scripts do),
so the bridge's per-collective cost is in the figure. Rank 0 writes
{"steps", "seconds", "loss"} for the STEPS steps after WARMUP untimed ones."""
import datetime
import json
import sys
import time

import torch
import torch.distributed as dist


def main():
    steps, warmup, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 512)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(64, 512), torch.randn(64, 512)
    start = 0.0
    logged = torch.zeros(1)
    for step in range(warmup + steps):
        if step == warmup:
            dist.barrier()
            start = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        logged.fill_(loss.item())
        dist.all_reduce(logged)
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"steps": steps, "seconds": seconds,
                       "loss": logged.item() / dist.get_world_size()}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
