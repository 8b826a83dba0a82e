"""An unmodified gloo job whose rank 1 makes one all_reduce the others do
not (a debug counter left in), for `vqcheck watch`.

usage: extra_collective.py clean|extra|subgroup|subgroup_skip|subgroup_count
                           [STEPS]
Every step all_reduces the codebook statistics (4 floats) and the loss (1
float) by hand; with `extra`, rank 1 also all_reduces a counter at step 2,
so from there its calls pair with the others' calls of another size (gloo
then sometimes writes 4 floats into rank 1's 1-float buffer: SIGSEGV). With
`subgroup` (3 ranks), ranks 0 and 1 also all_reduce in a group of their own
and exchange a tensor with send/recv, which rank 2 never calls: correct, as
those are not the default group's calls. With `subgroup_skip`, rank 1
skips the pair's all_reduce at step 2 and waits in recv while rank 0 waits
in the all_reduce (a hang); with `subgroup_count`, rank 1's token at step
2 has 3 floats (gloo aborts on the size)."""
import datetime
import sys

import torch
import torch.distributed as dist


def sync_stats(stats, loss):
    dist.all_reduce(stats)  # codebook statistics
    dist.all_reduce(loss)  # the loss, for logging


def main():
    mode = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pair = dist.new_group([0, 1]) if mode.startswith("subgroup") else None
    for step in range(steps):
        if pair is not None and rank < 2:
            odd = rank == 1 and step == 2
            size = 3 if odd and mode == "subgroup_count" else 2
            token = torch.full((size,), float(step))
            if not (odd and mode == "subgroup_skip"):
                dist.all_reduce(token, group=pair)  # PAIR
            if rank == 0:
                dist.send(token, dst=1)
            else:
                dist.recv(token, src=0)
        opt.zero_grad()
        out = model(torch.randn(16, 8))
        loss = out.square().mean()
        loss.backward()
        if mode == "extra" and rank == 1 and step == 2:
            dist.all_reduce(torch.ones(1))  # EXTRA: only rank 1 calls this
        sync_stats(out.detach().sum(0), loss.detach().clone())
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
