"""An unmodified 2-rank gloo job with a CLIP-style contrastive loss over
features gathered from every rank (OpenCLIP's ClipLoss), for `vqcheck
watch`. usage: clip_job.py dropped|reinserted|autograd

  dropped     dist.all_gather of the text features, used as they come: the
              gathered copies carry no gradient, so the text encoder gets
              none from the other ranks' images (OpenCLIP's bug)
  reinserted  the same, then gathered[rank] = local features (OpenCLIP's
              gather_with_grad=False path): the local gradient flows
  autograd    torch.distributed.nn.all_gather, which is differentiable"""
import datetime
import sys

import torch
import torch.distributed as dist
import torch.distributed.nn
import torch.nn.functional as F


def gather_text(text, mode):
    rank, world = dist.get_rank(), dist.get_world_size()
    if mode == "autograd":
        return torch.cat(torch.distributed.nn.all_gather(text))
    gathered = [torch.zeros_like(text) for _ in range(world)]
    dist.all_gather(gathered, text)
    if mode == "reinserted":
        gathered[rank] = text
    return torch.cat(gathered)


def main():
    mode = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(0)
    image_enc = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    text_enc = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(6, 4))
    params = list(image_enc.parameters()) + list(text_enc.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    torch.manual_seed(10 + rank)
    for _ in range(3):
        image = F.normalize(image_enc(torch.randn(5, 8)), dim=-1)
        text = F.normalize(text_enc(torch.randn(5, 6)), dim=-1)
        all_text = gather_text(text, mode)
        logits = image @ all_text.t() * 10
        labels = torch.arange(5) + rank * 5
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
