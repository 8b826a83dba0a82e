"""An unmodified 2-rank gloo DDP job that, from step 3, holds state the
digest cannot read (a torch.bits8 buffer: no digest code) on every rank:
that one tensor is left out and named ("not digested: why"); the state
check goes on for every other tensor to the last step (one tensor never
switches the check off), and the verdict says what went unchecked."""
import datetime

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    extra = torch.nn.Module()  # a second root, outside DDP
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(6):
        if step == 3:
            extra.register_buffer("q", torch.zeros(
                2, dtype=torch.uint8).view(torch.bits8))
        opt.zero_grad()
        model(torch.randn(8, 4)).square().mean().backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
