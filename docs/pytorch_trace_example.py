# A PyTorch DDP job writing vqcheck-trace/1 digest traces (docs/trace-format.md)
# without installing vqcheck: the digest (README "The tensor digest") by hand,
# with the xxhash package. `pip install .` and vqcheck.torch.watch() do this in
# C, threaded and on the GPU (docs/pytorch.md); this file is the no-install way.
# Run: torchrun --nproc_per_node 2 pytorch_trace_example.py; vqcheck compare traces
# (Debian 12's torchrun fails on Python 3.11: set RANK, WORLD_SIZE, MASTER_ADDR and
# MASTER_PORT per process yourself, as in docs/pytorch.md.)
import json, os, struct, xxhash

# The digest's dtype codes (python/vqcheck/_digest.py, lib digest.h).
CODES = {"float32": 1, "float64": 2, "int32": 3, "int64": 4, "uint8": 5, "bool": 6,
         "int8": 7, "int16": 8, "float16": 9, "bfloat16": 10, "complex64": 11,
         "complex128": 12, "float8_e4m3fn": 13, "float8_e5m2": 14,
         "float8_e4m3fnuz": 15, "float8_e5m2fnuz": 16, "uint16": 17, "uint32": 18,
         "uint64": 19, "complex32": 20, "float8_e8m0fnu": 21, "float4_e2m1fn_x2": 22}

def vqc_digest(buf, dtype_code: int, shape: tuple) -> int:  # README "The tensor digest"
    C = 65536
    mv = memoryview(buf).cast("B")  # any buffer; slices of it are views, not copies
    leaves = b"".join(struct.pack("<Q", xxhash.xxh3_64_intdigest(mv[o:o + C]))
                      for o in range(0, max(len(mv), 1), C))
    header = b"VQCD" + bytes([1, dtype_code, len(shape), 0]) + struct.pack(f"<{len(shape)}q", *shape)
    return xxhash.xxh3_64_intdigest(header + leaves)

def tensor_bytes(t) -> bytes:  # row-major, little-endian host bytes, exactly as in memory
    a = t.detach().cpu().contiguous()
    try:
        a = a.numpy()
    except TypeError:  # numpy cannot hold bfloat16, complex32, float8_*: take the bits
        import torch   # as integers of the same size (a view, nothing converted)
        a = a.view({1: torch.uint8, 2: torch.int16, 4: torch.int32,
                    8: torch.int64}[a.element_size()]).numpy()
    return a.tobytes()  # the one copy; vqc_digest hashes it without another

def trace_line(rank: int, step: int, name: str, t) -> str:
    dtype = str(t.dtype).replace("torch.", "")
    if dtype not in CODES:
        raise ValueError(f"tensor '{name}': dtype {dtype} has no digest code "
                         f"(known: {', '.join(CODES)})")
    digest = vqc_digest(tensor_bytes(t), CODES[dtype], tuple(t.shape))
    return json.dumps({"schema": "vqcheck-trace/1", "rank": rank, "step": step, "tensor": name,
                       "dtype": dtype, "shape": list(t.shape), "digest_algo": "vqc-xxh3-tree-1",
                       "digest": f"{digest:016x}"}) + "\n"

if __name__ == "__main__":
    import torch, torch.distributed as dist
    dist.init_process_group("gloo"); rank = dist.get_rank(); torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1); os.makedirs("traces", exist_ok=True)
    with open(f"traces/rank-{rank}.trace.jsonl", "w", buffering=1) as f:  # line-buffered
        for step in range(10):
            opt.zero_grad(); model(torch.randn(8, 16) + rank).square().mean().backward(); opt.step()
            for name, p in model.module.state_dict().items():  # replicated state, same order on every rank
                f.write(trace_line(rank, step, name, p))
