"""bench_bridge.py: what `vqcheck watch` costs an unmodified PyTorch job.

Run by hand (never a timed test), after scripts/python-env.sh:

    build-py/venv/bin/python bench/bench_bridge.py [--reps N] [--steps N]
                                                   [--calls N] [--json]

The bridge wraps every torch.distributed collective (a ledger line before
and after each, a call-site lookup, the lost-result checks) and digests the
model and optimizer state at every optimizer step. The yardstick is the
training step of an ordinary job: goal <= 1.05x at --interval 1.

What it does:
  1. validates, before anything is timed, and exits 1 on any mismatch: the
     job (bench/jobs/ddp_step.py, 2 gloo ranks) run plain and under
     `vqcheck watch --nproc 2` ends with the same loss, bit for bit (the
     bridge changes nothing the job computes); watch exits 0 with no
     finding; each rank's ledger (rank-<r>.live.jsonl) holds an entered and
     a done line for every Python-level collective the job makes (its
     barriers and the per-step loss all_reduce), the same sequence on both
     ranks; and the trace holds one line per step per state tensor.
  2. cost per collective: one process, a world-1 gloo group, --calls
     dist.all_reduce calls of one float, timed (A) without the bridge and
     (B) with it (PYTHONPATH=python/bridge, VQC_WATCH_DIR set), each in a
     fresh process, interleaved A, B, A, B, ... over --reps rounds. Printed:
     microseconds per call, median (min-max), the bridge's extra time per
     call, and the ledger bytes it wrote per call.
  3. job step time: the job's own timing of --steps steps after 5 warm-up
     steps (rank 0, between two barriers, so start-up is not counted), run
     (A) with the torchrun variables set by this script and under `vqcheck
     watch --nproc 2` at (B1) --interval 1 and (B10) --interval 10 (the
     digest every 10th step; the collectives and hooks at every step),
     interleaved A, B1, B10 over --reps rounds. Printed: median per-step
     time of each, the ratios of the medians, and the min-max of the
     per-pair ratios B_i / A_i.
With --json, one JSON object per figure instead (bench, figure, value, unit,
baseline, ratio where they apply).

Defaults (--reps 7 --steps 60 --calls 3000) take about three minutes on a
2-core machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "bench" / "jobs" / "ddp_step.py"
BRIDGE = ROOT / "python" / "bridge"
WARMUP = 5

PER_CALL = r"""
import datetime, os, sys, time
import torch, torch.distributed as dist
calls = int(sys.argv[1])
dist.init_process_group("gloo", rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=60))
t = torch.zeros(1)
for _ in range(200):
    dist.all_reduce(t)
start = time.perf_counter()
for _ in range(calls):
    dist.all_reduce(t)
print(time.perf_counter() - start)
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env() -> Dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1")
    env.pop("PYTHONPATH", None)
    env.pop("VQC_WATCH_DIR", None)
    return env


def fail(what: str) -> None:
    print(f"bench_bridge: validation failed: {what}", file=sys.stderr)
    sys.exit(1)


# ---- the job, plain and watched


def run_plain(steps: int, out: Path) -> float:
    """Two ranks with the torchrun variables; the job's seconds."""
    env = base_env()
    env.update(MASTER_PORT=str(free_port()), WORLD_SIZE="2",
               LOCAL_WORLD_SIZE="2")
    procs = []
    for rank in range(2):
        e = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen(
            [sys.executable, str(JOB), str(steps), str(WARMUP), str(out)],
            env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True))
    for p in procs:
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            fail(f"the plain job exited {p.returncode}: {err[-2000:]}")
    return json.loads(out.read_text())["seconds"]


def run_watched(cli: str, steps: int, out: Path, run_dir: Path,
                interval: int = 1) -> Tuple[float, int, str]:
    """The job under `vqcheck watch --nproc 2`: (seconds, exit code,
    stderr)."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    p = subprocess.run([cli, "watch", "--nproc", "2", "--interval",
                        str(interval),
                        "--quiet", "--out", str(run_dir), "--",
                        sys.executable, str(JOB), str(steps), str(WARMUP),
                        str(out)],
                       env=base_env(), capture_output=True, text=True,
                       timeout=600)
    seconds = json.loads(out.read_text())["seconds"] if out.exists() else 0
    return seconds, p.returncode, p.stderr


def validate(cli: str, tmp: Path) -> None:
    steps = 4
    plain_out, watched_out = tmp / "plain.json", tmp / "watched.json"
    run_plain(steps, plain_out)
    run_dir = tmp / "validate"
    _, code, err = run_watched(cli, steps, watched_out, run_dir)
    if code != 0:
        fail(f"vqcheck watch exited {code} on the clean job: {err[-2000:]}")
    run = json.loads((run_dir / "run.json").read_text())
    if run["findings"]:
        fail(f"findings on the clean job: {run['findings']}")
    a = json.loads(plain_out.read_text())["loss"]
    b = json.loads(watched_out.read_text())["loss"]
    if a != b:
        fail(f"the loss differs: plain {a!r}, watched {b!r}")
    calls = WARMUP + steps
    sequences = []
    for rank in range(2):
        lines = [json.loads(x) for x in
                 (run_dir / f"rank-{rank}.live.jsonl").read_text()
                 .splitlines()]
        ledger = [x for x in lines if "event" not in x]
        done = [(x["seq"], x["op"], x["count"], x["line"]) for x in ledger
                if x["state"] == "done"]
        entered = [x for x in ledger if x["state"] == "entered"]
        ops = [d[1] for d in done]
        expected = ["all_reduce"] * WARMUP + ["barrier"] + \
            ["all_reduce"] * steps + ["barrier"]
        if ops != expected or \
                len(entered) != len(done):
            fail(f"rank {rank}'s ledger: {len(entered)} entered, "
                 f"{len(done)} done, ops {ops}")
        sequences.append(done)
        trace = (run_dir / f"rank-{rank}.trace.jsonl").read_text()
        # 4 parameters + 4 momentum buffers per step.
        if len(trace.splitlines()) != 8 * calls:
            fail(f"rank {rank}'s trace has {len(trace.splitlines())} lines, "
                 f"expected {8 * calls}")
    if sequences[0] != sequences[1]:
        fail("the ranks' ledgers differ")


# ---- cost per collective


def per_call(calls: int, bridge: bool, tmp: Path) -> Tuple[float, int]:
    """Seconds per call, and ledger bytes written per call."""
    env = base_env()
    env["MASTER_PORT"] = str(free_port())
    out = tmp / "percall"
    if bridge:
        if out.exists():
            shutil.rmtree(out)
        env.update(PYTHONPATH=str(BRIDGE), VQC_WATCH_DIR=str(out))
    p = subprocess.run([sys.executable, "-c", PER_CALL, str(calls)],
                       env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        fail(f"the per-call loop exited {p.returncode}: {p.stderr[-2000:]}")
    written = 0
    if bridge:
        live = out / "rank-0.live.jsonl"
        if not live.exists():
            fail("the bridge wrote no ledger in the per-call loop")
        written = live.stat().st_size
    return float(p.stdout.strip()) / calls, written // (calls + 200)


def spread(xs: List[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--cli", default=str(Path(sys.executable).parent /
                                         "vqcheck"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not Path(args.cli).is_file():
        print(f"bench_bridge: no vqcheck CLI at {args.cli}: run "
              "scripts/python-env.sh, or give --cli", file=sys.stderr)
        sys.exit(2)
    import torch
    say = (lambda *a: None) if args.json else print
    say(f"machine: {len(os.sched_getaffinity(0))} usable CPUs, torch "
        f"{torch.__version__}, Python {sys.version.split()[0]}")
    figures = []
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as name:
        tmp = Path(name)
        validate(args.cli, tmp)
        say("validated: same loss plain and watched, clean run, ledgers "
            "and traces complete")

        a_call, b_call, written = [], [], 0
        for _ in range(args.reps):
            a_call.append(per_call(args.calls, False, tmp)[0] * 1e6)
            b, written = per_call(args.calls, True, tmp)
            b_call.append(b * 1e6)
        extra = statistics.median(b_call) - statistics.median(a_call)
        say(f"\nper collective ({args.calls} all_reduce of 1 float, world 1, "
            f"{args.reps} interleaved rounds), us/call median (min-max):")
        say(f"  plain        {spread(a_call)}")
        say(f"  bridge       {spread(b_call)}")
        say(f"  extra        {extra:.1f} us per call, {written} ledger bytes "
            "per call")
        figures.append({"bench": "bench_bridge", "figure": "per_collective",
                        "value": statistics.median(b_call), "unit": "us/call",
                        "baseline": statistics.median(a_call),
                        "ratio": statistics.median(b_call) /
                        statistics.median(a_call),
                        "extra_us": extra, "ledger_bytes": written,
                        "min": min(b_call), "max": max(b_call)})

        a_step: List[float] = []
        b_step: Dict[int, List[float]] = {1: [], 10: []}
        pairs: Dict[int, List[float]] = {1: [], 10: []}
        out = tmp / "job.json"
        for i in range(args.reps):
            a = run_plain(args.steps, out) / args.steps * 1e3
            a_step.append(a)
            for interval in (1, 10):
                b, code, err = run_watched(args.cli, args.steps, out,
                                           tmp / "watched", interval)
                if code != 0:
                    fail(f"vqcheck watch exited {code}: {err[-2000:]}")
                b = b / args.steps * 1e3
                b_step[interval].append(b)
                pairs[interval].append(b / a)
        say(f"\njob step (2 gloo ranks, DDP 1.05M parameters, batch 64, "
            f"{args.steps} steps, {args.reps} interleaved rounds), ms/step "
            "median (min-max):")
        say(f"  plain        {spread(a_step)}")
        for interval in (1, 10):
            ratio = statistics.median(b_step[interval]) / \
                statistics.median(a_step)
            p = pairs[interval]
            say(f"  interval {interval:<3} {spread(b_step[interval])}  "
                f"{ratio:.3f}x (per pair {min(p):.3f}-{max(p):.3f})" +
                (f"; goal <= 1.05x: {'met' if ratio <= 1.05 else 'NOT met'}"
                 if interval == 1 else ""))
            figures.append({"bench": "bench_bridge", "figure": "job_step",
                            "ranks": 2, "interval": interval,
                            "value": statistics.median(b_step[interval]),
                            "unit": "ms/step",
                            "baseline": statistics.median(a_step),
                            "ratio": ratio, "pair_min": min(p),
                            "pair_max": max(p)})
    if args.json:
        for f in figures:
            print(json.dumps(f))


if __name__ == "__main__":
    main()
