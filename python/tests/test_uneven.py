"""Ranks that end cleanly after different numbers of steps (uneven_ends.h),
real gloo jobs under `vqcheck watch`, written as users write them:

- DDP under torch's Join context with uneven inputs (rank 0 has 4 batches,
  rank 1 has 6): legal, so exit 0 with no finding, a warning naming each
  rank's last step, and the steps every rank trained compared;
- the same job with noise added to one replica's weight at step 2: still
  a divergence at step 2 naming the drifted tensor (uneven ends never hide
  a drift);
- DDP where rank 1 leaves the loop (sys.exit(0)) after 3 steps without
  Join: rank 0 then fails in its backward ("Connection closed by peer").
  The finding says first that rank 1 ended cleanly while rank 0 went on,
  and its detail lists rank 1 as "ended_before";
- DDP where rank 0 makes one extra all_reduce after a step: it pairs with
  rank 1's next DDP all_reduce (issued from C++), and either rank may then
  fail (gloo aborts on the size, or the other raises "Connection reset").
  The first finding is the deadlock at the extra call's line, naming rank
  1, whatever failed after it (an exception of a rank the collectives name
  is their consequence, analyze.c exceptions_first).
"""
import json
import os
import sys

from conftest import run_watch

JOIN_JOB = '''\
import os
import torch, torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.join import Join
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.randn(4, 8) for _ in range(4 + 2 * rank)]
with Join([model]):
    for step, x in enumerate(batches):
        opt.zero_grad()
        model(x).sum().backward()
        if os.environ.get("PLANT") and rank == 1 and step == 2:
            with torch.no_grad():
                model.module.weight.add_(1e-3)  # DRIFT
        opt.step()
dist.destroy_process_group()
'''

EARLY_EXIT_JOB = '''\
import sys
import torch, torch.distributed as dist
import torch.nn as nn
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    if rank == 1 and step == 3:
        sys.exit(0)  # LEAVES: no Join, the others go on
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()  # BACKWARD
    opt.step()
dist.destroy_process_group()
'''

EXTRA_JOB = '''\
import torch, torch.distributed as dist
import torch.nn as nn
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    opt.zero_grad()
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    opt.step()
    if rank == 0 and step == 2:
        dist.all_reduce(torch.tensor([loss.item()]))  # EXTRA
dist.destroy_process_group()
'''


def watch(cli, tmp_path, text, plant=False):
    """`vqcheck watch --nproc 2 --json` of job `text`: (exit code, run.json,
    stderr, the job's path)."""
    job = tmp_path / "job.py"
    job.write_text(text)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    if plant:
        env["PLANT"] = "1"
    p = run_watch([cli, "watch", "--nproc", "2", "--timeout", "20",
                   "--out", str(tmp_path / "run"), "--json", "--",
                   sys.executable, str(job)], env=env, timeout=180)
    run = json.loads(p.stdout) if p.stdout.strip().startswith("{") else None
    assert run is not None, p.stderr
    return p.returncode, run, p.stderr, job


def test_join_with_uneven_inputs_is_clean(cli, tmp_path):
    rc, run, err, _ = watch(cli, tmp_path, JOIN_JOB)
    assert rc == 0, (run["findings"], err)
    assert run["findings"] == []
    assert run["analysis"]["digests_compared"] > 0
    [w] = [w for w in run["analysis"]["warnings"] if "uneven ends" in w]
    assert "rank 0 after step 3, rank 1 after step 5" in w, w
    assert run["training"]["status"] == "VQC_OK", run["training"]
    # what ran is said (watch_checks.h): the digests were compared and
    # Join's own all_reduce was recorded by two ranks; the reports and
    # JUnit never call these checks skipped
    for kind in ("divergence", "deadlock", "rank_failure",
                 "collective_mismatch", "lost_inplace"):
        assert kind in run["checks"], run["checks"]
    assert set(run["checks_not_run"]) == {"shape_mismatch", "nonfinite"}
    verdict = (tmp_path / "run" / "report.md").read_text().split("\n")[2]
    assert verdict.startswith("**Verdict: CLEAN**"), verdict
    assert "divergence" not in verdict and "deadlock" not in verdict, verdict
    junit = (tmp_path / "run" / "junit.xml").read_text()
    assert junit.count("<skipped") == 2, junit


def test_join_with_uneven_inputs_still_finds_a_drift(cli, tmp_path):
    rc, run, err, _ = watch(cli, tmp_path, JOIN_JOB, plant=True)
    assert rc == 1, err
    kinds = [f["kind"] for f in run["findings"]]
    assert kinds[0] == "divergence", run["findings"]
    div = run["findings"][0]
    assert div["step"] == 2, div
    assert "weight" in div["tensor"], div
    assert "rank_failure" not in kinds, run["findings"]


def test_a_rank_that_leaves_early_is_named(cli, tmp_path):
    rc, run, err, job = watch(cli, tmp_path, EARLY_EXIT_JOB)
    assert rc == 1, err
    [f] = [f for f in run["findings"] if f["kind"] == "rank_failure"]
    assert f["ranks"] == [0], f
    assert f["detail"]["ended_before"] == [1], f["detail"]
    assert f["message"].startswith(
        "rank 1 ended cleanly after 3 steps while rank 0 went on (in step "
        "3)"), f["message"]


def test_an_extra_all_reduce_is_told_first(cli, tmp_path):
    rc, run, err, job = watch(cli, tmp_path, EXTRA_JOB)
    assert rc == 1, err
    first = run["findings"][0]
    line = next(i + 1 for i, t in enumerate(job.read_text().splitlines())
                if "# EXTRA" in t)
    assert first["kind"] == "deadlock", run["findings"]
    assert first["site"] == f"{job}:{line} <module>", first
    assert first["ranks"] == [1], first
