"""Real multi-process gloo jobs watched by vqcheck.torch.watch, checked
end to end by the `vqcheck compare` CLI the package installs.

Ranks run as separate processes with the torchrun environment (conftest's
run_ranks; Debian's torchrun is broken on Python 3.11). The learning-rate
case uses 3 ranks: with 2, one rank against one other has no majority, and
vqcheck then names both rather than blame one by tie-break."""
from pathlib import Path

from conftest import compare, run_ranks

JOB = Path(__file__).resolve().parent / "jobs" / "ddp_job.py"


def test_rank1_learning_rate_change_diverges_at_step_3(cli, tmp_path):
    run_ranks(JOB, 3, ["lr_change", tmp_path / "traces"])
    rc, run, err = compare(cli, tmp_path / "traces", tmp_path / "report")
    assert rc == 1, err
    findings = run["findings"]
    assert [f["kind"] for f in findings] == ["divergence"], findings
    f = findings[0]
    assert f["step"] == 3
    assert f["ranks"] == [1]
    # the learning rate, which every rank must agree on whatever the
    # layout: its line comes first in each step, so the weights that
    # differ because of it are its consequence, not the finding
    assert f["tensor"] == "optimizer.lr"
    assert f["detail"]["majority"] is True
    # the trace tells a hyper-parameter's values, so the finding does
    lr = f["detail"]["values"]
    assert set(lr) == {"0", "1"} and lr["0"] != lr["1"], lr
    assert f"value {lr['1'][0]:g} on rank 1 vs {lr['0'][0]:g} on rank 0" \
        in f["message"], f["message"]
    # the weights; not the momentum buffers, which hold the averaged
    # gradients and do not depend on the learning rate
    assert f["detail"]["also_differing"] == ["0.weight", "0.bias",
                                             "2.weight", "2.bias"]


def test_clean_twin_is_clean(cli, tmp_path):
    run_ranks(JOB, 3, ["clean", tmp_path / "traces"])
    rc, run, err = compare(cli, tmp_path / "traces", tmp_path / "report")
    assert rc == 0, (err, run and run["findings"])
    assert run["findings"] == []
    assert run["compare"]["ranks"] == 3
    assert run["compare"]["program"] == "ddp_job.py"


def test_ema_buffer_without_all_reduce_diverges_at_step_0(cli, tmp_path):
    run_ranks(JOB, 2, ["ema_no_reduce", tmp_path / "traces"])
    rc, run, err = compare(cli, tmp_path / "traces", tmp_path / "report")
    assert rc == 1, err
    f = run["findings"][0]
    assert f["kind"] == "divergence" and f["step"] == 0
    assert f["tensor"] == "1.cluster_size"
    assert "1.embed_avg" in f["detail"]["also_differing"]


def test_ema_buffer_with_all_reduce_is_clean(cli, tmp_path):
    run_ranks(JOB, 2, ["ema_reduce", tmp_path / "traces"])
    rc, run, err = compare(cli, tmp_path / "traces", tmp_path / "report")
    assert rc == 0, (err, run and run["findings"])
