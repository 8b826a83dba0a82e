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
from typing import Any, Dict, List, Optional, Sequence, Tuple

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
    # `kept` holds a copy made by the preparation (a resolved conjugate, a
    # contiguous CUDA tensor) until it is hashed
    kind, args, kept, _ = _prepare_torch(torch, t, label, threads, False)
    try:
        if kind == "cpu":
            return _core.digest_address(*args)
        return _digest_cuda(torch, *args)
    except ValueError as e:
        raise DigestError(f"{label}: {e}") from None


# A tensor made ready to hash later, on another thread (vqcheck._bridge's
# helper): ("cpu", (address, code, shape, byte_strides, nthreads), keep,
# (lo, hi)) or ("cuda", (address, code, shape, stream, device index), keep,
# (lo, hi)). keep holds the hashed memory alive: a tensor sharing its
# storage (and torch's version counter), so that the program may rebind the
# tensor it came from (p.data = ...) meanwhile, or the copy the preparation
# made (a resolved conjugate, a contiguous CUDA tensor), which nothing else
# can write. lo..hi are the addresses of
# the bytes hashed, from the first element's to past the last one's.
Prepared = Tuple[str, Tuple[Any, ...], Any, Optional[Tuple[int, int]]]


def _prepare(t: Any, name: Optional[str] = None) -> Prepared:
    """Everything digest(t) checks and reads from a torch tensor, done now
    (errors are raised here, as digest() raises them); the hashing itself
    is left to _digest_prepared."""
    torch = sys.modules["torch"]
    label = f"tensor '{name}'" if name else \
        f"vqcheck.digest({type(t).__name__})"
    return _prepare_torch(torch, t, label, None, True)


def _digest_prepared(items: Sequence[Prepared],
                     names: Sequence[str]) -> List[int]:
    """The digests of prepared tensors, in order, on this thread: the CPU
    ones in one call that releases the GIL once, the CUDA ones on their
    devices. The memory must not change until this returns."""
    out: List[Optional[int]] = [None] * len(items)
    cpu = [i for i, item in enumerate(items) if item[0] == "cpu"]
    try:
        for i, d in zip(cpu, _core.digest_many([items[i][1] for i in cpu])):
            out[i] = d
    except ValueError as e:
        raise _item_error(e, [names[i] for i in cpu]) from None
    torch = sys.modules.get("torch")
    for i, item in enumerate(items):
        if item[0] == "cuda":
            try:
                out[i] = _digest_cuda(torch, *item[1])
            except ValueError as e:
                raise DigestError(f"tensor '{names[i]}': {e}") from None
    return out  # type: ignore[return-value]


def _digest_start(items: Sequence[Prepared]) -> Any:
    """Prepared CPU tensors hashed on vqcheck's digest thread, which never
    takes the GIL (vqcheck._core.digest_start): returns its Batch (done(),
    wait(seconds), then _digest_result), which holds the tensors' memory
    alive until it is done and dropped. The memory must not change until
    done()."""
    if any(item[0] != "cpu" for item in items):
        raise ValueError("_digest_start takes CPU tensors only")
    # the Batch keeps the aliases (so the memory) until it is done
    return _core.digest_start([item[1] for item in items],
                              [item[2] for item in items])


def _digest_result(batch: Any, names: Sequence[str]) -> List[int]:
    """A done Batch's digests; a failure raises DigestError naming the
    tensor (MemoryError stays one)."""
    try:
        return batch.result()
    except ValueError as e:
        raise _item_error(e, names) from None


def _item_error(e: ValueError, names: Sequence[str]) -> DigestError:
    """digest_many's "item <k>: ..." as DigestError naming tensor k."""
    text = str(e)
    if text.startswith("item "):
        k, _, rest = text[len("item "):].partition(": ")
        if k.isdigit() and int(k) < len(names):
            return DigestError(f"tensor '{names[int(k)]}': {rest}")
    return DigestError(text)


# torch dtype -> (digest code, element size), for each dtype met (the
# checks of a step's tensors are on the training thread's critical path)
_torch_types: Dict[Any, Tuple[int, int]] = {}


def _prepare_torch(torch: Any, t: Any, label: str, threads: Optional[int],
                   keep: bool) -> Prepared:
    if t.layout != torch.strided:
        raise DigestError(f"{label}: a {t.layout} tensor has no dense "
                          "contents to digest; digest t.to_dense()")
    if t.is_quantized:
        raise DigestError(f"{label}: quantized tensors ({t.dtype}) are not "
                          "digested; digest t.int_repr() and the scale")
    if t.is_meta:
        raise DigestError(f"{label}: a meta tensor has no data")
    # Lazy conjugate / negative views: digest the values they stand for.
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    info = _torch_types.get(t.dtype)
    if info is None:
        info = _type_info(_dtype_name(t.dtype), label)
        if t.element_size() != info[1]:
            raise DigestError(f"{label}: torch stores {t.dtype} in "
                              f"{t.element_size()} bytes but the digest's "
                              f"{_dtype_name(t.dtype)} has {info[1]}")
        _torch_types[t.dtype] = info
    code, size = info
    shape = tuple(t.shape)
    if len(shape) > 8:
        raise DigestError(f"{label}: {len(shape)} dims; the digest takes at "
                          "most 8 (a trace line holds 8)")
    if t.is_cpu:
        nbytes = t.numel() * size
        address = t.data_ptr()
        if t.is_contiguous():
            strides = None  # the digest's default: row-major, packed
            extent = nbytes
        else:
            strides = tuple(s * size for s in t.stride())
            # from the first element's first byte to past the last one's
            # (torch makes no negative strides)
            extent = size + sum((n - 1) * s for n, s in zip(shape, strides)
                                if n > 0) if nbytes else 0
        # t itself must outlive the hashing: it may be a copy made here
        return ("cpu", (address, code, shape, strides,
                        _threads_for(nbytes, threads)),
                t.detach() if keep else t,
                (address, address + extent) if keep else None)
    device = t.device.type
    if device == "cuda":
        if not _core.gpu_built():
            raise DigestError(f"{label}: this vqcheck was built without "
                              "CUDA, so CUDA tensors are not digested on "
                              "the device: digest t.cpu(), or reinstall "
                              "where nvcc is present")
        # Made contiguous on the device, on the caller's current stream,
        # whose work (that produced the tensor) the digest then follows.
        t = t.contiguous()
        with torch.cuda.device(t.device):
            stream = torch.cuda.current_stream(t.device).cuda_stream
        address = t.data_ptr()
        return ("cuda", (address, code, shape, stream, t.device.index), t,
                (address, address + t.numel() * size) if keep else None)
    raise DigestError(f"{label}: tensors on {t.device} are not digested "
                      "where they are; digest a host copy, t.cpu()")


def _digest_cuda(torch: Any, address: int, code: int,
                 shape: Tuple[int, ...], stream: int, index: int) -> int:
    """Hashed on the tensor's device, ordered after the work on `stream`
    (the stream current where the tensor was prepared, which produced it);
    the tensor is contiguous there. Nothing is copied to the host but the
    leaves."""
    with torch.cuda.device(index):
        return _core.digest_device(address, code, shape, stream)


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
