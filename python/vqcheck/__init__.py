"""vqcheck: finds correctness bugs in distributed training.

The Python face of libvqcheck (a C library); the work is done in C.

    import vqcheck
    vqcheck.digest(tensor)            # the tensor digest, an int (README
                                      # "The tensor digest"): torch tensors
                                      # (CPU or CUDA, any strides), numpy
                                      # arrays, buffers with dtype= and shape=

    import vqcheck.torch
    with vqcheck.torch.watch(model, optimizer, out="traces"):
        ...                           # every optimizer.step() writes the
                                      # digests of the model's parameters,
                                      # buffers and optimizer state to
                                      # traces/rank-<r>.trace.jsonl

then `vqcheck compare traces` (the CLI this package installs) finds the first
step and tensor at which the ranks' replicated state stopped agreeing.

Importing vqcheck imports neither torch nor numpy and starts nothing.
"""
from ._core import version as _library_version
from ._digest import DigestError, digest, dtype_names, dtype_code

__version__: str = _library_version()

__all__ = ["DigestError", "digest", "dtype_code", "dtype_names", "__version__"]
