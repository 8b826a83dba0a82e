"""An unmodified job that starts its 2 ranks itself with
torch.multiprocessing.spawn (gloo DDP): rank 1 is killed (SIGKILL, as by
the OOM killer) at the start of step 2; spawn then stops rank 0 with
SIGTERM and raises. Under `vqcheck watch -- python spawn_kill.py` the
report names rank 1 as the rank that failed and rank 0 as ended by its
launcher, not both as failed."""
import datetime
import os
import signal
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank, world, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(6):
        if step == 2 and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(work, args=(2, port), nprocs=2)
