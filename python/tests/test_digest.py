"""vqcheck.digest against the README's definition, computed here in pure
Python with the xxhash package (the README's own snippet), for every element
type torch 1.13 and numpy have, for strided views of every kind, and for
buffers; plus the errors, and what `import vqcheck` must not do."""
import ctypes
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch
import xxhash

import vqcheck

# The codes the README and docs/trace-format.md publish: part of every digest.
CODES = {"float32": 1, "float64": 2, "int32": 3, "int64": 4, "uint8": 5,
         "bool": 6, "int8": 7, "int16": 8, "float16": 9, "bfloat16": 10,
         "complex64": 11, "complex128": 12, "float8_e4m3fn": 13,
         "float8_e5m2": 14, "float8_e4m3fnuz": 15, "float8_e5m2fnuz": 16,
         "uint16": 17, "uint32": 18, "uint64": 19, "complex32": 20,
         "float8_e8m0fnu": 21, "float4_e2m1fn_x2": 22}


def readme_digest(buf, dtype_code, shape):
    """README "The tensor digest", verbatim."""
    C = 65536
    leaves = b"".join(struct.pack("<Q", xxhash.xxh3_64_intdigest(buf[o:o + C]))
                      for o in range(0, max(len(buf), 1), C))
    header = b"VQCD" + bytes([1, dtype_code, len(shape), 0]) + \
        struct.pack(f"<{len(shape)}q", *shape)
    return xxhash.xxh3_64_intdigest(header + leaves)


def torch_bytes(t):
    """Row-major bytes of a tensor, taken through a contiguous copy's raw
    memory (independent of vqcheck's strided walk)."""
    c = t.resolve_conj().resolve_neg().contiguous()
    return ctypes.string_at(c.data_ptr(), c.numel() * c.element_size())


def expected(t):
    name = str(t.dtype)[len("torch."):]
    return readme_digest(torch_bytes(t), CODES[name], tuple(t.shape))


def random_tensor(dtype, shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        real = torch.randn(shape, generator=g, dtype=torch.float64)
        if dtype.is_complex:
            imag = torch.randn(shape, generator=g, dtype=torch.float64)
            return torch.complex(real, imag).to(dtype)
        return real.to(dtype)
    info = torch.iinfo(dtype)
    low, high = max(info.min, -1000), min(info.max, 1000)
    return torch.randint(low, high, shape, generator=g, dtype=dtype)


TORCH_TYPES = [torch.float32, torch.float64, torch.int32, torch.int64,
               torch.uint8, torch.bool, torch.int8, torch.int16,
               torch.float16, torch.bfloat16, torch.complex64,
               torch.complex128]


def test_codes_are_the_published_ones():
    assert vqcheck.dtype_names() == tuple(CODES)
    for name, code in CODES.items():
        assert vqcheck.dtype_code(name) == code
    assert vqcheck.dtype_code(torch.bfloat16) == 10
    assert vqcheck.dtype_code(np.dtype("complex64")) == 11
    assert vqcheck.dtype_code(np.float16) == 9


@pytest.mark.parametrize("dtype", TORCH_TYPES, ids=str)
def test_every_torch_type_equals_the_readme_formula(dtype):
    # 3 x 70001 elements: several 64 KiB leaves and a ragged last one
    t = random_tensor(dtype, (3, 70001))
    assert vqcheck.digest(t) == expected(t)
    small = random_tensor(dtype, (5,), seed=1)
    assert vqcheck.digest(small) == expected(small)


def test_classic_types_equal_numpy_and_bytes():
    for name in ["float32", "float64", "int32", "int64", "uint8"]:
        a = np.arange(24, dtype=name).reshape(2, 3, 4)
        want = readme_digest(a.tobytes(), CODES[name], a.shape)
        assert vqcheck.digest(a) == want
        assert vqcheck.digest(torch.from_numpy(a)) == want
        assert vqcheck.digest(a.tobytes(), dtype=name, shape=a.shape) == want
        assert vqcheck.digest(bytearray(a.tobytes()), dtype=name,
                              shape=(2, 3, 4)) == want


def test_complex32_chalf():
    t = torch.zeros(7, dtype=torch.complex32)
    assert vqcheck.digest(t) == readme_digest(bytes(28), 20, (7,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool,
                                   torch.complex128], ids=str)
def test_strided_views_digest_their_row_major_contents(dtype):
    base = random_tensor(dtype, (6, 40, 50), seed=3)
    views = {
        "transpose": base.transpose(0, 2),
        "permute": base.permute(1, 2, 0),
        "step slice": base[:, ::3, 1::7],
        "narrow + offset": base[2:5, 10:30, 5:45],
        "expand (stride 0)": base[:, :1, :].expand(6, 9, 50),
        "unsqueeze + expand": base[0, 0].unsqueeze(0).expand(4, 50),
        "scalar": base[1, 2, 3],
        "empty": base[:, 5:5, :],
        "column": base[:, :, 7],
    }
    for what, v in views.items():
        assert vqcheck.digest(v) == expected(v), what
        assert vqcheck.digest(v) == vqcheck.digest(v.contiguous()), what


def test_lazy_conjugate_and_negative_views_digest_their_values():
    z = random_tensor(torch.complex64, (4, 5), seed=4)
    c = z.conj()
    assert c.is_conj()
    assert vqcheck.digest(c) == vqcheck.digest(c.resolve_conj())
    assert vqcheck.digest(c) != vqcheck.digest(z)
    n = torch._neg_view(z)
    assert n.is_neg()
    assert vqcheck.digest(n) == vqcheck.digest(-z)


def test_numpy_views_reversed_big_endian_and_other_types():
    a = np.random.default_rng(5).standard_normal((30, 70)).astype(np.float32)
    for v in [a[::-1], a[:, ::-2], a.T, a[5:9, 3:60:4], a[::-1, ::-1].T]:
        want = readme_digest(np.ascontiguousarray(v).tobytes(), 1, v.shape)
        assert vqcheck.digest(v) == want
    big = a.astype(">f4")
    assert vqcheck.digest(big) == vqcheck.digest(a)
    for name in ["bool", "int8", "int16", "float16", "complex64", "uint16",
                 "uint32", "uint64"]:
        b = (a * 10).astype(name)
        assert vqcheck.digest(b) == readme_digest(b.tobytes(), CODES[name],
                                                  b.shape), name


def test_large_tensors_use_threads_and_agree():
    t = random_tensor(torch.float32, (9, 1 << 20), seed=6)  # 36 MiB
    want = expected(t)
    assert vqcheck.digest(t) == want
    assert vqcheck.digest(t, threads=1) == want
    assert vqcheck.digest(t, threads=3) == want
    assert vqcheck.digest(t.numpy(), threads=2) == want


def test_shape_and_type_are_part_of_the_digest():
    t = torch.arange(12, dtype=torch.int32)
    assert vqcheck.digest(t) != vqcheck.digest(t.view(3, 4))
    assert vqcheck.digest(t.float()) != vqcheck.digest(t)
    assert vqcheck.digest(t.view(torch.float32)) != vqcheck.digest(t)


def test_undigestible_tensors_are_clear_errors_naming_the_tensor():
    q = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
    with pytest.raises(vqcheck.DigestError, match="tensor 'codebook.q'"):
        vqcheck.digest(q, name="codebook.q")
    s = torch.randn(3, 3).to_sparse()
    with pytest.raises(vqcheck.DigestError, match="to_dense"):
        vqcheck.digest(s, name="emb")
    with pytest.raises(vqcheck.DigestError, match="meta"):
        vqcheck.digest(torch.empty(3, device="meta"))
    with pytest.raises(vqcheck.DigestError, match="object cannot be digested"):
        vqcheck.digest(np.array([object()]), name="x")
    with pytest.raises(vqcheck.DigestError, match="at most 8"):
        vqcheck.digest(torch.zeros([1] * 9))
    with pytest.raises(vqcheck.DigestError, match="knows float32"):
        vqcheck.dtype_code("float128")
    with pytest.raises(vqcheck.DigestError, match="needs 16"):
        vqcheck.digest(b"12345678", dtype="float32", shape=(4,))
    with pytest.raises(TypeError, match="needs dtype="):
        vqcheck.digest(b"1234")
    with pytest.raises(TypeError, match="got int"):
        vqcheck.digest(3)
    with pytest.raises(TypeError, match="carries its own"):
        vqcheck.digest(torch.zeros(2), dtype="float32")
    with pytest.raises(ValueError, match="threads=0"):
        vqcheck.digest(torch.zeros(2), threads=0)
    # never a KeyError, whatever the type
    for dtype in [torch.quint8, torch.qint32]:
        with pytest.raises(vqcheck.DigestError):
            vqcheck.digest(torch.quantize_per_tensor(torch.randn(2), 1.0, 0,
                                                     dtype))


def test_cuda_tensors_digest_on_the_device_or_skip():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch here (Debian's torch is "
                    "CPU-only): the device path is tested where one is lent")
    if not vqcheck._core.gpu_built():
        pytest.skip("this vqcheck was built without CUDA")
    t = random_tensor(torch.float32, (300, 1000), seed=8)
    d = t.cuda()
    assert vqcheck.digest(d) == vqcheck.digest(t)
    assert vqcheck.digest(d.t()) == vqcheck.digest(t.t())
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        e = d * 2
        assert vqcheck.digest(e) == vqcheck.digest(t * 2)


def test_import_has_no_side_effects_and_a_version(cli):
    code = ("import sys, vqcheck; "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "assert 'numpy' not in sys.modules, 'numpy imported'; "
            "print(vqcheck.__version__)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    version = p.stdout.strip()
    cli_version = subprocess.run([cli, "--version"], capture_output=True,
                                 text=True).stdout.split()[1]
    assert version == cli_version
    assert vqcheck.digest.__doc__ and "DigestError" in vqcheck.digest.__doc__


def test_flat_bytes_without_shape_are_one_dimensional():
    a = np.arange(6, dtype=np.float32)
    assert vqcheck.digest(a.tobytes(), dtype="float32") == vqcheck.digest(a)
    with pytest.raises(vqcheck.DigestError, match="whole number"):
        vqcheck.digest(b"12345", dtype="float32")
    m = memoryview(a).cast("B").cast("f", (2, 3))
    assert vqcheck.digest(m, dtype="float32") == vqcheck.digest(a.reshape(2, 3))
