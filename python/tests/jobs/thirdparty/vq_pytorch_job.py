"""vector-quantize-pytorch (current release) in a 2-rank DDP job on gloo, as
its README shows each quantizer. `python vq_pytorch_job.py vq|rvq|fsq|lfq`."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from vector_quantize_pytorch import FSQ, LFQ, ResidualVQ, VectorQuantize


class Model(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.encode = nn.Linear(32, 16)
        if kind == "vq":
            self.quantizer = VectorQuantize(dim=16, codebook_size=64,
                                            decay=0.8, kmeans_init=True,
                                            threshold_ema_dead_code=2)
        elif kind == "rvq":
            self.quantizer = ResidualVQ(dim=16, num_quantizers=4,
                                        codebook_size=64, kmeans_init=True,
                                        threshold_ema_dead_code=2,
                                        quantize_dropout=True)
        elif kind == "fsq":
            self.quantizer = FSQ(levels=[8, 5, 5, 5], dim=16)
        else:
            self.quantizer = LFQ(codebook_size=256, dim=16,
                                 entropy_loss_weight=0.1)

    def forward(self, x):
        out = self.quantizer(self.encode(x))
        quantized, aux = out[0], out[-1]
        loss = quantized.pow(2).mean()
        if torch.is_tensor(aux) and aux.numel() == 1:
            loss = loss + aux.sum()
        return loss


def main():
    kind = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Model(kind))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(4):
        x = torch.randn(8, 8, 32, generator=torch.Generator().manual_seed(
            100 * step + rank))
        model(x).backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
