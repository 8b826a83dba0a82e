"""bench_layouts.py: what `vqcheck watch` costs a torch 2.x job's training
step on each parallel layout it checks: DDP, FSDP2 and tensor parallel.

Run by hand (never a timed test), after scripts/torch-env.sh:

    build-py/venv-torch2/bin/python bench/bench_layouts.py [--reps N]
        [--steps N] [--layouts ddp,fsdp2,tp] [--cli PATH] [--json]

The job (bench/jobs/layout_step.py) is 4 x Linear(1024, 1024), batch 64,
Adam, on 2 gloo ranks (issue 24's yardstick: goal <= 1.02x for DDP).

What it does:
  1. validates, before anything is timed, and exits 1 on any mismatch: per
     layout, the job run plain and under `vqcheck watch --nproc 2` ends with
     the same loss, bit for bit (the bridge changes nothing the job
     computes); watch exits 0 with no finding and compared digests (and,
     for fsdp2 and tp, counts pieces with no replica).
  2. per layout, the job's own timing of --steps steps after 5 warm-up
     steps (rank 0, between two barriers: start-up is not counted), run
     (A) plain with the torchrun variables and (B) under watch at interval
     1, interleaved A, B, A, B, ... over --reps rounds, layouts interleaved
     too. Printed: median per-step time of each (min-max) and the ratio B/A
     as the median of the per-round ratios (min-max, bench_stats.py);
     then the same for rank 0's CPU time per step (every thread of its
     process: the work watch adds, digest thread included, which the
     other core's load moves less than the wall time).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_stats  # noqa: E402

JOB = HERE / "jobs" / "layout_step.py"
NPROC = 2
WARMUP = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env() -> Dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1")
    for name in ("PYTHONPATH", "VQC_WATCH_DIR", "VQC_WATCH_OVERLAP"):
        env.pop(name, None)
    return env


def fail(what: str) -> None:
    print(f"bench_layouts: validation failed: {what}", file=sys.stderr)
    sys.exit(1)


def run_plain(layout: str, steps: int, out: Path) -> Dict:
    out.unlink(missing_ok=True)  # never an earlier run's figure
    env = dict(base_env(), MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(NPROC), LOCAL_WORLD_SIZE=str(NPROC))
    procs = [subprocess.Popen(
        [sys.executable, str(JOB), layout, str(steps), str(WARMUP),
         str(out)], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for r in range(NPROC)]
    for p in procs:
        _, err = p.communicate(timeout=900)
        if p.returncode != 0:
            fail(f"the plain {layout} job exited {p.returncode}: "
                 f"{err[-2000:]}")
    return json.loads(out.read_text())


def run_watched(cli: str, layout: str, steps: int, out: Path,
                run_dir: Path) -> Tuple[Dict, int, str]:
    if run_dir.exists():
        shutil.rmtree(run_dir)
    out.unlink(missing_ok=True)
    p = subprocess.run([cli, "watch", "--nproc", str(NPROC), "--quiet",
                        "--out", str(run_dir), "--", sys.executable,
                        str(JOB), layout, str(steps), str(WARMUP), str(out)],
                       env=base_env(), capture_output=True, text=True,
                       timeout=900)
    got = json.loads(out.read_text()) if out.exists() else {}
    return got, p.returncode, p.stderr


def validate(cli: str, layouts: List[str], tmp: Path) -> None:
    for layout in layouts:
        plain = run_plain(layout, 3, tmp / "plain.json")
        watched, rc, err = run_watched(cli, layout, 3, tmp / "watched.json",
                                       tmp / "run")
        if rc != 0:
            fail(f"watch exited {rc} on the {layout} job: {err[-2000:]}")
        if watched.get("loss") != plain["loss"]:
            fail(f"{layout}: loss {watched.get('loss')!r} under watch, "
                 f"{plain['loss']!r} without: the bridge changed the job")
        analysis = json.loads((tmp / "run" / "run.json").read_text())[
            "analysis"]
        if analysis["digests_compared"] <= 0:
            fail(f"{layout}: watch compared no digest")
        if layout != "ddp" and analysis["no_replica"] <= 0:
            fail(f"{layout}: no piece without a replica was counted")
        print(f"validated {layout}: same loss {plain['loss']:.6g}, "
              f"{analysis['digests_compared']} digests compared, "
              f"{analysis['no_replica']} without a replica", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=bench_stats.MIN_REPS)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--layouts", default="ddp,fsdp2,tp")
    ap.add_argument("--cli", default=str(Path(sys.executable).parent /
                                         "vqcheck"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    layouts = [x for x in args.layouts.split(",") if x]
    if args.reps < bench_stats.MIN_REPS:
        ap.error(f"--reps must be >= {bench_stats.MIN_REPS}")
    if not os.access(args.cli, os.X_OK):
        ap.error(f"no vqcheck CLI at {args.cli}: run scripts/torch-env.sh "
                 "or give --cli")
    say = (lambda *a: None) if args.json else print
    with tempfile.TemporaryDirectory(prefix="bench_layouts.") as t:
        tmp = Path(t)
        validate(args.cli, layouts, tmp)
        plain: Dict[str, List[float]] = {x: [] for x in layouts}
        watched: Dict[str, List[float]] = {x: [] for x in layouts}
        plain_cpu: Dict[str, List[float]] = {x: [] for x in layouts}
        watched_cpu: Dict[str, List[float]] = {x: [] for x in layouts}
        for rep in range(args.reps):
            for layout in layouts:
                a = run_plain(layout, args.steps, tmp / "a.json")
                b, rc, err = run_watched(args.cli, layout, args.steps,
                                         tmp / "b.json", tmp / "run")
                if rc != 0:
                    fail(f"watch exited {rc} on {layout} in round {rep}: "
                         f"{err[-2000:]}")
                plain[layout].append(a["seconds"] / args.steps * 1e3)
                watched[layout].append(b["seconds"] / args.steps * 1e3)
                plain_cpu[layout].append(a["cpu_seconds"] / args.steps * 1e3)
                watched_cpu[layout].append(b["cpu_seconds"] / args.steps
                                           * 1e3)
            say(f"round {rep + 1}/{args.reps} done", flush=True)
        for layout in layouts:
            report(f"job_step_{layout}", "ms/step", plain[layout],
                   watched[layout], args.json,
                   f"{layout}: plain {{base}} ms/step, watched {{value}} "
                   "ms/step, ratio {ratio}")
            # the work added, less sensitive to the other core's load than
            # the wall time: rank 0's CPU (all its threads) per step
            report(f"job_cpu_{layout}", "cpu ms/step", plain_cpu[layout],
                   watched_cpu[layout], args.json,
                   f"{layout}: rank 0's CPU per step (every thread): plain "
                   "{base} ms, watched {value} ms, ratio {ratio}")


def report(name: str, unit: str, plain: List[float], watched: List[float],
           as_json: bool, text: str) -> None:
    """One figure: watched against plain, medians with their spread and
    the median of the per-round ratios; JSON (bench_stats) or `text` with
    {base}, {value} and {ratio} filled in."""
    base = bench_stats.summarize(plain)
    value = bench_stats.summarize(watched)
    ratio = bench_stats.ratios(watched, plain)
    if as_json:
        bench_stats.print_figure(bench_stats.figure(
            "bench_layouts", name, unit, value, ranks=NPROC, baseline=base,
            baseline_name="plain", ratio=ratio))
    else:
        print(text.format(base=bench_stats.spread(base),
                          value=bench_stats.spread(value),
                          ratio=bench_stats.spread(ratio)))

if __name__ == "__main__":
    main()
