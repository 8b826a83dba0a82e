"""What a hash on another thread costs a training thread on this machine:
one process, bench_bridge's model (Linear(512, 1024) -> ReLU ->
Linear(1024, 512), SGD with momentum, batch 64, one intra-op thread), no
process group and no vqcheck bridge. Run by bench_bridge.py --contention.

usage: contend_step.py MODE STEPS WARMUP
  none     training steps only
  thread   after each step, the 8 state tensors (8.4 MB) digested on the
           training thread (what VQC_WATCH_OVERLAP=0 does)
  helper   the same tensors hashed on vqcheck's digest thread while the
           next step runs, waited for before that step's optimizer.step()
           (what the bridge does, without its bookkeeping)
  other    the same on 8.4 MB of other memory (the state stays in cache)
Prints the median step time in ms over STEPS steps after WARMUP."""
import statistics
import sys
import time

import torch

import vqcheck
from vqcheck._digest import _digest_start, _prepare


def main():
    mode, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 512))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 512), torch.randn(64, 512)
    other = [torch.randn(t.shape) for t in model.parameters()] * 2
    batch, times = None, []
    for i in range(warmup + steps):
        start = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        if batch is not None:
            batch.wait(60.0)  # the join before the optimizer step
        opt.step()
        state = list(model.parameters()) + \
            [opt.state[p]["momentum_buffer"] for p in model.parameters()]
        if mode == "thread":
            for t in state:
                vqcheck.digest(t)
        elif mode in ("helper", "other"):
            batch = _digest_start([_prepare(t) for t in
                                   (state if mode == "helper" else other)])
        if i >= warmup:
            times.append(time.perf_counter() - start)
    print(statistics.median(times) * 1e3)


if __name__ == "__main__":
    main()
