"""The all_gather of variably sized tensors as vector-quantize-pytorch 1.32
writes it (k-means init, dead-code expiry under DDP): one async broadcast
per rank whose Work is dropped, then barrier() on the same group, which in
gloo (and NCCL) orders after all earlier work: the values are right.
`python async_then_barrier.py barrier|no_barrier` (under torchrun-style
environment, 2+ ranks); no_barrier is the twin that reads the gathered
tensors with nothing ordering them after the broadcasts."""
import sys

import torch
import torch.distributed as dist


def all_gather_variably_sized(x, sizes, ordered):
    rank = dist.get_rank()
    all_x = []
    for i, size in enumerate(sizes):
        t = x if i == rank else x.new_empty((int(size), *x.shape[1:]))
        dist.broadcast(t, src=i, async_op=True)
        all_x.append(t)
    if ordered:
        dist.barrier()
    return all_x


def main():
    ordered = sys.argv[1] == "barrier"
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.full((rank + 1, 4), float(rank))
        sizes = torch.tensor([r + 1 for r in range(dist.get_world_size())])
        gathered = torch.cat(all_gather_variably_sized(x, sizes, ordered))
        model(gathered).sum().backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
