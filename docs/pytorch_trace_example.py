# A PyTorch DDP job writing vqcheck-trace/1 digest traces (docs/trace-format.md).
# Run: torchrun --nproc-per-node 2 pytorch_trace_example.py; vqcheck compare traces
import json, os, struct, xxhash

CODES = {"float32": 1, "float64": 2, "int32": 3, "int64": 4, "uint8": 5}

def vqc_digest(buf: bytes, dtype_code: int, shape: tuple) -> int:  # README "The tensor digest"
    C = 65536
    leaves = b"".join(struct.pack("<Q", xxhash.xxh3_64_intdigest(buf[o:o + C]))
                      for o in range(0, max(len(buf), 1), C))
    header = b"VQCD" + bytes([1, dtype_code, len(shape), 0]) + struct.pack(f"<{len(shape)}q", *shape)
    return xxhash.xxh3_64_intdigest(header + leaves)

def trace_line(rank: int, step: int, name: str, t) -> str:  # t: a tensor of a dtype in CODES
    dtype = str(t.dtype).replace("torch.", "")
    buf = t.detach().cpu().contiguous().numpy().tobytes()  # row-major, little-endian host
    return json.dumps({"schema": "vqcheck-trace/1", "rank": rank, "step": step, "tensor": name,
                       "dtype": dtype, "shape": list(t.shape), "digest_algo": "vqc-xxh3-tree-1",
                       "digest": f"{vqc_digest(buf, CODES[dtype], tuple(t.shape)):016x}"}) + "\n"

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
