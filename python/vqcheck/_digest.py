"""vqcheck.digest: the tensor digest of torch tensors, numpy arrays and buffers.

The digest is defined in the README ("The tensor digest") over a tensor's
logical contents in row-major order, its element type and its shape; the C
library (digest.h) computes it, here through vqcheck._core:

- CPU memory is hashed where it lies: a contiguous tensor in place, with the
  64 KiB leaves spread over threads for large ones; a strided view (a
  transpose, a slice with a step, an expand) is gathered 64 KiB at a time, so
  it is never copied whole. The GIL is released while hashing.
- CUDA tensors are hashed on the device, on the tensor's current stream;
  only the leaves (8 bytes per 64 KiB) reach the host.

Element types have stable codes (dtype_code / dtype_names, digest.h's
VQC_DIGEST_TYPE_LIST): float32 1, float64 2, int32 3, int64 4, uint8 5, bool 6,
int8 7, int16 8, float16 9, bfloat16 10, complex64 11, complex128 12,
float8_e4m3fn 13, float8_e5m2 14, float8_e4m3fnuz 15, float8_e5m2fnuz 16,
uint16 17, uint32 18, uint64 19, complex32 20, float8_e8m0fnu 21,
float4_e2m1fn_x2 22. The bytes are hashed as they are in memory: no value is
converted, so a bfloat16 tensor and its float32 copy have different digests.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, Optional, Sequence, Tuple

from . import _core

__all__ = ["DigestError", "digest", "dtype_code", "dtype_names"]


class DigestError(ValueError):
    """A tensor that cannot be digested (its element type, layout or device),
    with the tensor's name when the caller gave one."""


# Contiguous tensors at least this large have their leaves hashed by several
# threads; below it a thread costs more than it saves (bench/bench_watch.py).
_PARALLEL_MIN_BYTES = 8 << 20
_BYTES_PER_THREAD = 4 << 20
_MAX_THREADS = 8

_type_cache: Dict[str, Tuple[int, int]] = {}


def dtype_names() -> Tuple[str, ...]:
    """The element type names the digest knows, in code order."""
    return _core.type_names()


def dtype_code(dtype: Any) -> int:
    """The digest code of an element type: a name ("bfloat16"), a torch dtype
    or a numpy dtype. Raises DigestError for a type the digest does not know."""
    return _type_info(_dtype_name(dtype), None)[0]


def digest(
    x: Any,
    *,
    dtype: Any = None,
    shape: Optional[Sequence[int]] = None,
    name: Optional[str] = None,
    threads: Optional[int] = None,
) -> int:
    """The tensor digest of x, a 64-bit int (format it as f"{d:016x}").

    x is a torch tensor (CPU or CUDA, any strides, any dtype in dtype_names()),
    a numpy array (any strides), or any object with the buffer protocol
    (bytes, bytearray, memoryview, mmap). For a buffer, dtype= names its
    element type and shape= its shape (C order); without shape= flat bytes
    are read as a 1-d tensor and other buffers (a memoryview of a typed array)
    keep their own shape. name= names the tensor in error messages. threads=
    sets how many threads hash a large contiguous tensor (default: by size,
    up to 8 and the CPUs this process may use).

    Raises DigestError for an element type, layout or device that cannot be
    digested, TypeError for an object that holds no tensor data.
    """
    label = f"tensor '{name}'" if name else f"vqcheck.digest({type(x).__name__})"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        if dtype is not None or shape is not None:
            raise TypeError(f"{label}: dtype= and shape= are for raw buffers; "
                            "a torch tensor carries its own")
        return _digest_torch(torch, x, label, threads)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(x, numpy.ndarray):
        if dtype is not None or shape is not None:
            raise TypeError(f"{label}: dtype= and shape= are for raw buffers; "
                            "a numpy array carries its own")
        return _digest_numpy(numpy, x, label, threads)
    try:
        view = memoryview(x)
    except TypeError:
        raise TypeError(
            f"{label}: vqcheck.digest takes a torch tensor, a numpy array or "
            f"a buffer (bytes, memoryview, ...) with dtype= and shape=; got "
            f"{type(x).__name__}") from None
    if dtype is None:
        raise TypeError(f"{label}: a raw buffer needs dtype= (e.g. "
                        "dtype='float32') and shape=")
    code, size = _type_info(_dtype_name(dtype), label)
    nbytes = view.nbytes
    if shape is not None:
        dims = tuple(int(d) for d in shape)
    elif view.ndim == 1 and view.itemsize == 1 and size > 1:
        # flat bytes read as a 1-d tensor of the given type
        if nbytes % size:
            raise DigestError(f"{label}: {nbytes} bytes are not a whole "
                              f"number of {size}-byte elements")
        dims = (nbytes // size,)
    else:
        dims = None  # the buffer's own shape and strides
    try:
        return _core.digest_buffer(x, code, dims, _threads_for(nbytes, threads))
    except ValueError as e:
        raise DigestError(f"{label}: {e}") from None


# ---- torch


def _digest_torch(torch: Any, t: Any, label: str, threads: Optional[int]) -> int:
    if t.layout != torch.strided:
        raise DigestError(f"{label}: a {t.layout} tensor has no dense "
                          "contents to digest; digest t.to_dense()")
    if t.is_quantized:
        raise DigestError(f"{label}: quantized tensors ({t.dtype}) are not "
                          "digested; digest t.int_repr() and the scale")
    if t.device.type == "meta":
        raise DigestError(f"{label}: a meta tensor has no data")
    # Lazy conjugate / negative views: digest the values they stand for.
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    code, size = _type_info(_dtype_name(t.dtype), label)
    if t.element_size() != size:
        raise DigestError(f"{label}: torch stores {t.dtype} in "
                          f"{t.element_size()} bytes but the digest's "
                          f"{_dtype_name(t.dtype)} has {size}")
    if t.dim() > 8:
        raise DigestError(f"{label}: {t.dim()} dims; the digest takes at "
                          "most 8 (a trace line holds 8)")
    shape = tuple(t.shape)
    try:
        if t.device.type == "cpu":
            strides = tuple(s * size for s in t.stride())
            nbytes = t.numel() * size
            return _core.digest_address(t.data_ptr(), code, shape, strides,
                                        _threads_for(nbytes, threads))
        if t.device.type == "cuda":
            return _digest_cuda(torch, t, code, shape)
    except ValueError as e:
        raise DigestError(f"{label}: {e}") from None
    raise DigestError(f"{label}: tensors on {t.device} are not digested "
                      "where they are; digest a host copy, t.cpu()")


def _digest_cuda(torch: Any, t: Any, code: int, shape: Tuple[int, ...]) -> int:
    """Hashed on the tensor's device, ordered after the work on its current
    stream (where the tensor was produced). A strided view is first made
    contiguous on the device; nothing is copied to the host."""
    if not _core.gpu_built():
        raise DigestError("this vqcheck was built without CUDA, so CUDA "
                          "tensors are not digested on the device: digest "
                          "t.cpu(), or reinstall where nvcc is present")
    t = t.contiguous()
    with torch.cuda.device(t.device):
        stream = torch.cuda.current_stream(t.device).cuda_stream
        return _core.digest_device(t.data_ptr(), code, shape, stream)


# ---- numpy


def _digest_numpy(numpy: Any, a: Any, label: str, threads: Optional[int]) -> int:
    dt = a.dtype
    if dt.fields is not None or dt.subdtype is not None:
        raise DigestError(f"{label}: structured numpy dtype {dt} is not "
                          "digested; digest each field")
    code, size = _type_info(dt.name, label)
    if dt.itemsize != size:
        raise DigestError(f"{label}: numpy stores {dt.name} in {dt.itemsize} "
                          f"bytes but the digest's has {size}")
    # The digest is over little-endian bytes: a big-endian array is
    # converted (a copy) so that equal values give equal digests.
    if dt.byteorder == ">" or (dt.byteorder == "=" and sys.byteorder == "big"):
        a = a.astype(dt.newbyteorder("<"))
    if a.ndim > 8:
        raise DigestError(f"{label}: {a.ndim} dims; the digest takes at most 8")
    try:
        return _core.digest_buffer(a, code, None, _threads_for(a.nbytes, threads))
    except ValueError as e:
        raise DigestError(f"{label}: {e}") from None


# ---- types and threads


def _dtype_name(dtype: Any) -> str:
    """"bfloat16" from "bfloat16", torch.bfloat16, numpy.dtype("float32") or
    numpy.float32."""
    if isinstance(dtype, str):
        return dtype
    text = str(dtype)
    if text.startswith("torch."):
        return text[len("torch."):]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            return numpy.dtype(dtype).name
        except TypeError:
            pass
    return getattr(dtype, "name", text)


def _type_info(name: str, label: Optional[str]) -> Tuple[int, int]:
    info = _type_cache.get(name)
    if info is None:
        try:
            info = _core.type_info(name)
        except ValueError:
            where = f"{label}: " if label else ""
            raise DigestError(
                f"{where}element type {name} cannot be digested (the digest "
                f"knows {', '.join(dtype_names())})") from None
        _type_cache[name] = info
    return info


def _usable_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _threads_for(nbytes: int, threads: Optional[int]) -> int:
    if threads is not None:
        if int(threads) < 1:
            raise ValueError(f"threads={threads}: must be at least 1")
        return int(threads)
    if nbytes < _PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(_MAX_THREADS, _usable_cpus(), nbytes // _BYTES_PER_THREAD))
