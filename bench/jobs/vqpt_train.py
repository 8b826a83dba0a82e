"""vqpt_train.py: the PyTorch side of bench_quantizers' VQ and RVQ rows.

bench_quantizers starts this with the python of VQC_BENCH_PYTHON (the torch
2.x venv: scripts/torch-env.sh) and vector-quantize-pytorch on PYTHONPATH
(build-py/thirdparty/vector-quantize-pytorch-1.32.0 or VQC_BENCH_VQPT), and
talks to it over stdin/stdout:

    python vqpt_train.py DIR B N D C Q SEEDS_VALIDATE SEEDS_TIME

DIR holds the bench's inputs, raw little-endian float32 in C order:
    e0.bin  (C, D)     the starting codebook of vq_ema and vq_expiry
    x.bin   (B, N, D)  batch of vq_ema and vq_kmeans (rows near e0's codes)
    xe.bin  (B, N, D)  batch of vq_expiry (rows near e0's first 3C/4 codes)
    er.bin  (Q, C, D)  the starting codebooks of the RVQ layers
    xr.bin  (B, N, D)  batch of the RVQ
SEEDS_VALIDATE ("s0,s1") are the quantize-dropout seeds of the two RVQ
validation steps, SEEDS_TIME ("t0,t1,...") those of the timed RVQ
forwards of each "t rvq K" line, in turn from t0 (each is passed as
rand_quantize_dropout_fixed_seed, so that both sides run the same layers:
see bench_quantizers.c, "VQ and RVQ").

The modules, all in train mode, with the library's defaults otherwise:
    vq_ema     VectorQuantize(D, C, decay=0.8, eps=1e-5)
    vq_kmeans  the same with kmeans_init=True, kmeans_iters=10
    vq_expiry  the same as vq_ema with threshold_ema_dead_code=2
    rvq        ResidualVQ(dim=D, num_quantizers=Q, codebook_size=C,
               quantize_dropout=True, decay=0.8, eps=1e-5)
Each starts from a fresh state (cluster_size 1, embed_avg = the codebook;
for k-means an uninitialised zero codebook), as bench_quantizers' does.

1. Validation: one training forward of each VQ and two consecutive ones of
   the RVQ (seeds s0, s1), outputs written to DIR/out_<case>_<what>.bin
   (indices int64, everything else float32): indices, quantized, loss(es),
   and the state after the forward (embed, cluster_size, embed_avg; stacked
   over layers for the RVQ, with a _<step> suffix). The library's random
   row draws (k-means initial rows, dead-code replacement rows) are
   recorded in out_vq_kmeans_rows.bin and out_vq_expiry_rows.bin, so the
   bench can make the same choices: the draws go through the library's own
   sample_vectors, given the rows with their row number appended as one
   more column, which the draw carries along (same torch RNG calls).
2. Prints "ready <what ran>".
3. On each "t CASE K" line: K times, restore the fresh state (not timed),
   then time one training forward with the thread's CPU clock; prints the
   sum of the K times in seconds. Any other line ends it.
x never requires grad (as the bench's C forward, which builds no graph), so
no straight-through or rotation-trick output is computed on either side.
"""
import sys
import time


def main():
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure is a reason
        print('novqpt no torch:', repr(e).replace('\n', ' '), flush=True)
        return 0
    try:
        from vector_quantize_pytorch import ResidualVQ, VectorQuantize
        import vector_quantize_pytorch.vector_quantize_pytorch as vqmod
        from importlib.metadata import version
        vqpt_version = version('vector_quantize_pytorch')
    except Exception as e:  # noqa: BLE001
        print('novqpt vector_quantize_pytorch does not import:',
              repr(e).replace('\n', ' '), flush=True)
        return 0
    torch.set_num_threads(1)
    torch.manual_seed(0)
    d = sys.argv[1]
    B, N, D, C, Q = (int(v) for v in sys.argv[2:7])
    seeds_validate = [int(v) for v in sys.argv[7].split(',')]
    seeds_time = [int(v) for v in sys.argv[8].split(',')]

    def load(name, *shape):
        n = 1
        for s in shape:
            n *= s
        return torch.from_file(f'{d}/{name}.bin', shared=False, size=n,
                               dtype=torch.float32).view(*shape).clone()

    def save(name, t):
        t.detach().contiguous().numpy().tofile(f'{d}/out_{name}.bin')

    e0 = load('e0', C, D)
    x = load('x', B, N, D)
    xe = load('xe', B, N, D)
    er = load('er', Q, C, D)
    xr = load('xr', B, N, D)

    common = dict(dim=D, codebook_size=C, decay=0.8, eps=1e-5,
                  commitment_weight=1.0)
    mods = {
        'vq_ema': VectorQuantize(**common),
        'vq_kmeans': VectorQuantize(**common, kmeans_init=True,
                                    kmeans_iters=10),
        'vq_expiry': VectorQuantize(**common, threshold_ema_dead_code=2),
        'rvq': ResidualVQ(dim=D, num_quantizers=Q, codebook_size=C,
                          quantize_dropout=True, decay=0.8, eps=1e-5,
                          commitment_weight=1.0),
    }
    inputs = {'vq_ema': x, 'vq_kmeans': x, 'vq_expiry': xe, 'rvq': xr}

    def fresh(cb, embed):
        """A fresh codebook state: cluster_size 1, embed_avg = embed."""
        cb.embed.copy_(embed.view_as(cb.embed))
        cb.embed_avg.copy_(embed.view_as(cb.embed_avg))
        cb.cluster_size.fill_(1.0)

    with torch.no_grad():
        fresh(mods['vq_ema']._codebook, e0)
        fresh(mods['vq_expiry']._codebook, e0)
        km = mods['vq_kmeans']._codebook
        assert not bool(km.initted) and not km.embed.any()
        for l, layer in enumerate(mods['rvq'].layers):
            fresh(layer._codebook, er[l])
    for m in mods.values():
        m.train()
    snapshot = {k: [b.clone() for b in m.buffers()] for k, m in mods.items()}

    def restore(k):
        with torch.no_grad():
            for b, s in zip(mods[k].buffers(), snapshot[k]):
                b.copy_(s)

    def state(cbs):
        return [torch.stack([getattr(cb, n).detach()[0] for cb in cbs])
                for n in ('embed', 'cluster_size', 'embed_avg')]

    # The library's draws, recorded: sample_vectors(samples, num) sees the
    # rows with their number as one more column and draws as it always does.
    drawn = []
    real_sample_vectors = vqmod.sample_vectors

    def recording_sample_vectors(samples, num):
        ids = torch.arange(samples.shape[0], dtype=samples.dtype,
                           device=samples.device)
        out = real_sample_vectors(torch.cat((samples, ids[:, None]), 1), num)
        drawn.append(out[:, -1].to(torch.int64))
        return out[:, :-1]

    for k in ('vq_ema', 'vq_kmeans', 'vq_expiry'):
        drawn.clear()
        vqmod.sample_vectors = recording_sample_vectors
        try:
            q, idx, loss = mods[k](inputs[k])
        finally:
            vqmod.sample_vectors = real_sample_vectors
        save(f'{k}_indices', idx.to(torch.int64))
        save(f'{k}_quantized', q)
        save(f'{k}_loss', loss.reshape(1))
        embed, cs, avg = state([mods[k]._codebook])
        save(f'{k}_embed', embed)
        save(f'{k}_cluster_size', cs)
        save(f'{k}_embed_avg', avg)
        if k != 'vq_ema':
            rows = (torch.cat(drawn) if drawn
                    else torch.zeros(0, dtype=torch.int64))
            save(f'{k}_rows', rows)
    for s, seed in enumerate(seeds_validate):
        q, idx, losses = mods['rvq'](xr, rand_quantize_dropout_fixed_seed=seed)
        save(f'rvq_indices_{s}', idx.to(torch.int64))
        save(f'rvq_quantized_{s}', q)
        save(f'rvq_losses_{s}', losses.reshape(Q))
        embed, cs, avg = state([l._codebook for l in mods['rvq'].layers])
        save(f'rvq_embed_{s}', embed)
        save(f'rvq_cluster_size_{s}', cs)
        save(f'rvq_embed_avg_{s}', avg)

    print('ready', f'vector_quantize_pytorch {vqpt_version}',
          f'(torch {torch.__version__})', flush=True)
    for line in sys.stdin:
        w = line.split()
        if len(w) != 3 or w[0] != 't' or w[1] not in mods:
            break
        k, total = w[1], 0.0
        for j in range(int(w[2])):
            restore(k)
            if k == 'rvq':
                seed = seeds_time[j % len(seeds_time)]
                c0 = time.thread_time()
                mods[k](xr, rand_quantize_dropout_fixed_seed=seed)
            else:
                c0 = time.thread_time()
                mods[k](inputs[k])
            total += time.thread_time() - c0
        print(total, flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
