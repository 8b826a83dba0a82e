"""The dense tensors that hold a watched tensor's contents (docs/pytorch.md,
"What is digested").

The digest reads one dense array: a strided tensor of a known element type,
in CPU or CUDA memory. Most watched tensors are one; the others hold their
contents elsewhere, and each of those is digested through the dense tensors
it is made of, so that replicas that differ in them are still found:

- a quantized tensor: its integer values (int_repr()) and its
  quantization parameters (scale and zero point, per tensor or per
  channel with the axis), as the parts "NAME:int_repr", "NAME:scale", ...;
- a sparse tensor (COO, CSR, CSC, BSR, BSC): its dense form, under its own
  name, when that holds at most DENSE_MAX_BYTES (the index arrays' lengths
  change with the number of non-zeros, so comparing those would call a
  difference of contents a change of shape); a larger one is not read;
- a tensor subclass that wraps others (torch's traceable wrapper
  subclasses: torchao's float8 and NF4 weights, a jagged nested tensor):
  the tensors its __tensor_flatten__() names, as "NAME:<attribute>", each
  of them made dense the same way; a functional collective's result not
  yet waited for (AsyncCollectiveTensor) is waited for first, and is then
  the plain tensor it holds.

What is left cannot be digested, for one of two reasons, which the
analysis treats differently:
- nothing to compare (`unchecked` False): a meta tensor, or one whose
  storage was freed (FSDP1's unsharded parameters between steps); its
  contents are nowhere, so no replica can differ in them;
- contents vqcheck cannot read (`unchecked` True): an element type the
  digest has no code for (torch.uint3, torch.bits8, ...), a device other
  than CPU or CUDA, a subclass without local bytes that does not say what
  it wraps. Replicas could differ there unseen, so the run's verdict is "not
  everything was checked" (exit 3), never clean.
"""
from __future__ import annotations

from typing import Any, List, NamedTuple, Optional, Tuple, Union

import torch

from . import _core
from ._digest import DigestError, dtype_code

# A sparse tensor is digested through its dense form up to this size (the
# copy lives only until it is hashed).
DENSE_MAX_BYTES = 256 << 20

_SPARSE = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc,
           torch.sparse_bsr, torch.sparse_bsc)


class Left(NamedTuple):
    """A tensor left out of the digests: why, and whether it holds
    contents that went unchecked (see the module's comment)."""
    why: str
    unchecked: bool


Parts = List[Tuple[str, Any]]  # (name, dense tensor), in a stable order

# element types met, and whether the digest has a code for them
_known_dtypes: dict = {}


def dense_parts(name: str, t: Any) -> Union[Parts, Left]:
    """The dense tensors to digest for tensor t, watched as `name`: [(name,
    t)] for a plain dense tensor, several (name, part) for a compound one,
    or Left when t cannot be digested. Never raises for the tensor's own
    sake: a subclass whose methods raise (no data pointer, no device) is
    Left, so one tensor never switches the check off."""
    try:
        return _parts(name, t, 0)
    except Exception as e:  # the tensor's (or its subclass's) own code
        return Left(f"{type(t).__name__} could not be read: "
                    f"{type(e).__name__}: {e}", True)


def _parts(name: str, t: Any, depth: int) -> Union[Parts, Left]:
    if _is_wrapper(t):
        if depth >= 4:
            return Left("tensor subclasses nested more than 4 deep are not "
                        "digested", True)
        if hasattr(t, "trigger_wait"):
            # a functional collective's result not waited for yet
            # (AsyncCollectiveTensor): its bytes are final only after the
            # wait, which reading it through torch would do too
            t = t.trigger_wait()
            return _parts(name, t, depth + 1)
        return _wrapper_parts(name, t, depth)
    if t.is_meta:
        return Left("a meta tensor has no data", False)
    if t.is_quantized:
        return _quantized_parts(name, t)
    if t.layout in _SPARSE:
        return _sparse_dense(name, t)
    if t.layout != torch.strided:
        return Left(f"a {t.layout} tensor is not digested", True)
    if getattr(t, "is_nested", False):
        return Left("a nested tensor of the strided layout is not digested",
                    True)
    why = _unreadable(t)
    if why is not None:
        return why
    return [(name, t)]


def _unreadable(t: Any) -> Optional[Left]:
    """Why dense tensor t cannot be hashed where it is, or None."""
    known = _known_dtypes.get(t.dtype)
    if known is None:
        try:
            dtype_code(t.dtype)
            known = _known_dtypes[t.dtype] = ""
        except DigestError:
            known = _known_dtypes[t.dtype] = \
                f"its element type {t.dtype} has no digest code"
    if known:
        return Left(known, True)
    device = t.device.type
    if device == "cuda" and not _core.gpu_built():
        return Left("this vqcheck was built without CUDA, so CUDA tensors "
                    "are not digested (reinstall it where nvcc is present)",
                    True)
    if device not in ("cpu", "cuda"):
        return Left(f"tensors on {t.device} are not digested", True)
    if t.numel() > 0 and t.data_ptr() == 0:
        if type(t) in (torch.Tensor, torch.nn.Parameter):
            return Left("its storage is freed: no data here", False)
        return Left(f"{type(t).__name__} has no data here (data_ptr() is "
                    "0) and does not say what it wraps "
                    "(__tensor_flatten__)", True)
    return None


def _is_wrapper(t: Any) -> bool:
    """Whether t is a subclass that wraps other tensors and says which
    (torch's traceable wrapper subclass protocol)."""
    return type(t) not in (torch.Tensor, torch.nn.Parameter) and \
        hasattr(t, "__tensor_flatten__") and \
        hasattr(type(t), "__tensor_unflatten__")


def _wrapper_parts(name: str, t: Any, depth: int) -> Union[Parts, Left]:
    try:
        attrs, _ = t.__tensor_flatten__()
    except Exception as e:  # the subclass's own code
        return Left(f"{type(t).__name__}.__tensor_flatten__() raised "
                    f"{type(e).__name__}: {e}", True)
    out: Parts = []
    for attr in attrs:
        inner = getattr(t, attr, None)
        if not isinstance(inner, torch.Tensor):
            return Left(f"{type(t).__name__}.__tensor_flatten__() names "
                        f"'{attr}', which is not a tensor", True)
        got = _parts(f"{name}:{attr}", inner, depth + 1)
        if isinstance(got, Left):
            return Left(f"{type(t).__name__}'s '{attr}': {got.why}",
                        got.unchecked)
        out.extend(got)
    if not out:
        return Left(f"{type(t).__name__} wraps no tensor", True)
    return out


def _quantized_parts(name: str, t: Any) -> Union[Parts, Left]:
    scheme = t.qscheme()
    values = t.int_repr()
    if scheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        params = [("scale", torch.tensor(t.q_scale(), dtype=torch.float64)),
                  ("zero_point", torch.tensor(t.q_zero_point(),
                                              dtype=torch.int64))]
    elif scheme in (torch.per_channel_affine, torch.per_channel_symmetric,
                    torch.per_channel_affine_float_qparams):
        params = [("scales", t.q_per_channel_scales()),
                  ("zero_points", t.q_per_channel_zero_points()),
                  ("axis", torch.tensor(t.q_per_channel_axis(),
                                        dtype=torch.int64))]
    else:
        return Left(f"quantized tensors of scheme {scheme} are not "
                    "digested", True)
    out: Parts = [(f"{name}:int_repr", values)]
    for label, p in params:
        out.append((f"{name}:{label}", p.detach()))
    for part, p in out:
        why = _unreadable(p)
        if why is not None:
            return Left(f"its {part.rpartition(':')[2]}: {why.why}",
                        why.unchecked)
    return out


def _sparse_dense(name: str, t: Any) -> Union[Parts, Left]:
    nbytes = t.numel() * t.element_size()
    if nbytes > DENSE_MAX_BYTES:
        return Left(f"a {t.layout} tensor of {nbytes >> 20} MiB dense is not "
                    f"digested (the cap is {DENSE_MAX_BYTES >> 20} MiB)", True)
    dense = t.detach().to_dense()
    why = _unreadable(dense)
    if why is not None:
        return why
    return [(name, dense)]
