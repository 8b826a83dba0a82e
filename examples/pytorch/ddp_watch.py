"""A PyTorch DDP job (CPU, gloo) checked by vqcheck with three added lines.

Standalone (starts its own ranks with torch.multiprocessing on 127.0.0.1):

    python examples/pytorch/ddp_watch.py --nproc 2 --out traces
    vqcheck compare traces          # exit 0: the ranks agree at every step

Under a launcher that sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT:

    torchrun --nproc_per_node 2 examples/pytorch/ddp_watch.py --out traces

--bug plants a real divergence: from step 3 on, rank 1 trains with a
different learning rate. `vqcheck compare traces` then exits 1 with a
divergence at step 3 in `optimizer.lr` (with 2 ranks there is no majority,
so both ranks are named; with 3 or more, rank 1 is the outlier), and lists
the other tensors that started to differ at that step (the weights it
moved: `0.weight`, `0.bias`, ...).
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

import vqcheck.torch                                            # vqcheck 1/3


def train(rank, world_size, args):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.manual_seed(0)                  # the same initial weights everywhere
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 4)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.Generator().manual_seed(1000 + rank)   # each rank its own data
    watch = vqcheck.torch.watch(model, opt, out=args.out)       # vqcheck 2/3
    for step in range(args.steps):
        if args.bug and rank == 1 and step == 3:        # the planted bug
            for group in opt.param_groups:
                group["lr"] = 2e-2
        x = torch.randn(8, 16, generator=data)
        loss = (model(x) - x[:, :4]).square().mean()
        opt.zero_grad()
        loss.backward()                   # DDP averages the gradients
        opt.step()                        # watch digests the state here
    watch.close()                                               # vqcheck 3/3
    if rank == 0:
        print(f"{world_size} ranks, {args.steps} steps: traces in {args.out}; "
              f"now run: vqcheck compare {args.out}")
    dist.destroy_process_group()


def spawned(rank, world_size, port, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    train(rank, world_size, args)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nproc", type=int, default=0,
                   help="start this many ranks here (without a launcher)")
    p.add_argument("--out", default="vqcheck-traces", help="trace directory")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--bug", action="store_true",
                   help="rank 1 uses another learning rate from step 3")
    args = p.parse_args()
    if args.nproc > 0:
        mp.spawn(spawned, args=(args.nproc, free_port(), args),
                 nprocs=args.nproc)
    elif "RANK" in os.environ:
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
    else:
        p.error("give --nproc N, or start it with a launcher (torchrun)")
