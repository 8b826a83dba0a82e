"""An unmodified 2-rank gloo job that hangs: rank 1 enters an all_reduce
that rank 0 never reaches (rank 0 is busy elsewhere). Under `vqcheck watch
--timeout S` it must end in about S seconds with a deadlock naming rank 1's
all_reduce line and where rank 0 is."""
import datetime
import time

import torch
import torch.distributed as dist


def somewhere_else():
    time.sleep(600)                    # rank 0 is here


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    x = torch.ones(4)
    dist.all_reduce(x)                 # both ranks: completes
    if dist.get_rank() == 0:
        somewhere_else()
    else:
        dist.all_reduce(x)             # rank 1 waits here forever
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
