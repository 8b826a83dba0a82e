"""`vqcheck watch` (harness/cli/cmd_watch.c): the CLI that runs an unmodified
job with the Python bridge loaded, supervises it and analyses what the
bridge wrote.

These tests never use the real bridge: VQC_BRIDGE_DIR points at a stub
sitecustomize.py each test writes (a fake trace line per rank, a findings
line, a hang marker, or nothing), and the jobs are tiny scripts written by
the tests. They check the CLI's side of the contract: the environment every
process gets, the exit codes, run.json's "job" section, the findings it
adds (rank_failure, deadlock from a hang marker), the bridge's findings
files merged, and that no process is left behind.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The stub bridge's pieces: each test joins the ones it needs.
TRACE = '''
import json, os
# Only in a rank (a launcher's own Python has no RANK).
_d = os.environ.get("VQC_WATCH_DIR") if "RANK" in os.environ else None
_r = int(os.environ.get("RANK", "0"))
if _d:
    with open(os.path.join(_d, "rank-%d.trace.jsonl" % _r), "a") as _f:
        _f.write(json.dumps({"schema": "vqcheck-trace/1", "rank": _r,
                             "step": 0, "tensor": "w", "dtype": "float32",
                             "shape": [2], "digest_algo": "vqc-xxh3-tree-1",
                             "digest": "0123456789abcdef"}) + "\\n")
'''

FINDING = '''
if _d:
    with open(os.path.join(_d, "rank-%d.findings.jsonl" % _r), "a") as _f:
        _f.write(json.dumps({"kind": "lost_inplace", "step": 3 - _r,
                             "ranks": [_r], "tensor": "embed_sum",
                             "site": {"file": "/abs/path/x.py", "line": 496,
                                      "func": "forward"},
                             "message": "rank %d lost an in-place update" % _r,
                             "detail": {"rank": _r}}) + "\\n")
'''

HANG = '''
import threading
def _hang():
    with open(os.path.join(_d, "rank-%d.hang" % _r), "w") as _f:
        json.dump({"rank": _r, "step": 4, "op": "all_reduce"}, _f)
if _d and _r == 0:
    _t = threading.Timer(float(os.environ["VQC_WATCH_TIMEOUT"]), _hang)
    _t.daemon = True
    _t.start()
'''

# Both ranks write a live record (the bridge is loaded). Rank 0 dumps its
# stacks on SIGUSR1 as the bridge does under `--nproc`; rank 1, after the
# timeout, writes its stacks and a hang marker as the bridge does for a
# collective in flight too long (a site in another file: train.py).
STACKS = '''
import faulthandler, signal, threading
if _d:
    with open(os.path.join(_d, "rank-%d.live.jsonl" % _r), "a") as _f:
        _f.write(json.dumps({"event": "start", "rank": _r, "size": 2,
                             "pid": os.getpid(), "host": "h"}) + "\\n")
if _d and _r == 0:
    _stacks = open(os.path.join(_d, "rank-0.stacks.txt"), "a")
    faulthandler.register(signal.SIGUSR1, file=_stacks, all_threads=True)
def _hang():
    with open(os.path.join(_d, "rank-1.stacks.txt"), "a") as _f:
        faulthandler.dump_traceback(file=_f, all_threads=True)
    with open(os.path.join(_d, "rank-1.hang"), "w") as _f:
        json.dump({"rank": 1, "op": "all_reduce", "seq": 7,
                   "site": "/abs/train.py:15 main", "step": 2,
                   "waited_s": 5.1,
                   "last_completed": {"op": "all_reduce", "seq": 6,
                                      "site": "/abs/train.py:14 main"}}, _f)
if _d and _r == 1:
    _t = threading.Timer(float(os.environ["VQC_WATCH_TIMEOUT"]), _hang)
    _t.daemon = True
    _t.start()
'''

# Records its pid, then sleeps in a function at a known line (marked).
ELSEWHERE_JOB = '''
import os, sys, time


def somewhere_else():
    while True:
        time.sleep(0.2)  # rank 0 is here


def main():
    with open(os.path.join(sys.argv[1], "pid-%s" % os.environ["RANK"]),
              "w") as f:
        f.write(str(os.getpid()))
    somewhere_else()


main()
'''

# A launcher that starts two ranks of the job given and waits for them;
# SIGUSR1 would kill it (Python's default).
LAUNCHER_OF = '''
import os, subprocess, sys
procs = []
for r in range(2):
    env = dict(os.environ, RANK=str(r), WORLD_SIZE="2")
    procs.append(subprocess.Popen([sys.executable] + sys.argv[1:], env=env))
sys.exit(max(p.wait() for p in procs))
'''


# Records every process's environment for the test to read.
ENV_JOB = '''
import json, os, sys
keys = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
        "MASTER_PORT", "VQC_WATCH_DIR", "VQC_WATCH_INTERVAL",
        "VQC_WATCH_TIMEOUT", "PYTHONPATH", "WATCH_TEST_KEEP"]
out = sys.argv[1]
with open(os.path.join(out, "env-%s.json" % os.environ.get("RANK", "x")),
          "w") as f:
    json.dump({k: os.environ.get(k) for k in keys}, f)
# one string: with unbuffered output each of print's pieces is its own
# write, and three ranks' pieces interleave on the shared pipe
print(f"hello from rank {os.environ.get('RANK')}")
'''

FAIL_JOB = '''
import os, sys, time
if os.environ["RANK"] == "1":
    print("Traceback (most recent call last):", file=sys.stderr)
    print("RuntimeError: boom from rank 1", file=sys.stderr)
    sys.exit(3)
time.sleep(60)
'''

# Sleeps forever, with a child process of its own (in its process group)
# whose pid it records: both must be gone when watch returns.
SLEEP_JOB = '''
import os, subprocess, sys, time
out = sys.argv[1]
child = subprocess.Popen(["sleep", "1000"])
with open(os.path.join(out, "pids-%s" % os.environ.get("RANK", "x")),
          "w") as f:
    f.write("%d %d" % (os.getpid(), child.pid))
while True:
    time.sleep(1)
'''

# A launcher: starts two ranks itself, as torchrun would, and waits.
LAUNCHER_JOB = '''
import os, subprocess, sys
procs = []
for r in range(2):
    env = dict(os.environ, RANK=str(r), WORLD_SIZE="2")
    procs.append(subprocess.Popen([sys.executable, "-c", "print('rank up')"],
                                  env=env))
sys.exit(max(p.wait() for p in procs))
'''


def bridge(tmp_path, *parts):
    d = tmp_path / "bridge"
    d.mkdir(exist_ok=True)
    (d / "sitecustomize.py").write_text("".join(parts))
    return d


def script(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def watch(cli, bridge_dir, out, args, job, timeout=60, env_extra=None):
    """Runs `vqcheck watch --out out args -- job...`; (returncode, stdout,
    stderr, run.json or None)."""
    env = dict(os.environ)
    env["VQC_BRIDGE_DIR"] = str(bridge_dir)
    env.update(env_extra or {})
    p = subprocess.run([cli, "watch", "--out", str(out), *args, "--", *job],
                       capture_output=True, text=True, timeout=timeout,
                       env=env)
    run_json = out / "run.json"
    doc = json.loads(run_json.read_text()) if run_json.exists() else None
    return p.returncode, p.stdout, p.stderr, doc


def gone(pid):
    """Whether no process pid exists (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True
    return state in ("Z", "X")


def test_env_reaches_every_rank_and_clean_traces_pass(cli, tmp_path):
    b = bridge(tmp_path, TRACE)
    out = tmp_path / "run"
    envs = tmp_path / "envs"
    envs.mkdir()
    job = script(tmp_path, "job.py", ENV_JOB)
    rc, stdout, stderr, doc = watch(
        cli, b, out, ["--nproc", "3", "--interval", "5", "--timeout", "7.5"],
        [sys.executable, str(job), str(envs)],
        env_extra={"PYTHONPATH": "/user/site", "WATCH_TEST_KEEP": "kept"})
    assert rc == 0, stderr
    assert "hello from rank 2" in stdout  # the job's stdout passes through
    got = [json.loads((envs / f"env-{r}.json").read_text()) for r in range(3)]
    ports = {e["MASTER_PORT"] for e in got}
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536
    for r, e in enumerate(got):
        assert e["RANK"] == e["LOCAL_RANK"] == str(r)
        assert e["WORLD_SIZE"] == e["LOCAL_WORLD_SIZE"] == "3"
        assert e["MASTER_ADDR"] == "127.0.0.1"
        assert e["VQC_WATCH_DIR"] == str(out.resolve())
        assert e["VQC_WATCH_INTERVAL"] == "5"
        assert e["VQC_WATCH_TIMEOUT"] == "7.5"
        assert e["PYTHONPATH"] == f"{b.resolve()}:/user/site"
        assert e["WATCH_TEST_KEEP"] == "kept"
    assert doc["exit_code"] == 0 and doc["findings"] == []
    job_doc = doc["job"]
    assert job_doc["command"] == [sys.executable, str(job), str(envs)]
    assert job_doc["nproc"] == 3 and job_doc["stopped"] is None
    assert [p["rank"] for p in job_doc["processes"]] == [0, 1, 2]
    for p in job_doc["processes"]:
        assert p["exit_code"] == 0 and p["signal"] is None
        assert p["stopped_by_vqcheck"] is False and p["pid"] > 0
    assert (out / ".vqcheck-run").exists()
    assert "## Job" in (out / "report.md").read_text()


def test_defaults_without_nproc_start_a_launcher_once(cli, tmp_path):
    b = bridge(tmp_path, TRACE)
    out = tmp_path / "run"
    envs = tmp_path / "envs"
    envs.mkdir()
    launcher = script(tmp_path, "launcher.py", LAUNCHER_JOB)
    rc, _, stderr, doc = watch(cli, b, out, [],
                               [sys.executable, str(launcher)])
    assert rc == 0, stderr
    assert sorted(p.name for p in out.glob("rank-*.trace.jsonl")) == [
        "rank-0.trace.jsonl", "rank-1.trace.jsonl"]
    assert doc["job"]["nproc"] is None
    assert doc["job"]["interval"] == 1 and doc["job"]["timeout_s"] == 60
    (proc,) = doc["job"]["processes"]
    assert proc["rank"] is None and proc["exit_code"] == 0


def test_rank_exiting_3_is_a_rank_failure_with_its_stderr(cli, tmp_path):
    b = bridge(tmp_path, TRACE)
    out = tmp_path / "run"
    job = script(tmp_path, "fail.py", FAIL_JOB)
    t0 = time.monotonic()
    rc, stdout, stderr, doc = watch(cli, b, out,
                                    ["--nproc", "2", "--timeout", "2"],
                                    [sys.executable, str(job)])
    assert rc == 1, stderr
    assert time.monotonic() - t0 < 2 + 10  # rank 0 stopped at the timeout
    assert "boom from rank 1" in stderr  # stderr passes through
    (f,) = [x for x in doc["findings"] if x["kind"] == "rank_failure"]
    assert f["ranks"] == [1]
    assert "exited with status 3" in f["message"]
    assert "boom from rank 1" in f["message"]
    procs = {p["rank"]: p for p in doc["job"]["processes"]}
    assert procs[1]["exit_code"] == 3 and not procs[1]["stopped_by_vqcheck"]
    assert "RuntimeError: boom from rank 1" in procs[1]["stderr_tail"]
    assert procs[0]["stopped_by_vqcheck"] and procs[0]["signal"] is not None
    report = (out / "report.md").read_text()
    assert "## Job" in report and "boom from rank 1" in report
    assert "exit 3" in report
    assert "boom from rank 1" in (out / "report.html").read_text()
    for p in doc["job"]["processes"]:
        assert gone(p["pid"])


def test_bridge_findings_are_merged_and_reported(cli, tmp_path):
    b = bridge(tmp_path, TRACE, FINDING)
    out = tmp_path / "run"
    job = script(tmp_path, "job.py", "print('ok')\n")
    rc, stdout, stderr, doc = watch(cli, b, out, ["--nproc", "2"],
                                    [sys.executable, str(job)])
    assert rc == 1, stderr
    (f,) = doc["findings"]
    assert f["kind"] == "lost_inplace"
    assert f["ranks"] == [0, 1] and f["step"] == 2  # union, lowest step
    assert f["tensor"] == "embed_sum"
    assert f["site"] == "/abs/path/x.py:496 forward"
    assert f["message"] == "rank 1 lost an in-place update"
    assert f["detail"] == {"rank": 1}
    assert "lost_inplace" in stdout
    report = (out / "report.md").read_text()
    assert "lost\\_inplace" in report or "lost_inplace" in report
    assert "embed_sum" in report
    # `vqcheck analyze` reads the same files and adds nothing new.
    p = subprocess.run([cli, "analyze", str(out), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    again = json.loads(p.stdout)
    assert again["findings"] == doc["findings"]
    assert again["analysis"]["findings_files"] == 2
    assert again["job"] == doc["job"]


def test_malformed_findings_line_is_exit_2_naming_it(cli, tmp_path):
    b = bridge(tmp_path, TRACE, '''
with open(os.path.join(_d, "rank-%d.findings.jsonl" % _r), "a") as _f:
    _f.write('{"kind": "lost_inplace", "step": 1}\\n{"kind": oops}\\n')
''')
    out = tmp_path / "run"
    job = script(tmp_path, "job.py", "pass\n")
    rc, _, stderr, _ = watch(cli, b, out, ["--nproc", "1"],
                             [sys.executable, str(job)])
    assert rc == 2, stderr
    assert "rank-0.findings.jsonl:2" in stderr


def test_hang_marker_stops_the_job_and_leaves_no_process(cli, tmp_path):
    b = bridge(tmp_path, TRACE, HANG)
    out = tmp_path / "run"
    pids = tmp_path / "pids"
    pids.mkdir()
    job = script(tmp_path, "sleep.py", SLEEP_JOB)
    t0 = time.monotonic()
    rc, _, stderr, doc = watch(cli, b, out,
                               ["--nproc", "2", "--timeout", "1"],
                               [sys.executable, str(job), str(pids)],
                               timeout=60)
    took = time.monotonic() - t0
    assert rc == 1, stderr
    assert took < 1 + 10, took
    (f,) = [x for x in doc["findings"] if x["kind"] == "deadlock"]
    assert f["ranks"] == [0] and f["step"] == 4
    # A marker with neither site nor seq; rank 1 has no live record (the
    # bridge never started there), so it is not sent SIGUSR1, which would
    # have killed it, and has no stack.
    assert f["message"] == (
        "deadlock: rank 0 waits in all_reduce; rank 1: no stack (the bridge "
        "had not started there: no live record)"), f["message"]
    assert "site" not in f
    assert f["detail"]["ranks_without_stack"] == [
        {"rank": 1, "why": "the bridge had not started there: no live "
                           "record"}]
    assert "rank-0.hang" in doc["job"]["stopped"]
    for p in doc["job"]["processes"]:
        assert p["stopped_by_vqcheck"] is True
        assert p["signal"] == signal.SIGTERM
    for r in range(2):
        for pid in map(int, (pids / f"pids-{r}").read_text().split()):
            assert gone(pid), pid


def marked_line(text, mark):
    return next(i + 1 for i, t in enumerate(text.splitlines()) if mark in t)


def test_hang_names_both_sides_from_marker_and_sigusr1_stacks(cli,
                                                              tmp_path):
    """Rank 1 hangs (marker); rank 0, asked by SIGUSR1, dumps its stacks:
    the deadlock says where each is, and the job still ends promptly with
    nothing left."""
    b = bridge(tmp_path, TRACE, STACKS)
    out = tmp_path / "run"
    pids = tmp_path / "pids"
    pids.mkdir()
    job = script(tmp_path, "job.py", ELSEWHERE_JOB)
    line = marked_line(ELSEWHERE_JOB, "rank 0 is here")
    timeout = 1
    t0 = time.monotonic()
    rc, stdout, stderr, doc = watch(
        cli, b, out, ["--nproc", "2", "--timeout", str(timeout)],
        [sys.executable, str(job), str(pids)], timeout=60)
    took = time.monotonic() - t0
    assert rc == 1, stderr
    assert took < timeout + 10, took
    deadlocks = [x for x in doc["findings"] if x["kind"] == "deadlock"]
    assert len(deadlocks) == 1, doc["findings"]
    (f,) = deadlocks
    assert f["message"] == (
        "deadlock: rank 1 waits in all_reduce at train.py:15 (main) for "
        "5.1 s (its collective #7; last completed: all_reduce at "
        "train.py:14); rank 0 never entered it: it is at job.py:%d "
        "(somewhere_else)" % line), f["message"]
    assert f["site"] == "/abs/train.py:15 main"
    assert f["ranks"] == [0, 1] and f["step"] == 2
    d = f["detail"]
    assert d["ranks_waiting"] == [{
        "rank": 1, "op": "all_reduce", "seq": 7,
        "site": "/abs/train.py:15 main", "waited_s": 5.1,
        "last_completed": {"op": "all_reduce", "seq": 6,
                           "site": "/abs/train.py:14 main"}}]
    (e,) = d["ranks_elsewhere"]
    assert e["rank"] == 0
    assert e["site"] == "%s:%d somewhere_else" % (job, line)
    assert e["stack_file"] == str(out.resolve() / "rank-0.stacks.txt")
    assert d["ranks_without_stack"] == []
    assert sorted(d["stacks"]) == [
        str(out.resolve() / f"rank-{r}.stacks.txt") for r in range(2)]
    assert d["timeout_s"] == timeout
    assert d["hang_markers"]["1"]["seq"] == 7
    assert "Current thread" in (out / "rank-0.stacks.txt").read_text()
    assert "job.py:%d" % line in stdout  # the summary shows it
    assert "somewhere_else" in (out / "report.md").read_text()
    # Rank 0 answered SIGUSR1 and lived on until vqcheck stopped the job.
    for p in doc["job"]["processes"]:
        assert p["stopped_by_vqcheck"] is True
        assert p["signal"] == signal.SIGTERM, p
        assert gone(p["pid"])
    assert not [x for x in doc["findings"] if x["kind"] == "rank_failure"]
    for r in range(2):
        assert gone(int((pids / f"pid-{r}").read_text()))


def test_hang_stacks_file_of_garbage_is_no_stack(cli, tmp_path):
    """A stacks file that holds no frame (garbage, a NUL, a huge line)
    leaves the rank without a stack; the finding is still made."""
    b = bridge(tmp_path, TRACE, STACKS, """
if _d and _r == 0:
    faulthandler.unregister(signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, lambda *a: None)  # answers nothing
    with open(os.path.join(_d, "rank-0.stacks.txt"), "wb") as _g:
        _g.write(b"Current thread 0x1 (most recent call first):\\n"
                 b"  File \\"x\\0y.py\\", line 3 in f\\n"
                 b"  File \\"" + b"z" * 100000 + b"\\", line 4 in g\\n"
                 b"  File \\"/a.py\\", line x in h\\n\\xff\\xfe garbage\\n")
""")
    out = tmp_path / "run"
    pids = tmp_path / "pids"
    pids.mkdir()
    job = script(tmp_path, "job.py", ELSEWHERE_JOB)
    rc, _, stderr, doc = watch(cli, b, out, ["--nproc", "2", "--timeout",
                                             "1"],
                               [sys.executable, str(job), str(pids)])
    assert rc == 1, stderr
    (f,) = [x for x in doc["findings"] if x["kind"] == "deadlock"]
    assert f["message"].endswith(
        "; rank 0: no stack (the bridge did not answer)"), f["message"]
    assert f["ranks"] == [1]
    assert f["detail"]["ranks_elsewhere"] == []
    for r in range(2):
        assert gone(int((pids / f"pid-{r}").read_text()))


def test_launcher_is_never_sent_sigusr1(cli, tmp_path):
    """Without --nproc the command is a launcher, which SIGUSR1 would kill:
    at a hang it is stopped by SIGTERM as before, recorded as stopped by
    vqcheck, not as a failure; its ranks are not asked for stacks."""
    b = bridge(tmp_path, TRACE, STACKS)
    out = tmp_path / "run"
    pids = tmp_path / "pids"
    pids.mkdir()
    job = script(tmp_path, "job.py", ELSEWHERE_JOB)
    launcher = script(tmp_path, "launcher.py", LAUNCHER_OF)
    rc, _, stderr, doc = watch(cli, b, out, ["--timeout", "1"],
                               [sys.executable, str(launcher),
                                str(job), str(pids)], timeout=60)
    assert rc == 1, stderr
    (proc,) = doc["job"]["processes"]
    assert proc["rank"] is None
    assert proc["stopped_by_vqcheck"] is True
    assert proc["signal"] == signal.SIGTERM, proc
    assert not [x for x in doc["findings"] if x["kind"] == "rank_failure"]
    (f,) = [x for x in doc["findings"] if x["kind"] == "deadlock"]
    assert f["message"].startswith("deadlock: rank 1 waits in all_reduce at "
                                   "train.py:15 (main)"), f["message"]
    assert f["message"].endswith(
        "; rank 0: no stack (vqcheck watch does not signal a launcher's "
        "ranks)"), f["message"]
    assert "Thread" not in (out / "rank-0.stacks.txt").read_text()
    for r in range(2):
        assert gone(int((pids / f"pid-{r}").read_text()))


def test_ctrl_c_stops_the_job_and_exits_130(cli, tmp_path):
    b = bridge(tmp_path, TRACE)
    out = tmp_path / "run"
    pids = tmp_path / "pids"
    pids.mkdir()
    job = script(tmp_path, "sleep.py", SLEEP_JOB)
    env = dict(os.environ, VQC_BRIDGE_DIR=str(b))
    p = subprocess.Popen([cli, "watch", "--nproc", "2", "--out", str(out),
                          "--", sys.executable, str(job), str(pids)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        deadline = time.monotonic() + 30
        while len(list(pids.iterdir())) < 2:
            assert time.monotonic() < deadline, "the ranks did not start"
            assert p.poll() is None, p.communicate()
            time.sleep(0.1)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        _, stderr = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, stderr
    doc = json.loads((out / "run.json").read_text())
    assert doc["exit_code"] != 0  # not checked to its end: never clean
    assert "interrupted" in doc["job"]["stopped"]
    for r in range(2):
        for pid in map(int, (pids / f"pids-{r}").read_text().split()):
            assert gone(pid), pid


def test_no_bridge_loaded_is_exit_3(cli, tmp_path):
    b = bridge(tmp_path, "# a bridge that never writes anything\n")
    out = tmp_path / "run"
    job = script(tmp_path, "job.py", "print('ok')\n")
    rc, _, stderr, doc = watch(cli, b, out, ["--nproc", "2"],
                               [sys.executable, str(job)])
    assert rc == 3, stderr
    assert "bridge" in stderr
    assert doc["exit_code"] == 3
    # no check is claimed but the processes' exit statuses, and the
    # reports say "no verdict", not a scenario's "training stopped"
    assert doc["checks"] == ["rank_failure"], doc["checks"]
    md = (out / "report.md").read_text()
    assert "**Verdict: ERROR**: no verdict: no process of the job" in md, md
    assert "scenario" not in md.split("## ")[0], md


def test_out_onto_a_users_directory_is_refused(cli, tmp_path):
    b = bridge(tmp_path, TRACE)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    job = script(tmp_path, "job.py", "print('ok')\n")
    rc, _, stderr, _ = watch(cli, b, out, ["--nproc", "1"],
                             [sys.executable, str(job)])
    assert rc == 2, stderr
    assert "notes.txt" in stderr
    assert (out / "notes.txt").read_text() == "keep me"
    assert sorted(x.name for x in out.iterdir()) == ["notes.txt"]


def test_rerun_clears_the_earlier_runs_bridge_files(cli, tmp_path):
    out = tmp_path / "run"
    job = script(tmp_path, "job.py", "print('ok')\n")
    rc, _, _, _ = watch(cli, bridge(tmp_path, TRACE, FINDING), out,
                        ["--nproc", "2"], [sys.executable, str(job)])
    assert rc == 1
    (out / "rank-0.hang").write_text("{}")
    rc, _, stderr, doc = watch(cli, bridge(tmp_path, TRACE), out,
                               ["--nproc", "2"], [sys.executable, str(job)])
    assert rc == 0, stderr
    assert doc["findings"] == []
    assert not (out / "rank-0.hang").exists()


@pytest.mark.parametrize("args", [
    ["--nproc", "2"],                      # no command
    ["--nproc", "2", "--"],                # no command after --
    ["--nproc", "0", "--", "true"],
    ["--nproc", "1025", "--", "true"],
    ["--nproc", "x", "--", "true"],
    ["--interval", "0", "--", "true"],
    ["--timeout", "-1", "--", "true"],
    ["--out", "", "--", "true"],
    ["--bogus", "--", "true"],
])
def test_usage_errors_are_exit_2(cli, tmp_path, args):
    p = subprocess.run([cli, "watch", *args], capture_output=True, text=True,
                       timeout=30, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "vqcheck watch --help" in p.stderr
    assert not (tmp_path / "vqcheck-runs").exists()


def test_command_that_cannot_run_is_exit_3(cli, tmp_path):
    b = bridge(tmp_path, TRACE)
    out = tmp_path / "run"
    rc, _, stderr, _ = watch(cli, b, out, ["--nproc", "2"],
                             ["no-such-command-vqcheck-test"])
    assert rc == 3
    assert "no-such-command-vqcheck-test" in stderr
    assert not out.exists()


def test_help(cli):
    p = subprocess.run([cli, "watch", "--help"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0
    assert "--nproc N" in p.stdout and "VQC_WATCH_DIR" in p.stdout
    top = subprocess.run([cli, "--help"], capture_output=True, text=True,
                         timeout=30)
    assert "watch" in top.stdout


# ---- vqcheck's own output is always valid (issue 23): whatever bytes a
# rank's stderr or the bridge's files hold, run.json is valid JSON that
# vqcheck itself accepts, all three reports are written, and the exit code
# is the verdict's (1: findings), never 2.

# Rank 1's last words end in an emoji cut after 2 of its 4 bytes (torch
# 2.x gloo errors end in one; a kill can cut the pipe anywhere).
CUT_EMOJI_JOB = '''
import os, sys, time
if os.environ["RANK"] == "1":
    sys.stderr.write("Traceback (most recent call last):\\n")
    sys.stderr.flush()
    sys.stderr.buffer.write(b"RuntimeError: gloo size mismatch \\xf0\\x9f")
    sys.stderr.buffer.flush()
    sys.exit(3)
time.sleep(60)
'''

# More than the 4 KiB of stderr vqcheck keeps, all 3-byte characters, so
# the kept tail starts inside one (4096 is not a multiple of 3), and a last
# line cut inside another.
LONG_TAIL_JOB = '''
import os, sys
if os.environ["RANK"] == "0":
    sys.stderr.write("\\u20ac" * 3000 + "\\n")
    sys.stderr.flush()
    sys.stderr.buffer.write("\\u20ac".encode() * 100 + b"\\xe2\\x82")
    sys.stderr.buffer.flush()
    sys.exit(5)
'''

# A findings line whose strings hold what the bridge may pass on: a
# message longer than a finding holds (511 bytes) made of 4-byte emoji, a
# tensor name likewise, and a site object whose path is longer than run.json
# keeps, so the cut falls inside an emoji.
LONG_FINDING = '''
if _d:
    _e = "\\U0001F525"
    with open(os.path.join(_d, "rank-%d.findings.jsonl" % _r), "a") as _f:
        _f.write(json.dumps({"kind": "lost_inplace", "step": 1,
                             "ranks": [_r], "tensor": "t" + _e * 40,
                             "site": {"file": "/abs/" + _e * 100 + ".py",
                                      "line": 7, "func": "f" + _e * 20},
                             "message": "lost " + _e * 200,
                             "detail": {"rank": _r}}) + "\\n")
'''


def watch_bytes(cli, bridge_dir, out, args, job, timeout=60):
    """watch() for jobs whose stderr is not UTF-8: (returncode, stdout,
    stderr as text with bad bytes replaced, run.json or None)."""
    env = dict(os.environ)
    env["VQC_BRIDGE_DIR"] = str(bridge_dir)
    p = subprocess.run([cli, "watch", "--out", str(out), *args, "--", *job],
                       capture_output=True, timeout=timeout, env=env)
    run_json = out / "run.json"
    # Strict: vqcheck's own file must be UTF-8 (and ASCII, as it writes it).
    doc = (json.loads(run_json.read_bytes().decode("utf-8"))
           if run_json.exists() else None)
    return (p.returncode, p.stdout.decode("utf-8", "replace"),
            p.stderr.decode("utf-8", "replace"), doc)


def assert_reports_valid(cli, out, code=1):
    """The three reports exist and are UTF-8; vqcheck reads its own run.json
    back (`vqcheck report` validates it, then exits with the run's code)."""
    for name in ("report.md", "report.html", "junit.xml"):
        assert (out / name).exists(), name + " was not written"
        (out / name).read_bytes().decode("utf-8")  # strict
    p = subprocess.run([cli, "report", str(out), "--format", "json"],
                       capture_output=True, timeout=60)
    assert p.returncode == code, p.stderr.decode("utf-8", "replace")


def test_output_valid_last_words_with_a_cut_emoji(cli, tmp_path):
    b = bridge(tmp_path, TRACE)
    out = tmp_path / "run"
    job = script(tmp_path, "fail.py", CUT_EMOJI_JOB)
    rc, _, stderr, doc = watch_bytes(cli, b, out,
                                     ["--nproc", "2", "--timeout", "2"],
                                     [sys.executable, str(job)])
    assert rc == 1, stderr
    assert_reports_valid(cli, out)
    (f,) = [x for x in doc["findings"] if x["kind"] == "rank_failure"]
    assert f["ranks"] == [1]
    assert "gloo size mismatch" in f["message"]
    procs = {p["rank"]: p for p in doc["job"]["processes"]}
    assert "gloo size mismatch" in procs[1]["stderr_tail"]
    assert "gloo size mismatch" in (out / "report.md").read_text("utf-8")


def test_output_valid_stderr_tail_cut_mid_character(cli, tmp_path):
    b = bridge(tmp_path, TRACE)
    out = tmp_path / "run"
    job = script(tmp_path, "fail.py", LONG_TAIL_JOB)
    rc, _, stderr, doc = watch_bytes(cli, b, out, ["--nproc", "1"],
                                     [sys.executable, str(job)])
    assert rc == 1, stderr
    assert_reports_valid(cli, out)
    (p,) = doc["job"]["processes"]
    assert p["exit_code"] == 5 and "\u20ac" * 50 in p["stderr_tail"]
    (f,) = [x for x in doc["findings"] if x["kind"] == "rank_failure"]
    assert "\u20ac" in f["message"]


def test_output_valid_bridge_strings_too_long_and_cut(cli, tmp_path):
    b = bridge(tmp_path, TRACE, LONG_FINDING)
    out = tmp_path / "run"
    job = script(tmp_path, "job.py", "print('ok')\n")
    rc, _, stderr, doc = watch_bytes(cli, b, out, ["--nproc", "2"],
                                     [sys.executable, str(job)])
    assert rc == 1, stderr
    assert_reports_valid(cli, out)
    (f,) = doc["findings"]
    assert f["kind"] == "lost_inplace" and f["ranks"] == [0, 1]
    # Cut where a character ends, and said so.
    assert f["message"].startswith("lost \U0001F525")
    assert len(f["message"].encode()) <= 511
    assert len(f["tensor"].encode()) <= 127
    assert f["tensor"].startswith("t\U0001F525")
    # The site object: the path keeps its end, func its first 40 bytes.
    assert f["site"].endswith(".py:7 f" + "\U0001F525" * 9)
    assert len(f["site"].encode()) <= 255
    assert sorted(f["truncated"]) == ["message", "site", "tensor"]
    assert "invalid_utf8" not in f
