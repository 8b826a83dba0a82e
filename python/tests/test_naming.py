"""The right name for what happened (issue 23): real gloo jobs under
`vqcheck watch`, each a few lines written by the test.

- A size mismatch (the same line all_reduces 4 floats on rank 0 and 5 on
  rank 1): gloo aborts rank 0 (SIGABRT, "Received data size doesn't match
  expected size") and rank 1's call fails. That is one collective_mismatch
  at that line naming both calls, not a deadlock; rank 0's abort is told
  with its signal and its last stderr lines, never guessed.
- A rank that leaves early (rank 1 exits 0 after one of three steps while
  rank 0 goes on and fails in its next all_reduce): the findings name rank
  1, never rank 0.

The C side of both is tested without torch in tests/unit/test_naming.c and
test_naming_watch.c; these check that real torch runs come out the same.
"""
import json
import os
import sys

from conftest import run_watch

MISMATCH_JOB = '''\
import torch, torch.distributed as dist
dist.init_process_group("gloo"); r = dist.get_rank()
x = torch.ones(4 + r)
dist.all_reduce(x)  # MISMATCH: 4 floats on rank 0, 5 on rank 1
print("done", x)
'''

EARLY_EXIT_JOB = '''\
import datetime, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    model(torch.randn(8, 4)).square().mean().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)  # GRADS
    opt.step()
    if rank == 1 and step == 0:
        sys.exit(0)  # LEAVES: rank 1 stops after its first step
'''


def watch(cli, tmp_path, name, text, timeout_s=10):
    """`vqcheck watch --nproc 2 --json` of job `text`: (exit code, run.json,
    stderr, the job's path)."""
    job = tmp_path / name
    job.write_text(text)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    p = run_watch([cli, "watch", "--nproc", "2", "--timeout", str(timeout_s),
                   "--out", str(tmp_path / "run"), "--json", "--",
                   sys.executable, str(job)], env=env, timeout=120)
    run = json.loads(p.stdout) if p.stdout.strip().startswith("{") else None
    return p.returncode, run, p.stderr, job


def line_of(job, marker):
    return next(i + 1 for i, t in enumerate(job.read_text().splitlines())
                if marker in t)


def test_gloo_size_mismatch_is_a_collective_mismatch_at_its_line(cli,
                                                                  tmp_path):
    rc, run, err, job = watch(cli, tmp_path, "mismatch.py", MISMATCH_JOB)
    assert rc == 1, err
    kinds = sorted(f["kind"] for f in run["findings"])
    assert "deadlock" not in kinds, run["findings"]
    [mis] = [f for f in run["findings"] if f["kind"] == "collective_mismatch"]
    line = line_of(job, "# MISMATCH")
    assert mis["site"] == f"{job}:{line} <module>", mis
    assert mis["ranks"] == [0, 1]
    assert "all_reduce(float32, count 4)" in mis["message"], mis["message"]
    assert "all_reduce(float32, count 5)" in mis["message"], mis["message"]
    assert mis["detail"]["differs"] == ["count"]
    # gloo aborts one side (which one is a race; usually rank 0) and fails
    # the other's call. The abort is told with its signal and last words,
    # in the mismatch itself or in a rank_failure of its own.
    procs = {p["rank"]: p for p in run["job"]["processes"]}
    aborted = [r for r, p in procs.items() if p["signal"] == 6]
    for r in aborted:
        told = [f for f in run["findings"]
                if r in f["ranks"] and "signal 6 (SIGABRT, Aborted)" in
                f["message"]]
        assert told, run["findings"]
        # its last words: in the message, or beside its call in the
        # mismatch's detail (once watch recorded them in its live record)
        words = [f["message"] for f in told] + \
            [c.get("last_words", "") for f in told
             for c in f["detail"].get("calls", []) if c.get("rank") == r]
        assert any("Received data size doesn't match" in w
                   for w in words), told
    for f in run["findings"]:
        assert "OOM killer" not in f["message"], f
        if f["kind"] == "rank_failure":
            assert sorted(f["ranks"]) == aborted, f


def test_rank_that_left_early_is_the_rank_named(cli, tmp_path):
    rc, run, err, job = watch(cli, tmp_path, "early.py", EARLY_EXIT_JOB,
                              timeout_s=5)
    assert rc == 1, err
    procs = {p["rank"]: p for p in run["job"]["processes"]}
    assert procs[1]["exit_code"] == 0
    ends = [f for f in run["findings"]
            if f["kind"] in ("deadlock", "rank_failure", "collective_mismatch")]
    assert ends, run["findings"]
    for f in ends:
        assert f["ranks"] == [1], f
    [first] = ends
    assert first["message"].startswith("rank 1 left early"), first
    assert first["site"] == f"{job}:{line_of(job, '# GRADS')} <module>"


HAND_STEPPED_JOB = '''\
import torch, torch.distributed as dist
dist.init_process_group("gloo")
torch.manual_seed(0)
w = torch.nn.Linear(4, 4)
for step in range(3):
    w(torch.randn(3, 4)).pow(2).mean().backward()
    for p in w.parameters():
        dist.all_reduce(p.grad)
    with torch.no_grad():
        for p in w.parameters():
            p -= 0.01 * p.grad  # weights updated by hand: no optimizer
            p.grad = None
'''


def test_no_step_end_is_exit_3_saying_why(cli, tmp_path):
    """A loop that updates its weights by hand ends no step the bridge can
    see: no state is digested, so no verdict (exit 3), and the message says
    why and what to do, on the terminal as in run.json."""
    job = tmp_path / "by_hand.py"
    job.write_text(HAND_STEPPED_JOB)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    p = run_watch([cli, "watch", "--nproc", "2", "--out",
                   str(tmp_path / "run"), "--", sys.executable, str(job)],
                  env=env, timeout=120)
    assert p.returncode == 3, p.stdout + p.stderr
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["findings"] == []
    why = run["training"]["message"]
    assert "no rank recorded a step end" in why, why
    assert "vqcheck.torch.step()" in why
    assert f"no verdict (exit 3): {why}" in p.stdout


RAISES_JOB = '''\
import torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 8))
opt = torch.optim.Adam(model.parameters())
for step in range(5):
    x = torch.randn(4, 8)
    if rank == 1 and step == 2:
        x = x[:, :7]  # a shape bug in one rank's data
    loss = model(x).sum()  # RAISES
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def _check_raised(run, job, text):
    failures = [f for f in run["findings"] if f["kind"] == "rank_failure"]
    assert len(failures) == 1 and len(run["findings"]) == 1, run["findings"]
    f = failures[0]
    assert f["step"] == 2, f
    assert f["site"].startswith(f"{job}:{line_of(job, 'RAISES')} "), f
    assert f["message"].startswith("rank 1 raised RuntimeError: "), f
    assert "mat1 and mat2 shapes cannot be multiplied" in f["message"], f
    assert f["detail"]["exception"] == "RuntimeError"
    assert 1 in f["ranks"], f


def test_an_exception_is_the_rank_failure_with_its_line_and_step(cli,
                                                                 tmp_path):
    """Rank 1 raises in its forward at step 2; rank 0's all_reduce then
    fails because rank 1 is gone. One rank_failure: rank 1's exception at
    its line and step first (rank 0's failure after it), not 'exited with
    status 1' at step -1."""
    rc, run, stderr, job = watch(cli, tmp_path, "raises.py", RAISES_JOB)
    assert rc == 1, stderr[-3000:]
    _check_raised(run, job, stderr)


def test_an_exception_under_torchrun_names_the_rank_not_the_launcher(
        cli, tmp_path):
    """The same job started by torchrun (`python -m torch.distributed.run`,
    one launcher process under watch): the launcher's own exception
    (ChildFailedError) is no rank's, and it never takes the name of rank
    0's files."""
    job = tmp_path / "raises.py"
    job.write_text(RAISES_JOB)
    # TMPDIR: torchrun's agent leaves a torchelastic_* directory in it
    # (its log dir), one more in /tmp for every run without this.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1", TMPDIR=str(tmp))
    env.pop("PYTHONPATH", None)
    out = tmp_path / "run"
    p = run_watch([cli, "watch", "--timeout", "20", "--out", str(out), "--",
                   sys.executable, "-m", "torch.distributed.run",
                   "--nproc_per_node", "2", str(job)], env=env, timeout=180)
    assert p.returncode == 1, (p.stdout + p.stderr)[-3000:]
    run = json.loads((out / "run.json").read_text())
    _check_raised(run, job, p.stderr)
    start = json.loads((out / "rank-0.live.jsonl").read_text()
                       .splitlines()[0])
    assert start["event"] == "start" and start["rank"] == 0
    steps = [json.loads(x) for x in
             (out / "rank-0.live.jsonl").read_text().splitlines()]
    assert any(e.get("event") == "step" for e in steps)
