"""After one all_reduce, rank 0 evaluates in a Python loop that never ends
and enters no collective; rank 1 is done and exits 0."""
import datetime
import time

import torch
import torch.distributed as dist


def evaluate():
    seen = 0
    while seen >= 0:
        seen += 1
        time.sleep(0.01)                 # rank 0 loops here


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    x = torch.ones(4)
    dist.all_reduce(x)                   # both ranks
    if dist.get_rank() == 0:
        evaluate()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
