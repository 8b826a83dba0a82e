"""A DDP job, written as users write it, whose rank ABORT_RANK aborts
(SIGABRT) on its way out: after its training, its end line and
destroy_process_group(), while Python finalizes (a module-level object's
__del__), as torch 2.x's gloo backend can abort a process at exit.
ABORT_AT_STEP=<n>: it aborts in step n instead, mid-training."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def abort(when):
    sys.stderr.write(f"planted abort {when}\n")
    sys.stderr.flush()
    os.abort()


class AbortsAtExit:
    def __del__(self):
        if os.environ.get("ABORT_RANK") == str(rank):
            abort("at exit")


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(nn.Linear(8, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    if (os.environ.get("ABORT_AT_STEP") == str(step) and
            os.environ.get("ABORT_RANK") == str(rank)):
        abort(f"in step {step}")
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
keeper = AbortsAtExit()  # freed while Python finalizes
