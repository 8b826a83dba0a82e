"""An unmodified 2-rank gloo DDP job that trains to the end, and then
rank 1's interpreter waits for good on its way out: a module-level object
whose __del__ blocks runs after the exit handlers (as a communicator's
destructor can hang at exit). Every rank wrote its end line; rank 1's
process never exits, so its launcher would wait for it for good."""
import datetime
import time

import torch
import torch.distributed as dist


class FlushOnExit:
    def __del__(self):
        time.sleep(3600)  # the hang: an exit-time wait that never ends


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
    dist.destroy_process_group()
    return rank


if main() == 1:
    flusher = FlushOnExit()
