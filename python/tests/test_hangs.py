"""`vqcheck watch` reports a hang wherever it is (issue 23; the rule in
harness/cli/cmd_watch.c's file comment and docs/pytorch.md "Hangs"): a rank
that made no progress (no collective entered or left, no step ended) for
--timeout is hung; watch then asks every live rank for its Python stack,
reports a deadlock naming the culprit first and every rank's place, and
stops the job.

The four shapes the bridge's own hang marker (a collective the bridge sees
in flight too long) cannot report, each a real 2-rank gloo job under the
real bridge, written as users write them (jobs/hangs/, no vqcheck import):

  stopped  DDP training; the test sends rank 1 SIGSTOP: rank 1 is named,
           stopped, and rank 0 is in torch's backward (DDP's all_reduce,
           issued from C++);
  ddp      uneven inputs under DDP: rank 0's extra backward waits in DDP's
           all_reduce while rank 1 waits for rank 0's checkpoint: rank 1
           (outside any collective) is named, rank 0 is in backward;
  funcol   a functional all_reduce rank 1 never joins: rank 0 waits in
           wait_tensor (the deadline runs until the wait), rank 1 (named)
           waits for a file;
  loop     rank 0 loops in Python outside any collective after rank 1
           exited 0: rank 0 is named, rank 1 had exited;
  fsdp2    FSDP2 training; rank 1 waits for a batch file at its third step
           while rank 0's forward waits in FSDP's all_gather (a collective
           torch issues): rank 1 is named at its line, rank 0 in FSDP's
           call from its forward.

Each asserts exit 1, the finding, that the report came within --timeout +
5 s of the hang's start (the test's SIGSTOP, else the last progress of a
rank still running, from the heartbeats), and that no process of the job
is left (the pids of run.json's job.processes).
"""
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_watch

JOBS = Path(__file__).resolve().parent / "jobs" / "hangs"
TIMEOUT = 5
# The report's allowance past the timeout (the acceptance).
REPORT_S = 5.0
# python/vqcheck/_heartbeat.py's format.
HEARTBEAT = "<4sIII QQQQ 16s"
RULE = ("A rank slower than --timeout between two signs of progress (a "
        "collective entered or left, a step end) counts as a hang.")


def line_of(job, mark):
    return next(i + 1 for i, t in enumerate(job.read_text().splitlines())
                if mark in t)


def heartbeat(out, rank):
    """rank-<r>.heartbeat as a dict, None when absent or short."""
    try:
        data = (out / f"rank-{rank}.heartbeat").read_bytes()[:64]
    except FileNotFoundError:
        return None
    if len(data) < 64:
        return None
    magic, version, pid, state, beats, last_ns, seq, step, op = \
        struct.unpack(HEARTBEAT, data)
    return {"pid": pid, "state": state, "beats": beats, "last_ns": last_ns,
            "seq": seq, "step": step}


def gone(pid):
    """Whether no process pid exists (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


def start(cli, out, job, *args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [cli, "watch", "--nproc", "2", "--timeout", str(TIMEOUT), "--out",
         str(out), "--json", "--", sys.executable, str(job), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(p, out, hang_start=None):
    """Waits for watch; (run.json, stderr, seconds from the hang's start to
    the report). The hang's start: hang_start, else the last progress of
    the ranks still running (heartbeats; CLOCK_MONOTONIC, as
    time.monotonic)."""
    try:
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    ended = time.monotonic()
    assert p.returncode == 1, stderr[-4000:]
    if hang_start is None:
        beats = [heartbeat(out, r) for r in range(2)]
        hang_start = min(b["last_ns"] for b in beats
                         if b and b["state"] != 2) * 1e-9
    run = json.loads(stdout)
    for proc in run["job"]["processes"]:
        assert gone(proc["pid"]), proc
    return run, stderr, ended - hang_start


def the_hang(run):
    """The one deadlock, and no rank_failure of a process: vqcheck stopped
    the job. (A rank hung outside any collective may not have written its
    last step's digest, which the bridge writes at its next join point, and
    the trace comparison then says its trace "stops early": that one, about
    hung ranks only, is let through.)"""
    dead = [f for f in run["findings"] if f["kind"] == "deadlock"]
    assert len(dead) == 1, run["findings"]
    f = dead[0]
    hung = {p["rank"] for p in f["detail"]["places"]
            if p["place"] not in ("ended", "progressing")}
    for x in run["findings"]:
        if x["kind"] == "rank_failure":
            assert x["detail"].get("source") == "traces", x
            assert set(x["ranks"]) <= hung, (x, hung)
    assert f["message"].startswith(
        f"no progress for {TIMEOUT} s (the --timeout): "), f["message"]
    assert f["message"].endswith(RULE), f["message"]
    assert f["detail"]["timeout_s"] == TIMEOUT
    return f


def places(f):
    return {p["rank"]: p for p in f["detail"]["places"]}


def test_a_stopped_rank_is_named_and_the_job_still_ends(cli, tmp_path):
    job = JOBS / "ddp_train.py"
    out = tmp_path / "run"
    p = start(cli, out, job)
    pid = None
    try:
        # Training runs: both ranks have beaten at a few step ends.
        deadline = time.monotonic() + 90
        while True:
            beats = [heartbeat(out, r) for r in range(2)]
            if all(b and b["step"] >= 3 for b in beats):
                break
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "the job did not train"
            time.sleep(0.1)
        pid = beats[1]["pid"]
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        run, _, took = finish(p, out, stopped_at)
    finally:
        if pid and not gone(pid):  # never leave a stopped process behind
            os.kill(pid, signal.SIGKILL)
    f = the_hang(run)
    backward = line_of(job, "the gradient all_reduce")
    assert f["ranks"] == [1]
    assert f["message"].startswith(
        "no progress for 5 s (the --timeout): rank 1 is stopped (process "
        "state T: a stop signal such as SIGSTOP); rank 0 is in torch's "
        "backward (_tensor.py:"), f["message"]
    assert f"called at ddp_train.py:{backward} (main)" in f["message"]
    at = places(f)
    assert (at[1]["place"], at[1]["process_state"], at[1]["culprit"]) == \
        ("stopped", "T", True)
    assert (at[0]["place"], at[0]["culprit"]) == ("torch", False)
    assert at[0]["site"] == f"{job}:{backward} main"
    assert gone(pid)
    assert took < TIMEOUT + REPORT_S, took
    print(f"stopped: reported {took:.1f} s after the SIGSTOP")


def test_ddp_gradient_all_reduce_from_cpp(cli, tmp_path):
    job = JOBS / "ddp_uneven.py"
    out = tmp_path / "run"
    run, _, took = finish(start(cli, out, job, tmp_path / "model.pt"), out)
    f = the_hang(run)
    waits = line_of(job, "rank 1 waits here")
    backward = line_of(job, "rank 0's third one waits here")
    assert f["ranks"] == [1] and f["step"] == 2
    assert f["site"] == f"{job}:{waits} wait_for_checkpoint"
    assert f["message"].startswith(
        "no progress for 5 s (the --timeout): rank 1 is at "
        f"ddp_uneven.py:{waits} (wait_for_checkpoint), outside any "
        "collective (no progress for "), f["message"]
    assert "; rank 0 is in torch's backward (_tensor.py:" in f["message"]
    assert f"called at ddp_uneven.py:{backward} (main)" in f["message"]
    at = places(f)
    assert (at[0]["place"], at[1]["place"]) == ("torch", "program")
    assert at[0]["heartbeat"]["step"] == 2  # two steps done, in its third
    assert took < TIMEOUT + REPORT_S, took
    print(f"ddp: reported {took:.1f} s after the last progress")


def test_functional_collective_one_rank_never_joins(cli, tmp_path):
    job = JOBS / "funcol_unjoined.py"
    out = tmp_path / "run"
    run, _, took = finish(start(cli, out, job, tmp_path / "results.txt"),
                          out)
    f = the_hang(run)
    waits = line_of(job, "rank 1 waits here")
    wait_tensor = line_of(job, "rank 0 waits here")
    assert f["ranks"] == [1]
    assert f["message"].startswith(
        "no progress for 5 s (the --timeout): rank 1 is at "
        f"funcol_unjoined.py:{waits} (wait_for_results), outside any "
        "collective"), f["message"]
    assert ("; rank 0 is in torch's wait_tensor (_functional_collectives.py:"
            in f["message"]), f["message"]
    assert f"called at funcol_unjoined.py:{wait_tensor} (main)" in \
        f["message"]
    at = places(f)
    assert at[0]["site"] == f"{job}:{wait_tensor} main"
    assert at[0]["entry"].endswith("wait_tensor")
    assert took < TIMEOUT + REPORT_S, took
    print(f"funcol: reported {took:.1f} s after the last progress")


def test_python_loop_outside_any_collective_after_peer_exited(cli,
                                                              tmp_path):
    job = JOBS / "python_loop.py"
    out = tmp_path / "run"
    run, _, took = finish(start(cli, out, job), out)
    f = the_hang(run)
    loops = line_of(job, "rank 0 loops here")
    assert f["ranks"] == [0]
    assert f["message"] == (
        "no progress for 5 s (the --timeout): rank 0 is at "
        f"python_loop.py:{loops} (evaluate), outside any collective (no "
        f"progress for {places(f)[0]['no_progress_s']:.1f} s); rank 1 had "
        f"exited with status 0 (finished). {RULE}"), f["message"]
    at = places(f)
    assert (at[1]["place"], at[1]["exit_code"]) == ("ended", 0)
    assert "rank 0 made no progress" in run["job"]["stopped"]
    assert took < TIMEOUT + REPORT_S, took
    print(f"loop: reported {took:.1f} s after the last progress")


def test_a_stall_inside_fsdp2s_collectives(cli, tmp_path):
    """Rank 0's forward waits in FSDP's all_gather; rank 1 waits for its
    batch. Both of watch's ways to see it fire at the timeout (the
    bridge's own marker of a collective in flight, or no progress in the
    heartbeats), whichever first: either report names rank 1 at its line
    and rank 0 in FSDP's call from its forward line."""
    job = JOBS / "fsdp2_stall.py"
    out = tmp_path / "run"
    run, _, took = finish(start(cli, out, job, tmp_path / "batch.pt"), out)
    dead = [f for f in run["findings"] if f["kind"] == "deadlock"]
    assert len(dead) == 1, run["findings"]
    f = dead[0]
    waits = line_of(job, "rank 1 waits here")
    forward = line_of(job, "rank 0 waits in FSDP's all_gather")
    assert 1 in f["ranks"], f
    assert f"fsdp2_stall.py:{waits} (next_batch)" in f["message"], \
        f["message"]
    assert f"fsdp2_stall.py:{forward} (main)" in f["message"], f["message"]
    if "places" in f["detail"]:  # the heartbeats' report
        the_hang(run)
        assert f["ranks"] == [1], f
        assert (places(f)[0]["place"], places(f)[1]["place"]) == \
            ("torch", "program")
    else:  # the bridge's marker: rank 0 in all_gather_single, FSDP's
        assert "rank 0 waits in all_gather_single at " in f["message"], \
            f["message"]
        assert "rank 1 never entered it" in f["message"], f["message"]
    for x in run["findings"]:  # a hung rank's trace may stop early
        assert x is f or (x["kind"] == "rank_failure" and
                          x["detail"].get("source") == "traces" and
                          x["ranks"] == [1]), x
    assert took < TIMEOUT + REPORT_S, took
    print(f"fsdp2: reported {took:.1f} s after the last progress")


def test_a_hang_before_the_first_step(cli, tmp_path):
    """Rank 1's data loader is stuck on its first batch while rank 0 waits
    in DDP's first gradient all_reduce: no step end, no collective the
    bridge sees, only init_process_group's heartbeats. Reported in time:
    rank 1 named at its loop's line (not in the selectors module where
    its main thread waits for the workers), rank 0 in torch's backward."""
    job = JOBS / "loader_stall.py"
    out = tmp_path / "run"
    marks = tmp_path / "marks"
    marks.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1", STALL="1", MARKS=str(marks))
    p = subprocess.Popen(
        [cli, "watch", "--nproc", "2", "--timeout", str(TIMEOUT), "--out",
         str(out), "--json", "--", sys.executable, str(job)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # The hang starts when the last rank starts to wait: rank 0 in its
    # backward, rank 1's loader in its first read (2 workers: either).
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        pass
    waits_from = [float(m.read_text()) for m in marks.iterdir()]
    assert any(m.name == "backward-0" for m in marks.iterdir())
    run, _, took = finish(p, out, max(waits_from))
    f = the_hang(run)
    waits = line_of(job, "rank 1 waits for its first batch here")
    assert f["ranks"] == [1] and f["step"] == 0, f
    assert f["site"] == f"{job}:{waits} main", f
    assert f"rank 1 is at loader_stall.py:{waits} (main) (in " in \
        f["message"], f["message"]
    assert "; rank 0 is in torch's backward (_tensor.py:" in f["message"]
    assert took < TIMEOUT + REPORT_S, took
    print(f"loader: reported {took:.1f} s after the last progress")


def test_a_slow_busy_setup_is_no_hang(cli, tmp_path):
    """Both ranks compute for 3 timeouts after init_process_group before
    their first step (a model built or compiled slowly): busy, so no
    hang; the job trains to its end and is clean."""
    job = JOBS / "loader_stall.py"
    out = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1",
               SLOW_SETUP=str(3 * TIMEOUT))
    p = run_watch(
        [cli, "watch", "--nproc", "2", "--timeout", str(TIMEOUT), "--out",
         str(out), "--json", "--", sys.executable, str(job)],
        env=env, timeout=180)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = json.loads(p.stdout)
    assert run["findings"] == []


def test_a_process_stuck_on_its_way_out_is_a_hang(cli, tmp_path):
    """Every rank trained to the end and wrote its end line, but rank 1's
    process never exits (an exit-time wait): no progress for the timeout
    once every rank is done is a hang of that rank, reported and the job
    stopped, where vqcheck watch waited for its launcher for good."""
    out = tmp_path / "run"
    p = start(cli, out, JOBS / "exit_stuck.py")
    deadline = time.monotonic() + 90
    while True:  # rank 1's end line written: the hang starts there
        b = heartbeat(out, 1)
        if b and b["state"] == 2:
            break
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the job did not finish"
        time.sleep(0.05)
    run, _, took = finish(p, out, b["last_ns"] * 1e-9)
    f = the_hang(run)
    assert f["ranks"] == [1], f
    assert "rank 1 is finished (its end line written) but its process did " \
        "not exit" in f["message"], f["message"]
    at = places(f)
    assert (at[1]["place"], at[1]["culprit"]) == ("exiting", True)
    assert at[0]["place"] == "ended"
    assert took < TIMEOUT + REPORT_S, took
