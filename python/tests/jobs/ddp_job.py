"""One rank of a small gloo job watched by vqcheck.torch.watch (started by
python/tests/test_ddp.py with the torchrun environment, one process per
rank). Modes:

  clean         DDP on an MLP, SGD with momentum: replicas stay equal
  lr_change     the same, but rank 1 sets a different learning rate from
                step 3 (a config bug): its weights leave the others at step 3
  ema_no_reduce a VectorQuantize-style module whose EMA statistics
                (cluster_size, embed_avg) are updated from each rank's own
                batch without an all_reduce: the buffers differ at step 0
  ema_reduce    the fix: the statistics are all_reduced before the update

usage: ddp_job.py MODE OUT_DIR [STEPS]
"""
import datetime
import sys

import torch
import torch.distributed as dist

import vqcheck.torch


class EMACodebook(torch.nn.Module):
    """The EMA codebook update of vector-quantize-pytorch's EuclideanCodebook,
    reduced to its state: cluster_size and embed_avg follow each batch's
    assignment counts and sums, and the codebook is their ratio."""

    def __init__(self, codes=8, dim=4, decay=0.8, reduce=True):
        super().__init__()
        self.decay, self.reduce = decay, reduce
        self.register_buffer("cluster_size", torch.ones(codes))
        self.register_buffer("embed_avg", torch.randn(codes, dim))
        self.register_buffer("embed", self.embed_avg.clone())

    def forward(self, x):
        embed = self.embed.clone()  # the codebook this step quantizes with
        onehot = torch.nn.functional.one_hot(torch.cdist(x, embed).argmin(1),
                                             embed.shape[0]).float()
        if self.training:
            counts, sums = onehot.sum(0), onehot.t() @ x.detach()
            if self.reduce:
                dist.all_reduce(counts)
                dist.all_reduce(sums)
            self.cluster_size.mul_(self.decay).add_(counts, alpha=1 - self.decay)
            self.embed_avg.mul_(self.decay).add_(sums, alpha=1 - self.decay)
            self.embed.copy_(self.embed_avg / (self.cluster_size.unsqueeze(1) + 1e-5))
        return x + (onehot @ embed - x).detach()  # straight-through


def main():
    mode, out = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    # a deadline for the rendezvous and every collective: a stuck job fails
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(0)  # same initial weights on every rank
    if mode.startswith("ema"):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4),
                                    EMACodebook(reduce=mode == "ema_reduce"))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    else:
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 4))
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(100 + rank)  # each rank its own batches
    with vqcheck.torch.watch(ddp, opt, out=out):
        for step in range(steps):
            if mode == "lr_change" and rank == 1 and step == 3:
                for group in opt.param_groups:
                    group["lr"] = 0.1
            x = torch.randn(8, 16 if not mode.startswith("ema") else 4)
            opt.zero_grad()
            ddp(x).square().mean().backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
