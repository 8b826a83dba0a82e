"""An unmodified 2-rank gloo job: a DDP encoder feeding vector-quantize-
pytorch's VectorQuantize (EMA codebook). No vqcheck import: `vqcheck watch`
checks it through the bridge. Run with vector-quantize-pytorch 1.12.10 (its
EMA update all_reduces `embed_sum.contiguous()`, a temporary: the codebooks
drift apart from step 0) or 1.12.11 (the fix) on PYTHONPATH.

VectorQuantize stays outside DDP: its bool `initted` buffer cannot be
broadcast by gloo, and its codebook is kept in sync by its own all_reduce."""
import datetime

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from vector_quantize_pytorch import VectorQuantize


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial weights and codebook everywhere
    encoder = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                      torch.nn.Linear(16, 16)))
    vq = VectorQuantize(dim=16, codebook_size=64, decay=0.8)
    opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    torch.manual_seed(100 + rank)  # each rank its own data
    for _ in range(4):
        z = encoder(torch.randn(4, 32, 8))
        quantized, _, commit = vq(z)
        loss = (quantized - z.detach()).square().mean() + commit.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
