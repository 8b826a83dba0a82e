"""The jobs bench_layouts.py times: ordinary torch 2.x training loops on
gloo with no vqcheck import, one per parallel layout.

usage: layout_step.py LAYOUT STEPS WARMUP OUT.json
LAYOUT: ddp (DistributedDataParallel), fsdp2 (fully_shard on every layer
and the root), tp (each Linear pair colwise/rowwise over all ranks).
Model: 4 x Linear(1024, 1024) with ReLU between (4,198,400 float32
parameters, 16.8 MB), batch 64 per rank, Adam. Rank 0 writes {"steps",
"seconds", "cpu_seconds", "loss"} for the STEPS steps after WARMUP untimed
ones: cpu_seconds is rank 0's process CPU time over them, every thread
(the training thread, gloo's, and under vqcheck watch the digest
thread)."""
import datetime
import json
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def model_for(layout):
    layers = []
    for i in range(4):
        layers.append(nn.Linear(1024, 1024))
        if i < 3:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    if layout == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    if layout == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        return model
    if layout == "tp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import (ColwiseParallel,
                                                       RowwiseParallel,
                                                       parallelize_module)
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        plan = {"0": ColwiseParallel(), "2": RowwiseParallel(),
                "4": ColwiseParallel(), "6": RowwiseParallel()}
        return parallelize_module(model, mesh, plan)
    raise SystemExit(f"layout_step.py: unknown layout {layout!r}")


def main():
    layout, steps, warmup, out = (sys.argv[1], int(sys.argv[2]),
                                  int(sys.argv[3]), sys.argv[4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = model_for(layout)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    # tp: every rank the same batch (the layout splits the weights, not
    # the data); ddp, fsdp2: each rank its own
    torch.manual_seed(1 + (0 if layout == "tp" else rank))
    x, y = torch.randn(64, 1024), torch.randn(64, 1024)
    start = cpu_start = 0.0
    loss = torch.zeros(())
    for step in range(warmup + steps):
        if step == warmup:
            dist.barrier()
            start = time.perf_counter()
            cpu_start = time.process_time()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    cpu = time.process_time() - cpu_start  # every thread of this rank
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"steps": steps, "seconds": seconds,
                       "cpu_seconds": cpu,
                       "loss": float(loss.detach().full_tensor()
                                     if hasattr(loss, "full_tensor")
                                     else loss.item())}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
