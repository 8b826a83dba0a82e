"""bench_watch.py: what vqcheck.torch.watch costs a PyTorch training step, and
how fast vqcheck.digest runs from Python compared with the C library.

Run by hand (never a timed test):

    build-py/venv/bin/python bench/bench_watch.py [--reps N] [--steps N]
                                                  [--c-bench PATH | --no-c-bench]

The digest is meant to run on every replicated tensor at every step, so the
yardstick is the training step itself: watching at interval 1 should cost at
most 5% of a step (goal <= 1.05x for SGD).

What it does:
  1. validates, before anything is timed, and exits 1 on any mismatch:
       - vqcheck.digest of every tensor of the model's state (two weights of
         48 MiB each, the biases, Adam's exp_avg / exp_avg_sq / step) equals a
         pure-Python reference of the README formula ("The tensor digest")
         computed with the xxhash package, and threads = 1, 2, 3 agree on the
         largest tensor;
       - the lines watch() writes for 3 Adam steps are exactly the expected
         ones: the same step, tensor names (parameters, then buffers, then
         "<parameter>.<state key>"), dtype, shape, and a digest equal to
         vqcheck.digest of that tensor taken right after that step;
       - the 256 MiB tensor of part 3 digests alike as a torch tensor and as
         a numpy array, with default, 1 and 2 threads, and equals the
         reference.
  2. step-time overhead: a 2-layer MLP, Linear(4096, 3072) -> ReLU ->
     Linear(3072, 4096) (25,172,992 parameters, float32, CPU), batch 64, MSE
     loss; one step = zero_grad, forward, loss, backward, optimizer.step. For
     SGD and then Adam (which adds two state tensors per parameter, 3x the
     bytes): a warm-up pair, then --reps repetitions of (A) --steps steps
     without watch and (B) --steps steps with watch(interval=1) tracing into a
     temporary directory, INTERLEAVED A, B, A, B, ... so that load from other
     users of the machine falls on both alike. The watch is created before and
     closed after each timed B run (its first step opens the trace file, which
     is counted). Printed: median per-step time of A and of B (min-max),
     the ratio as the median of the per-pair ratios B_i / A_i (min-max;
     bench_stats.py's rule) beside the ratio of the medians, the bytes
     digested per step, and where B's extra time goes: in the B runs the
     bench times watch's own step() (called by the hooked optimizer.step)
     and, inside it, the digests, by wrapping both at run time (a few
     perf_counter calls per step; vqcheck is not changed); "rest of the step"
     is B_i - (time inside watch)_i - A_i, the median over pairs, i.e. what
     watch costs the training step outside its own code (cache pollution,
     competition for the cores, or plain noise). Since the ratio of medians
     is at the mercy of a busy machine, the direct estimate 1 + (time inside
     watch) / (plain step) is printed beside it, and the ratio's verdict is
     marked unreliable when the per-pair ratios span more than twice the 5%
     margin.
  3. digest throughput from Python: vqcheck.digest of a 256 MiB contiguous
     float32 torch tensor and of the same memory as a numpy array, with the
     default threads and with threads=1 and threads=2, interleaved over
     --reps rounds; GB/s = 1e9 bytes/s, median and best. Every timed run is
     cold, as in bench_digest: a separate 512 MiB buffer is read right before
     it. Then build/bench/bench_digest (--c-bench) runs on the same 256 MiB
     and its digest lines, (b) 1 thread and (d) 2 threads, are parsed. The C
     bench reports the best of 7 cold runs, so the ratio Python / C is taken
     best against best (goal >= 0.8x); median / C best is printed beside it.

The machine (usable CPUs from sched_getaffinity, torch's intra-op threads,
versions) is printed first. With --json, one JSON object per figure
instead (bench_stats.py's keys; a failed validation is told on stderr).
Defaults (--reps 9 --steps 8) take about two minutes on a 2-core machine (a
0.2 s SGD step).

vqcheck.torch.watch digests on the training thread; the digest off that
thread is the bridge's (`vqcheck watch`), measured by bench_bridge.py.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import xxhash

import vqcheck
import vqcheck.torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_stats import MIN_REPS, figure, print_figure, ratios, \
    summarize  # noqa: E402

BENCH = "bench_watch"
# --json: figures only on stdout; the text report is not printed
_JSON = False


def say(*args, **kwargs) -> None:
    """The text report (not in --json mode)."""
    if not _JSON:
        print(*args, **kwargs)


def detail(*args) -> None:
    """What a failed validation found: on stderr, in either mode."""
    print(*args, file=sys.stderr)

MIB = 1 << 20
IN_FEATURES, HIDDEN, BATCH = 4096, 3072, 64
THROUGHPUT_MIB = 256
EVICT_MIB = 512
OVERHEAD_GOAL = 1.05
PY_VS_C_GOAL = 0.8
DEFAULT_C_BENCH = os.path.join("build", "bench", "bench_digest")

# README "The tensor digest": dtype codes of the types this bench meets.
REF_DTYPE_CODES = {torch.float32: 1, torch.float64: 2, torch.int32: 3,
                   torch.int64: 4, torch.uint8: 5}


# ---- the reference digest (README formula, pure Python + xxhash)


def ref_digest_bytes(buf: memoryview, dtype_code: int,
                     shape: Sequence[int]) -> int:
    chunk = 65536
    leaves = b"".join(
        struct.pack("<Q", xxhash.xxh3_64_intdigest(buf[o:o + chunk]))
        for o in range(0, max(len(buf), 1), chunk))
    header = (b"VQCD" + bytes([1, dtype_code, len(shape), 0]) +
              struct.pack(f"<{len(shape)}q", *shape))
    return xxhash.xxh3_64_intdigest(header + leaves)


def ref_digest(t: torch.Tensor) -> int:
    """The README digest of a CPU tensor from its row-major bytes (x86 is
    little-endian, so the in-memory bytes are the LE bytes)."""
    a = t.detach().contiguous().numpy().reshape(-1)
    return ref_digest_bytes(memoryview(a).cast("B"), REF_DTYPE_CODES[t.dtype],
                            tuple(t.shape))


# ---- the model and one step


def make_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(IN_FEATURES, HIDDEN),
                               torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, IN_FEATURES))


def make_optimizer(kind: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=1e-3)
    return torch.optim.Adam(model.parameters(), lr=1e-4)


def make_batch(seed: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(BATCH, IN_FEATURES, generator=g),
            torch.randn(BATCH, IN_FEATURES, generator=g))


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer,
               x: torch.Tensor, y: torch.Tensor) -> None:
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()


def watched_tensors(model: torch.nn.Module,
                    opt: Optional[torch.optim.Optimizer]
                    ) -> List[Tuple[str, torch.Tensor]]:
    """What watch() documents it digests, in its order: parameters, buffers,
    then "<parameter name>.<state key>" for each tensor of optimizer state."""
    out = list(model.named_parameters()) + list(model.named_buffers())
    if opt is not None:
        names = {id(p): n for n, p in model.named_parameters()}
        for group in opt.param_groups:
            for p in group["params"]:
                for key, value in opt.state.get(p, {}).items():
                    if torch.is_tensor(value):
                        out.append((f"{names[id(p)]}.{key}", value))
    return out


# ---- timing helpers


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


class Evictor:
    """Reads a separate 512 MiB buffer so the next timed run starts cold."""

    def __init__(self) -> None:
        self.buf = np.ones(EVICT_MIB * MIB // 8, dtype=np.uint64)
        self.sink = 0

    def __call__(self) -> None:
        self.sink ^= int(self.buf.sum())


def run_steps(model, opt, x, y, steps: int) -> float:
    """Seconds per step over `steps` steps."""
    t0 = time.perf_counter()
    for _ in range(steps):
        train_step(model, opt, x, y)
    return (time.perf_counter() - t0) / steps


def run_watched(model, opt, x, y, steps: int,
                out: str) -> Tuple[float, float, float]:
    """Seconds per step with watch(interval=1), and of that the seconds per
    step spent in watch's own step() (called by the hooked optimizer.step)
    and, inside it, in vqcheck.digest. The bench wraps both at run time (a
    few perf_counter calls per step); vqcheck is not changed."""
    spent = {"watch": 0.0, "digest": 0.0}
    real_digest = vqcheck.torch.digest

    def timed_digest(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return real_digest(*args, **kwargs)
        finally:
            spent["digest"] += time.perf_counter() - t0

    w = vqcheck.torch.watch(model, opt, out=out, interval=1)
    real_step = w.step

    def timed_step():
        t0 = time.perf_counter()
        try:
            real_step()
        finally:
            spent["watch"] += time.perf_counter() - t0

    w.step = timed_step                      # the hook calls watch.step()
    vqcheck.torch.digest = timed_digest      # what Watch._write calls
    try:
        per_step = run_steps(model, opt, x, y, steps)
    finally:
        vqcheck.torch.digest = real_digest
        w.close()
    return per_step, spent["watch"] / steps, spent["digest"] / steps


# ---- 0. the machine


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def default_threads(nbytes: int) -> int:
    """vqcheck.digest's documented default: 1 below 8 MiB, else one thread
    per 4 MiB, at most 8 and the usable CPUs."""
    if nbytes < 8 * MIB:
        return 1
    return max(1, min(8, usable_cpus(), nbytes // (4 * MIB)))


def print_machine() -> None:
    say("bench_watch: vqcheck.torch.watch step overhead and vqcheck.digest "
        "throughput from Python")
    say(f"machine: {cpu_model()}; usable CPUs (sched_getaffinity) "
        f"{usable_cpus()} of {os.cpu_count()}; torch.get_num_threads() "
        f"{torch.get_num_threads()}")
    say(f"versions: python {platform.python_version()}, torch "
        f"{torch.__version__}, numpy {np.__version__}, vqcheck "
        f"{vqcheck.__version__}, xxhash {xxhash.VERSION}")


# ---- 1. validation


def validate_reference(model, opt) -> bool:
    tensors = watched_tensors(model, opt)
    ok = True
    for name, t in tensors:
        ours, ref = vqcheck.digest(t), ref_digest(t)
        if ours != ref:
            detail(f"validate: {name} {list(t.shape)}: vqcheck.digest "
                   f"{ours:016x} != reference {ref:016x}")
            ok = False
    name, big = max(tensors, key=lambda nt: nt[1].numel())
    by_threads = {n: vqcheck.digest(big, threads=n) for n in (1, 2, 3)}
    if len(set(by_threads.values())) != 1:
        detail(f"validate: {name}: threads 1/2/3 differ: {by_threads}")
        ok = False
    say(f"validate: vqcheck.digest == README reference (xxhash) for "
        f"{len(tensors)} tensors, largest {name} {list(big.shape)} "
        f"({big.numel() * 4 / MIB:.0f} MiB) {vqcheck.digest(big):016x}, "
        f"threads 1/2/3 equal: {'ok' if ok else 'FAILED'}")
    return ok


def validate_watch(steps: int = 3) -> bool:
    """watch()'s trace for `steps` Adam steps against vqcheck.digest of each
    tensor taken right after that step; then the final state against the
    reference (validate_reference)."""
    model, x, y = make_model(), *make_batch()
    opt = make_optimizer("adam", model)
    expected = []
    with tempfile.TemporaryDirectory(prefix="bench_watch_") as out:
        w = vqcheck.torch.watch(model, opt, out=out, interval=1)
        for step in range(steps):
            train_step(model, opt, x, y)
            for name, t in watched_tensors(model, opt):
                expected.append((step, name, str(t.dtype).replace("torch.", ""),
                                 list(t.shape), f"{vqcheck.digest(t):016x}"))
        w.close()
        with open(w.path, encoding="utf-8") as f:
            got = [(d["step"], d["tensor"], d["dtype"], d["shape"], d["digest"])
                   for d in map(json.loads, f)]
    ok = got == expected
    if not ok:
        detail(f"validate: watch trace has {len(got)} lines, expected "
               f"{len(expected)}")
        for g, e in zip(got, expected):
            if g != e:
                detail(f"  first difference: got {g}\n  expected {e}")
                break
    say(f"validate: watch trace, {steps} Adam steps x "
        f"{len(expected) // steps} tensors: lines equal vqcheck.digest of "
        f"the tensors after each step: {'ok' if ok else 'FAILED'}")
    return ok and validate_reference(model, opt)


def validate_throughput_tensor(t: torch.Tensor) -> bool:
    a = t.numpy()
    ds = {("torch", n): vqcheck.digest(t, threads=n) for n in (None, 1, 2)}
    ds.update({("numpy", n): vqcheck.digest(a, threads=n) for n in (None, 1, 2)})
    ref = ref_digest(t)
    ok = set(ds.values()) == {ref}
    say(f"validate: {THROUGHPUT_MIB} MiB tensor, torch and numpy, default/1/2 "
        f"threads == reference {ref:016x}: {'ok' if ok else 'FAILED'}")
    if not ok:
        detail(f"  got {ds}")
    return ok


# ---- 2. step-time overhead


def overhead(kind: str, reps: int, steps: int, out: str) -> Dict[str, float]:
    model, (x, y) = make_model(), make_batch()
    opt = make_optimizer(kind, model)
    run_steps(model, opt, x, y, 2)           # warm-up, creates Adam's state
    run_watched(model, opt, x, y, 2, out)
    plain, watched, in_watch, in_digest = [], [], [], []
    for _ in range(reps):
        plain.append(run_steps(model, opt, x, y, steps))
        b, w, d = run_watched(model, opt, x, y, steps, out)
        watched.append(b)
        in_watch.append(w)
        in_digest.append(d)
    pair = ratios(watched, plain)
    tensors = watched_tensors(model, opt)
    return {"plain": median(plain), "watched": median(watched),
            "of_medians": median(watched) / median(plain),
            "ratio": pair.median, "rmin": pair.min, "rmax": pair.max,
            "runs": (plain, watched, in_watch, in_digest),
            "amin": min(plain), "amax": max(plain),
            "bmin": min(watched), "bmax": max(watched),
            "watch": median(in_watch), "digest": median(in_digest),
            # the with-watch step less the time inside watch, per pair,
            # against the plain step: what watch costs the rest of the step
            "rest": median([b - w - a for a, b, w in
                            zip(plain, watched, in_watch)]),
            "bytes": sum(t.numel() * t.element_size() for _, t in tensors),
            "ntensors": len(tensors)}


def print_overhead(kind: str, r: Dict[str, float]) -> None:
    direct = 1 + r["watch"] / r["plain"]
    say(f"{kind.upper():4s}  without {r['plain'] * 1e3:7.1f} ms "
        f"[{r['amin'] * 1e3:.1f}-{r['amax'] * 1e3:.1f}]   with "
        f"{r['watched'] * 1e3:7.1f} ms [{r['bmin'] * 1e3:.1f}-"
        f"{r['bmax'] * 1e3:.1f}]   ratio {r['ratio']:.3f}x "
        f"(median of per-pair ratios, {r['rmin']:.3f}-{r['rmax']:.3f}; "
        f"ratio of the medians {r['of_medians']:.3f}x)")
    if kind == "sgd":
        verdict = "met" if r["ratio"] <= OVERHEAD_GOAL else "NOT met"
        # A spread of per-pair ratios wider than twice the margin means the
        # machine's noise, not watch, decides the ratio.
        noisy = r["rmax"] - r["rmin"] > 2 * (OVERHEAD_GOAL - 1)
        say(f"      goal ratio <= {OVERHEAD_GOAL:.2f}x: {verdict}"
            + (f" (unreliable: per-pair ratios span "
               f"{r['rmax'] - r['rmin']:.2f}, more than twice the "
               f"{(OVERHEAD_GOAL - 1) * 100:.0f}% margin)" if noisy else "")
            + f"; direct estimate 1 + time inside watch / plain step = "
            f"{direct:.3f}x: {'met' if direct <= OVERHEAD_GOAL else 'NOT met'}")
    else:
        say(f"      (no goal: 3x the bytes of SGD); direct estimate 1 + time "
            f"inside watch / plain step = {direct:.3f}x")
    say(f"      digested per step: {r['ntensors']} tensors, "
        f"{r['bytes'] / 1e6:.1f} MB; inside watch per step: "
        f"{r['watch'] * 1e3:.1f} ms ({r['watch'] / r['plain'] * 100:.1f}% "
        f"of the plain step), of which digests {r['digest'] * 1e3:.1f} ms "
        f"({r['bytes'] / r['digest'] / 1e9:.1f} GB/s, "
        f"{r['digest'] / r['plain'] * 100:.1f}% of the step); rest of the "
        f"step vs plain, per pair: {r['rest'] * 1e3:+.1f} ms")


# ---- 3. digest throughput


def throughput(t: torch.Tensor, reps: int) -> Dict[Tuple[str, str], List[float]]:
    """GB/s of each (form, threads) over `reps` interleaved cold runs."""
    evict = Evictor()
    a = t.numpy()
    configs = [(form, th) for th in (None, 1, 2) for form in ("torch", "numpy")]
    gbs: Dict[Tuple[str, str], List[float]] = {c: [] for c in configs}
    for _ in range(reps):
        for form, th in configs:
            obj = t if form == "torch" else a
            evict()
            t0 = time.perf_counter()
            vqcheck.digest(obj, threads=th)
            gbs[(form, th)].append(a.nbytes / (time.perf_counter() - t0) / 1e9)
    return gbs


def run_c_bench(path: str) -> Optional[Dict[int, float]]:
    try:
        proc = subprocess.run([path, str(THROUGHPUT_MIB)], capture_output=True,
                              text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        say(f"c bench: {path} did not run: {e}")
        return None
    if proc.returncode != 0:
        say(f"c bench: {path} exited {proc.returncode}:\n{proc.stdout}"
            f"{proc.stderr}")
        return None
    found = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"\((b|d)\)\s+digest,\s+(\d) threads?\s+([\d.]+) GB/s",
                     line)
        if m:
            found[int(m.group(2))] = float(m.group(3))
    if set(found) != {1, 2}:
        say(f"c bench: could not parse digest lines from:\n{proc.stdout}")
        return None
    return found


def print_throughput(gbs, c: Optional[Dict[int, float]], c_path: str) -> None:
    nbytes = THROUGHPUT_MIB * MIB
    say(f"digest of a {THROUGHPUT_MIB} MiB contiguous float32 tensor, cold "
        f"(a separate {EVICT_MIB} MiB buffer is read before every timed "
        f"run, as bench_digest does); GB/s = 1e9 B/s")
    for (form, th), xs in gbs.items():
        label = (f"default (= {default_threads(nbytes)})" if th is None
                 else str(th))
        n = default_threads(nbytes) if th is None else th
        line = (f"  {form:5s} threads {label:13s} median {median(xs):6.2f} "
                f"GB/s  best {max(xs):6.2f}  [min {min(xs):.2f}]")
        if c is not None and n in c:
            best_ratio = max(xs) / c[n]
            line += (f"   vs C {c[n]:.2f}: best/best {best_ratio:.2f}x "
                     f"(goal >= {PY_VS_C_GOAL}x: "
                     f"{'met' if best_ratio >= PY_VS_C_GOAL else 'NOT met'}), "
                     f"median/best {median(xs) / c[n]:.2f}x")
        say(line)
    if c is not None:
        say(f"  C: {c_path} {THROUGHPUT_MIB}: digest 1 thread {c[1]:.2f} "
            f"GB/s, 2 threads {c[2]:.2f} GB/s (best of 7 cold runs, run "
            f"right after the Python runs)")


# ---- main


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=9,
                   help="interleaved repetitions of each side (>= 7)")
    p.add_argument("--steps", type=int, default=8,
                   help="training steps per timed repetition")
    p.add_argument("--c-bench", default=None,
                   help=f"bench_digest to compare with (default "
                        f"{DEFAULT_C_BENCH} if it exists)")
    p.add_argument("--no-c-bench", action="store_true",
                   help="skip the comparison with the C bench")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per figure (bench_stats.py)")
    args = p.parse_args(argv)
    if args.reps < MIN_REPS:
        p.error(f"--reps must be at least {MIN_REPS}")
    if args.steps < 1:
        p.error("--steps must be at least 1")
    if args.c_bench is None and not args.no_c_bench and \
            os.path.exists(DEFAULT_C_BENCH):
        args.c_bench = DEFAULT_C_BENCH
    if args.no_c_bench:
        args.c_bench = None
    return args


def overhead_figures(kind: str, r: Dict) -> List[Dict]:
    plain, watched, in_watch, in_digest = ([x * 1e3 for x in xs]
                                           for xs in r["runs"])
    return [figure(BENCH, f"step_{kind}", "ms/step", summarize(watched),
                   baseline=summarize(plain), baseline_name="plain",
                   ratio=ratios(watched, plain)),
            figure(BENCH, f"inside_watch_{kind}", "ms/step",
                   summarize(in_watch)),
            figure(BENCH, f"digest_{kind}", "ms/step", summarize(in_digest))]


def throughput_figures(gbs, c: Optional[Dict[int, float]]) -> List[Dict]:
    out = []
    nbytes = THROUGHPUT_MIB * MIB
    for (form, th), xs in gbs.items():
        n = default_threads(nbytes) if th is None else th
        name = f"digest_{form}_{'default' if th is None else f'{th}t'}"
        if c is not None and n in c:
            # against the C bench's best of its own cold runs (one number)
            out.append(figure(BENCH, name, "GB/s", summarize(xs),
                              shape=f"{THROUGHPUT_MIB}MiB",
                              baseline=summarize([c[n]]),
                              baseline_name=f"c_bench_digest_{n}t_best",
                              ratio=summarize([x / c[n] for x in xs])))
        else:
            out.append(figure(BENCH, name, "GB/s", summarize(xs),
                              shape=f"{THROUGHPUT_MIB}MiB"))
    return out


def main(argv: Sequence[str]) -> int:
    global _JSON
    args = parse_args(argv)
    _JSON = args.json
    figures: List[Dict] = []
    t_start = time.perf_counter()
    print_machine()
    nparams = sum(p.numel() for p in make_model().parameters())
    say(f"model: Linear({IN_FEATURES}, {HIDDEN}) -> ReLU -> Linear({HIDDEN}, "
        f"{IN_FEATURES}), {nparams:,} parameters ({nparams * 4 / 1e6:.1f} MB "
        f"float32), batch {BATCH}, MSE, CPU")

    big = torch.empty(THROUGHPUT_MIB * MIB // 4).uniform_(-1, 1)
    if not (validate_watch() and validate_throughput_tensor(big)):
        print("bench_watch: validation FAILED; nothing timed",
              file=sys.stderr)
        return 1

    say(f"\nstep time, median per step over {args.reps} interleaved reps of "
        f"{args.steps} steps each side (after a warm-up); without / with "
        f"watch(interval=1) [min-max]")
    with tempfile.TemporaryDirectory(prefix="bench_watch_") as out:
        for kind in ("sgd", "adam"):
            r = overhead(kind, args.reps, args.steps, out)
            print_overhead(kind, r)
            figures += overhead_figures(kind, r)

    say()
    gbs = throughput(big, args.reps)
    c = run_c_bench(args.c_bench) if args.c_bench else None
    print_throughput(gbs, c, args.c_bench or "")
    figures += throughput_figures(gbs, c)
    say(f"\ntotal {time.perf_counter() - t_start:.0f} s")
    if args.json:
        for f in figures:
            print_figure(f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
