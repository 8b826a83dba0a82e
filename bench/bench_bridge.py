"""bench_bridge.py: what `vqcheck watch` costs an unmodified PyTorch job.

Run by hand (never a timed test), after scripts/python-env.sh:

    build-py/venv/bin/python bench/bench_bridge.py [--reps N] [--steps N]
                                   [--calls N] [--pin] [--json]

The bridge wraps every torch.distributed collective (a ledger line before
and after each, a call-site lookup, the lost-result checks) and digests the
model and optimizer state at every optimizer step, by default on its digest
thread while training goes on (VQC_WATCH_OVERLAP=1; docs/pytorch.md, "The
digest off the training thread"). The yardstick is the training step of an
ordinary job: goal <= 1.05x at --interval 1.

What it does:
  1. validates, before anything is timed, and exits 1 on any mismatch: the
     job (bench/jobs/ddp_step.py, on --nproc gloo ranks, 2 by default) run
     plain and under `vqcheck watch --nproc N` ends with the same loss, bit
     for bit (the bridge changes nothing the job computes); watch exits 0
     with no finding, with the overlap on and off; each rank's ledger
     (rank-<r>.live.jsonl) holds an entered and a done line for every
     Python-level collective the job makes (its barriers and the per-step
     loss all_reduce), the same sequence on every rank; the trace holds one
     line per step per state tensor; the traces with the overlap on and
     off are the same bytes; and with it on, every step but the first was
     hashed on the digest thread.
  2. cost per collective: one process, a world-1 gloo group, --calls
     dist.all_reduce calls of one float, timed (A) without the bridge and
     (B) with it (PYTHONPATH=python/bridge, VQC_WATCH_DIR set), each in a
     fresh process, interleaved A, B, A, B, ... over --reps rounds. Printed:
     microseconds per call, median (min-max), the ratio B_i / A_i (median
     and min-max over rounds), the extra time per call (median of B_i -
     A_i) and the ledger bytes written per call.
  3. job step time: the job's own timing of --steps steps after 5 warm-up
     steps (rank 0, between two barriers, so start-up is not counted), run
     (A) with the torchrun variables set by this script and under `vqcheck
     watch --nproc 2` at --interval 1 and 10 (the digest every 10th step;
     the collectives and hooks at every step), each with the overlap on
     (i1, i10) and off (i1_sync, i10_sync), interleaved A, i1, i1_sync,
     i10, i10_sync over --reps rounds. Printed: median per-step time of
     each (min-max), the ratio to A as the median of the per-round ratios
     (min-max); and, from the ranks' "finished" lines (vqcheck._bridge
     times itself: a few perf_counter calls per step), the training
     thread's time in the bridge's state check per step (its step ends,
     the digest itself when it is hashed there, and the joins, waits
     included; in wall time and in that thread's CPU time, which leaves
     out what other threads and processes took from it meanwhile), the
     part of it spent waiting for the digest thread, and
     the direct estimate 1 + (that time) / (plain step), per round. The
     direct estimate leaves out what the whole-step ratio includes: the
     hooks' calls (forward pre-hook, collective wrappers) and the digest
     thread's competition for the cores; on a loaded machine it is the
     steadier figure.
  4. (--contention) what a hash on another thread costs a training
     thread here: bench/jobs/contend_step.py, one process of the job's
     model without process group or bridge, --steps x 5 steps after 20
     warm-up, with (none) nothing else, (thread) the 8.4 MB of state
     digested on the training thread after each step, (helper) hashed on
     vqcheck's digest thread while the next step runs, waited for before
     its optimizer.step(), (other) 8.4 MB of other memory hashed there;
     interleaved over --reps rounds, each a fresh process. Printed: ms per
     step, and the ratio to none. It tells whether this machine has a core
     the digest thread can use for free: with one, helper is as fast as
     none; with none, as slow as thread.
--nproc N runs the job on N ranks (default 2). With --pin every rank
(plain and watched) is bound to one CPU of its own (taskset -c <rank>), so
a rank's digest thread competes with its own training thread only: with
--nproc 1 --pin the digest thread has no core of its own, with --nproc 1
alone it has a spare one. With --json, one JSON object per figure instead
(bench_stats.py's keys).

Defaults (--reps 7 --steps 60 --calls 3000) take about six minutes on a
2-core machine, more when others load it.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stats import MIN_REPS, figure, print_figure, ratios, spread, \
    summarize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "bench" / "jobs" / "ddp_step.py"
CONTEND = ROOT / "bench" / "jobs" / "contend_step.py"
BRIDGE = ROOT / "python" / "bridge"
WARMUP = 5
BENCH = "bench_bridge"
NPROC = 2  # ranks of the job (--nproc)

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

# The watched runs of part 3: name -> (interval, VQC_WATCH_OVERLAP).
WATCHED = {"i1": (1, "1"), "i1_sync": (1, "0"), "i10": (10, "1"),
           "i10_sync": (10, "0")}


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
    print(f"bench_bridge: validation failed: {what}", file=sys.stderr)
    sys.exit(1)


# ---- the job, plain and watched


def run_plain(steps: int, out: Path, pin: bool) -> float:
    """Two ranks with the torchrun variables; the job's seconds."""
    out.unlink(missing_ok=True)  # never an earlier run's figure
    env = base_env()
    env.update(MASTER_PORT=str(free_port()), WORLD_SIZE=str(NPROC),
               LOCAL_WORLD_SIZE=str(NPROC))
    procs = []
    for rank in range(NPROC):
        e = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        cmd = [sys.executable, str(JOB), str(steps), str(WARMUP), str(out)]
        if pin:
            cmd = ["taskset", "-c", str(rank % os.cpu_count())] + cmd
        procs.append(subprocess.Popen(cmd, env=e,
                                      stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=600)
        if p.returncode != 0:
            fail(f"the plain job exited {p.returncode}: {err[-2000:]}")
    return json.loads(out.read_text())["seconds"]


def run_watched(cli: str, steps: int, out: Path, run_dir: Path,
                interval: int, overlap: str,
                pin: bool) -> Tuple[float, int, str]:
    """The job under `vqcheck watch --nproc 2`: (seconds, exit code,
    stderr)."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    out.unlink(missing_ok=True)
    job = [sys.executable, str(JOB), str(steps), str(WARMUP), str(out)]
    if pin:  # each rank's own CPU, from the RANK watch gives it
        job = ["sh", "-c", f'exec taskset -c "$((RANK % {os.cpu_count()}))" '
               '"$@"', "sh"] + job
    env = dict(base_env(), VQC_WATCH_OVERLAP=overlap)
    p = subprocess.run([cli, "watch", "--nproc", str(NPROC), "--interval",
                        str(interval), "--quiet", "--out", str(run_dir),
                        "--"] + job,
                       env=env, capture_output=True, text=True, timeout=600)
    seconds = json.loads(out.read_text())["seconds"] if out.exists() else 0
    return seconds, p.returncode, p.stderr


def digest_summaries(run_dir: Path) -> List[Dict]:
    """Each rank's "digests" of its "finished" live line (vqcheck._bridge:
    where the steps were hashed, the time waited at joins)."""
    out = []
    for rank in range(NPROC):
        lines = (run_dir / f"rank-{rank}.live.jsonl").read_text()
        found = [json.loads(x) for x in lines.splitlines()
                 if '"finished"' in x]
        if not found or "digests" not in found[-1]:
            fail(f"rank {rank} has no finished line with digests")
        out.append(found[-1]["digests"])
    return out


def validate(cli: str, tmp: Path, pin: bool) -> None:
    steps = 4
    plain_out, watched_out = tmp / "plain.json", tmp / "watched.json"
    run_plain(steps, plain_out, pin)
    traces = {}
    for overlap in ("1", "0"):
        run_dir = tmp / f"validate-{overlap}"
        _, code, err = run_watched(cli, steps, watched_out, run_dir, 1,
                                   overlap, pin)
        if code != 0:
            fail(f"vqcheck watch exited {code} on the clean job "
                 f"(VQC_WATCH_OVERLAP={overlap}): {err[-2000:]}")
        run = json.loads((run_dir / "run.json").read_text())
        if run["findings"]:
            fail(f"findings on the clean job: {run['findings']}")
        a = json.loads(plain_out.read_text())["loss"]
        b = json.loads(watched_out.read_text())["loss"]
        if a != b:
            fail(f"the loss differs: plain {a!r}, watched {b!r}")
        calls = WARMUP + steps
        sequences = []
        for rank in range(NPROC):
            lines = [json.loads(x) for x in
                     (run_dir / f"rank-{rank}.live.jsonl").read_text()
                     .splitlines()]
            ledger = [x for x in lines if "event" not in x]
            done = [(x["seq"], x["op"], x["count"], x["line"])
                    for x in ledger if x["state"] == "done"]
            entered = [x for x in ledger if x["state"] == "entered"]
            ops = [d[1] for d in done]
            expected = ["all_reduce"] * WARMUP + ["barrier"] + \
                ["all_reduce"] * steps + ["barrier"]
            if ops != expected or len(entered) != len(done):
                fail(f"rank {rank}'s ledger: {len(entered)} entered, "
                     f"{len(done)} done, ops {ops}")
            sequences.append(done)
            trace = (run_dir / f"rank-{rank}.trace.jsonl").read_text()
            # 4 parameters + 4 momentum buffers per step.
            if len(trace.splitlines()) != 8 * calls:
                fail(f"rank {rank}'s trace has {len(trace.splitlines())} "
                     f"lines, expected {8 * calls}")
            traces[(overlap, rank)] = trace
        if any(seq != sequences[0] for seq in sequences):
            fail("the ranks' ledgers differ")
        if overlap == "1":
            for rank, d in enumerate(digest_summaries(run_dir)):
                if d["on_helper"] != calls - 1 or d["on_thread"] != 1:
                    fail(f"rank {rank}: {d['on_helper']} steps on the "
                         f"digest thread, {d['on_thread']} on the training "
                         f"thread; expected {calls - 1} and 1")
    for rank in range(NPROC):
        if traces[("1", rank)] != traces[("0", rank)]:
            fail(f"rank {rank}'s trace differs with the overlap on and off")


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=MIN_REPS)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--cli", default=str(Path(sys.executable).parent /
                                         "vqcheck"))
    ap.add_argument("--nproc", type=int, default=2,
                    help="ranks of the job (default 2)")
    ap.add_argument("--pin", action="store_true",
                    help="bind each rank to a CPU of its own (taskset)")
    ap.add_argument("--contention", action="store_true",
                    help="also part 4: a hash on another thread vs the "
                         "training thread (one process)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    global NPROC
    NPROC = args.nproc
    if NPROC < 1:
        ap.error("--nproc must be at least 1")
    if args.reps < MIN_REPS:
        ap.error(f"--reps must be at least {MIN_REPS}")
    if not Path(args.cli).is_file():
        print(f"bench_bridge: no vqcheck CLI at {args.cli}: run "
              "scripts/python-env.sh, or give --cli", file=sys.stderr)
        sys.exit(2)
    if args.pin and shutil.which("taskset") is None:
        print("bench_bridge: --pin needs taskset (util-linux)",
              file=sys.stderr)
        sys.exit(2)
    import torch
    say = (lambda *a: None) if args.json else print
    say(f"machine: {len(os.sched_getaffinity(0))} usable CPUs, load average "
        f"{os.getloadavg()[0]:.1f}, torch {torch.__version__}, Python "
        f"{sys.version.split()[0]}" +
        (", each rank bound to a CPU of its own" if args.pin else ""))
    figures = []
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as name:
        tmp = Path(name)
        validate(args.cli, tmp, args.pin)
        say("validated: same loss plain and watched, clean runs with the "
            "overlap on and off, ledgers and traces complete, the same "
            "traces either way, steps 1.. hashed on the digest thread")

        a_call, b_call, written = [], [], []
        for _ in range(args.reps):
            a_call.append(per_call(args.calls, False, tmp)[0] * 1e6)
            b, w = per_call(args.calls, True, tmp)
            b_call.append(b * 1e6)
            written.append(float(w))
        a, b = summarize(a_call), summarize(b_call)
        r = ratios(b_call, a_call)
        extra = summarize([y - x for x, y in zip(a_call, b_call)])
        say(f"\nper collective ({args.calls} all_reduce of 1 float, world 1, "
            f"{args.reps} interleaved rounds), us/call median (min-max):")
        say(f"  plain        {spread(a, 1)}")
        say(f"  bridge       {spread(b, 1)}  {spread(r)}x; extra "
            f"{extra.median:.1f} us per call, "
            f"{summarize(written).median:.0f} ledger bytes per call")
        figures.append(figure(BENCH, "per_collective", "us/call", b,
                              baseline=a, baseline_name="plain", ratio=r))
        figures.append(figure(BENCH, "per_collective_extra", "us/call",
                              extra))
        figures.append(figure(BENCH, "ledger_bytes_per_call", "bytes",
                              summarize(written)))

        step_ms: Dict[str, List[float]] = {"plain": []}
        waited: Dict[str, List[float]] = {}
        inside: Dict[str, List[float]] = {}
        cpu: Dict[str, List[float]] = {}
        for case in WATCHED:
            step_ms[case] = []
            waited[case] = []
            inside[case] = []
            cpu[case] = []
        out = tmp / "job.json"
        for _ in range(args.reps):
            step_ms["plain"].append(
                run_plain(args.steps, out, args.pin) / args.steps * 1e3)
            for case, (interval, overlap) in WATCHED.items():
                run_dir = tmp / "watched"
                seconds, code, err = run_watched(
                    args.cli, args.steps, out, run_dir, interval, overlap,
                    args.pin)
                if code != 0:
                    fail(f"vqcheck watch exited {code}: {err[-2000:]}")
                step_ms[case].append(seconds / args.steps * 1e3)
                # ms per step, both ranks' mean, over every step the run
                # made (warm-up included): waited at joins; in the bridge's
                # step ends and joins
                sums = digest_summaries(run_dir)
                made = len(sums) * (args.steps + WARMUP)
                waited[case].append(sum(d["waited_ms"] for d in sums) / made)
                inside[case].append(sum(d["step_end_ms"] + d["join_ms"]
                                        for d in sums) / made)
                cpu[case].append(sum(d["step_end_cpu_ms"] + d["join_cpu_ms"]
                                     for d in sums) / made)
        plain = summarize(step_ms["plain"])
        say(f"\njob step ({NPROC} gloo rank{'s' if NPROC > 1 else ''}, DDP "
            "1.05M parameters, batch 64, "
            f"{args.steps} steps, {args.reps} interleaved rounds), ms/step "
            "median (min-max); ratio = median (min-max) of the per-round "
            "ratios watched / plain:")
        say(f"  plain              {spread(plain)}")
        for case, (interval, overlap) in WATCHED.items():
            v = summarize(step_ms[case])
            r = ratios(step_ms[case], step_ms["plain"])
            label = f"interval {interval:<2} " + \
                ("overlap" if overlap == "1" else "sync   ")
            t = summarize(inside[case])
            c = summarize(cpu[case])
            w = summarize(waited[case])
            direct = summarize([1 + x / p for x, p in
                                zip(inside[case], step_ms["plain"])])
            line = f"  {label} {spread(v)}  {spread(r)}x"
            if interval == 1:
                line += (f"; goal <= 1.05x: "
                         f"{'met' if r.median <= 1.05 else 'NOT met'}")
            say(line)
            say(f"      training thread in the state check "
                f"{spread(t)} ms/step (its CPU time {spread(c)}), of which "
                f"waiting for the digest thread {w.median:.3f}; direct "
                f"estimate {spread(direct)}x")
            figures.append(figure(BENCH, f"job_step_{case}", "ms/step", v,
                                  ranks=NPROC, baseline=plain,
                                  baseline_name="plain", ratio=r))
            figures.append(figure(BENCH, f"state_check_{case}", "ms/step",
                                  t, ranks=NPROC))
            figures.append(figure(BENCH, f"state_check_cpu_{case}",
                                  "ms/step", c, ranks=NPROC))
            figures.append(figure(BENCH, f"join_wait_{case}", "ms/step", w,
                                  ranks=NPROC))
            figures.append(figure(BENCH, f"direct_estimate_{case}", "x",
                                  direct, ranks=NPROC))
        if args.contention:
            figures += contention(args, say)
    if args.json:
        for f in figures:
            print_figure(f)


def contention(args: argparse.Namespace, say) -> List[Dict]:
    """Part 4 (see the top): ms per step of contend_step.py's modes."""
    modes = ("none", "thread", "helper", "other")
    ms: Dict[str, List[float]] = {m: [] for m in modes}
    steps = args.steps * 5
    for _ in range(args.reps):
        for mode in modes:
            cmd = [sys.executable, str(CONTEND), mode, str(steps), "20"]
            if args.pin:
                cmd = ["taskset", "-c", "0"] + cmd
            p = subprocess.run(cmd, env=base_env(), capture_output=True,
                               text=True, timeout=600)
            if p.returncode != 0:
                fail(f"contend_step.py {mode} exited {p.returncode}: "
                     f"{p.stderr[-2000:]}")
            ms[mode].append(float(p.stdout.strip()))
    none = summarize(ms["none"])
    say(f"\na hash beside a training thread (one process, the job's model, "
        f"{steps} steps, {args.reps} interleaved rounds"
        f"{', on one CPU' if args.pin else ''}), ms/step median (min-max), "
        "ratio to none:")
    say(f"  none     {spread(none)}")
    out = []
    for mode in modes[1:]:
        v, r = summarize(ms[mode]), ratios(ms[mode], ms["none"])
        say(f"  {mode:8s} {spread(v)}  {spread(r)}x")
        out.append(figure(BENCH, f"contention_{mode}", "ms/step", v,
                          ranks=1, baseline=none, baseline_name="none",
                          ratio=r))
    return out


if __name__ == "__main__":
    main()
