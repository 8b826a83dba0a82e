"""`vqcheck watch` on the parallel layouts of torch 2.x: FSDP2, FSDP1
(FULL_SHARD, HYBRID_SHARD), tensor parallel, HSDP on a 2-D mesh, DDP on
process subgroups, a 2-stage pipeline, DDP with torch.compile (both orders)
and ZeroRedundancyOptimizer, on gloo/CPU.

Each job (jobs/layouts/, written as users write them: no vqcheck import)
runs twice under the installed CLI: clean, it must exit 0 having compared
digests, with the pieces that have no replica counted; with a planted drift
on one rank (DRIFT=<rank>: another learning rate, noise on a replicated
norm weight, a buffer moved), it must exit 1 with a divergence at the right
step and tensor, naming exactly the ranks of the replica group involved.
The verdicts are read from run.json.

Needs torch >= 2.6 (DTensor, fully_shard and pipelining as public APIs):
the torch 2.x lane (scripts/torch-env.sh). Debian's torch 1.13 lane skips
this file, saying so.
"""
import json
import os
from pathlib import Path

import pytest

from conftest import run_ranks, run_watch, split_torch_exit_aborts

torch = pytest.importorskip("torch")
_version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
pytestmark = pytest.mark.skipif(
    _version < (2, 6),
    reason=f"torch {torch.__version__}: the parallel layouts need torch >= "
           "2.6 (run the torch 2.x lane: scripts/torch-env.sh)")

JOBS = Path(__file__).resolve().parent / "jobs" / "layouts"


def watch(cli, tmp_path, job, nproc, **env):
    """Runs jobs/layouts/<job>.py under `vqcheck watch --nproc nproc`:
    (exit code, run.json, output)."""
    out = tmp_path / "run"
    full = dict(os.environ, OMP_NUM_THREADS="1",
                **{k: str(v) for k, v in env.items()})
    import sys
    p = run_watch([cli, "watch", "--nproc", str(nproc), "--timeout", "60",
                   "--out", str(out), "--", sys.executable,
                   str(JOBS / f"{job}.py")], env=full, timeout=300)
    text = p.stdout + p.stderr
    path = out / "run.json"
    assert path.exists(), text[-4000:]
    return p.returncode, json.loads(path.read_text()), text


def assert_clean(rc, run, text, no_replica):
    """Clean: no finding but torch's abort at exit after every check
    (conftest.split_torch_exit_aborts), which is exit 1 as it must be."""
    exit_aborts, others = split_torch_exit_aborts(run)
    assert others == [], others
    assert rc == (1 if exit_aborts else 0), text[-4000:]
    analysis = run["analysis"]
    assert analysis["digests_compared"] > 0
    if no_replica:
        assert analysis["no_replica"] > 0, analysis
    else:
        assert analysis["no_replica"] == 0, analysis
    assert analysis["lines_not_compared"] == 0, analysis
    assert "not digested" not in text and "check failed" not in text, text


def assert_divergence(rc, run, text, step, tensor, ranks):
    """The first divergence is the planted one; a drift may spread to
    other replica groups at later steps (a drifted norm weight changes the
    gradient of a replicated bias), each its own finding, never another
    kind."""
    assert rc == 1, text[-4000:]
    _, findings = split_torch_exit_aborts(run)
    assert {f["kind"] for f in findings} == {"divergence"}, findings
    f = min(findings, key=lambda f: f["step"])
    assert (f["step"], f["tensor"]) == (step, tensor), f
    assert sorted(f["ranks"]) == ranks, f


# (job, nproc, extra environment, whether some pieces have no replica)
CLEAN = [
    ("fsdp2_job", 2, {}, True),
    ("fsdp1_job", 2, {}, True),
    ("fsdp1_job", 4, {"STRATEGY": "HYBRID_SHARD"}, False),
    ("tp_job", 2, {}, True),
    ("hsdp_job", 4, {}, False),
    ("subgroups_job", 4, {}, False),
    ("pipeline_job", 2, {}, True),
    ("compiled_job", 2, {"ORDER": "compile_ddp"}, False),
    ("compiled_job", 2, {"ORDER": "ddp_compile"}, False),
    ("zero_job", 2, {}, True),
    # BatchNorm's running statistics are per rank by design: no replica
    ("batchnorm_job", 2, {}, True),
    ("amp_job", 2, {}, False),
    ("evaluation_job", 2, {}, False),
]


@pytest.mark.parametrize("job,nproc,env,no_replica", CLEAN,
                         ids=[f"{c[0]}-{'-'.join(c[2].values()) or 'default'}"
                              for c in CLEAN])
def test_clean_layout_is_clean(cli, tmp_path, job, nproc, env, no_replica):
    rc, run, text = watch(cli, tmp_path, job, nproc, **env)
    assert_clean(rc, run, text, no_replica)


# (job, nproc, extra environment, step, tensor, ranks named)
DRIFT = [
    # another lr in a pure FSDP job: only the hyper-parameters, which every
    # rank must agree on, can show it (every other piece has no replica)
    ("fsdp2_job", 2, {"DRIFT": 1}, 0, "optimizer.lr", [0, 1]),
    ("fsdp1_job", 2, {"DRIFT": 1}, 0, "optimizer.lr", [0, 1]),
    # HYBRID_SHARD: rank 3 holds shard 1 with rank 1
    ("fsdp1_job", 4, {"STRATEGY": "HYBRID_SHARD", "DRIFT": 3}, 0,
     "optimizer.lr", [3]),
    # the replicated LayerNorm of a tensor-parallel MLP
    ("tp_job", 2, {"DRIFT": 1}, 1, "MLP.norm.weight", [0, 1]),
    # HSDP: rank 3's shard is replicated on rank 1 only
    ("hsdp_job", 4, {"DRIFT": 3}, 1, "FSDPSequential.1.weight", [1, 3]),
    # subgroup {2, 3}: ranks 0 and 1 train another model and are not named
    ("subgroups_job", 4, {"DRIFT": 3}, 1, "Linear.weight", [2, 3]),
    ("pipeline_job", 2, {"DRIFT": 1}, 0, "optimizer.lr", [0, 1]),
    ("compiled_job", 2, {"ORDER": "compile_ddp", "DRIFT": 1}, 1, "Net.seen",
     [0, 1]),
    ("compiled_job", 2, {"ORDER": "ddp_compile", "DRIFT": 1}, 1, "Net.seen",
     [0, 1]),
    ("zero_job", 2, {"DRIFT": 1}, 0, "optimizer.lr", [0, 1]),
    # the BatchNorm's weight is a parameter: compared although its running
    # statistics are not
    ("batchnorm_job", 2, {"DRIFT": 1}, 1, "Sequential.1.weight", [0, 1]),
    # another loss scale on one rank: the scale, which every rank must
    # agree on, is the finding (the weights it moved follow it)
    ("amp_job", 2, {"DRIFT": 1}, 0, "grad_scaler.scale", [0, 1]),
    # rank 0 left in eval mode after its validation: only the modules'
    # training flags differ (DDP averages the gradients into one update)
    ("evaluation_job", 2, {"DRIFT": 0}, 2, "Sequential.modules.training",
     [0, 1]),
]


@pytest.mark.parametrize("job,nproc,env,step,tensor,ranks", DRIFT,
                         ids=[f"{d[0]}-{'-'.join(map(str, d[2].values()))}"
                              for d in DRIFT])
def test_drift_in_one_replica_is_found(cli, tmp_path, job, nproc, env, step,
                                       tensor, ranks):
    rc, run, text = watch(cli, tmp_path, job, nproc, **env)
    assert_divergence(rc, run, text, step, tensor, ranks)


def test_batchnorm_statistics_are_named_not_compared(cli, tmp_path):
    """The per-rank running statistics are listed with the reason, and
    num_batches_tracked (equal on every rank) is still compared."""
    rc, run, text = watch(cli, tmp_path, "batchnorm_job", 2)
    assert_clean(rc, run, text, True)
    pieces = {(p["tensor"], p["shard"])
              for p in run["analysis"]["no_replica_tensors"]}
    why = "per rank by design: running statistics of its own batches"
    assert pieces == {(f"Sequential.{m}.running_{s}", why)
                      for m in (1, 6) for s in ("mean", "var")}, pieces
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"Sequential.1.running_mean ({why})" in report


@pytest.mark.parametrize("order", ["compile_ddp", "ddp_compile"])
def test_compiled_graphs_are_the_same_under_watch(cli, tmp_path, order):
    """torch.compile sees the same program with and without the bridge:
    the graphs dynamo compiles, the calls it captures and its graph breaks
    (with their reasons) are equal, run plain (2 processes with torchrun's
    variables) and under `vqcheck watch`. The plain ranks' exit status is
    not this test's subject: one that hit torch's abort at exit
    (conftest.TORCH_EXIT_ABORT) has written its graphs before; under watch
    the abort is a finding of its own, set apart by assert_clean."""
    job = str(JOBS / "compiled_job.py")
    plain_graphs = tmp_path / "plain.json"
    env = dict(os.environ, ORDER=order, GRAPHS_TO=str(plain_graphs))
    env.pop("PYTHONPATH", None)
    run_ranks(job, 2, [], timeout=300, env=env, exit_abort_ok=True)
    watched_graphs = tmp_path / "watched.json"
    rc, run, text = watch(cli, tmp_path, "compiled_job", 2, ORDER=order,
                          GRAPHS_TO=watched_graphs)
    assert_clean(rc, run, text, False)
    plain = json.loads(plain_graphs.read_text())
    watched = json.loads(watched_graphs.read_text())
    assert plain["unique_graphs"] > 0, plain
    assert watched == plain
