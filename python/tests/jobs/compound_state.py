"""An unmodified 2-rank gloo DDP job whose state holds tensors that are not
one dense array, kept equal on every rank: a quantized buffer, a sparse
buffer and a float8 weight in a wrapper tensor subclass (as torchao's
float8 training keeps one: the float8 bytes and their scale). The digest
reads each through the dense tensors it is made of (vqcheck/_dense.py), so
a rank that differs in one is found.

usage: compound_state.py clean|quantized|sparse|wrapped
  quantized: from step 2 rank 1 requantizes its buffer with another scale
  sparse:    from step 2 rank 1 changes one stored value of the sparse one
  wrapped:   from step 2 rank 1 doubles the float8 weight's scale
A meta buffer (no data anywhere) is left out and named: nothing to compare,
so it never stands in the way of a verdict."""
import datetime
import sys

import torch
import torch.distributed as dist
from torch.utils._pytree import tree_map


class Float8Weight(torch.Tensor):
    """A float8 weight as float8 training libraries keep one: a wrapper
    subclass (no bytes of its own) over the float8 data and its scale,
    which says what it wraps through __tensor_flatten__."""

    @staticmethod
    def __new__(cls, data, scale):
        return torch.Tensor._make_wrapper_subclass(
            cls, data.shape, dtype=torch.float32, device=data.device)

    def __init__(self, data, scale):
        self._data = data
        self._scale = scale

    def __tensor_flatten__(self):
        return ["_data", "_scale"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return Float8Weight(inner["_data"], inner["_scale"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(x):
            return x._data.float() * x._scale \
                if isinstance(x, Float8Weight) else x
        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))


def main():
    mode = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))
    extra = torch.nn.Module()  # a second root, outside DDP
    extra.register_buffer("q", torch.quantize_per_tensor(
        torch.linspace(-1, 1, 8), 0.1, 0, torch.qint8))
    extra.register_buffer("s", torch.eye(4).to_sparse())
    w = torch.randn(2, 4)
    scale = w.abs().max() / 448
    extra.register_buffer("w8", Float8Weight(
        (w / scale).to(torch.float8_e4m3fn), scale.reshape(1)))
    extra.register_buffer("m", torch.empty(3, device="meta"))  # no data
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(5):
        if step == 2 and rank == 1:
            if mode == "quantized":
                extra.q = torch.quantize_per_tensor(
                    torch.linspace(-1, 1, 8), 0.2, 0, torch.qint8)
            elif mode == "sparse":
                extra.s = (torch.eye(4) * 1.5).to_sparse()
            elif mode == "wrapped":
                extra.w8 = Float8Weight(extra.w8._data, extra.w8._scale * 2)
        opt.zero_grad()
        model(torch.randn(8, 4)).square().mean().backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
