"""A plain 2-rank gloo DDP training loop, long enough to be stopped in the
middle: test_hangs sends one rank SIGSTOP while it trains. The other rank
then waits in DDP's gradient all_reduce, which torch issues from C++."""
import datetime

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 8)
    for step in range(20000):
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()                  # the gradient all_reduce
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
