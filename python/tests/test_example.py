"""examples/pytorch/ddp_watch.py runs as documented: a clean 2-rank DDP job
whose traces `vqcheck compare` finds clean, and with --bug one whose traces
give exactly the planted divergence (step 3, tensor optimizer.lr, the
weights it moved among also_differing)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXIT_ABORT_TRIES, TORCH_EXIT_ABORT, compare

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pytorch" / "ddp_watch.py"


def _run_example(out: Path, *extra: str) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for _ in range(EXIT_ABORT_TRIES):  # again after torch's abort at exit only
        try:
            p = subprocess.run([sys.executable, str(EXAMPLE), "--nproc", "2",
                                "--out", str(out), *extra], env=env,
                               capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"{EXAMPLE.name} did not finish in 180 s:\n"
                        f"{e.stderr}")
        if not (p.returncode != 0 and TORCH_EXIT_ABORT in p.stderr):
            break
    assert p.returncode == 0, f"{EXAMPLE.name} exited {p.returncode}:\n" \
        f"{p.stdout}\n{p.stderr[-4000:]}"
    for rank in (0, 1):
        assert (out / f"rank-{rank}.trace.jsonl").stat().st_size > 0


def test_clean_run_compares_clean(cli, tmp_path):
    _run_example(tmp_path / "traces")
    rc, run, err = compare(cli, tmp_path / "traces", tmp_path / "cmp")
    assert rc == 0, f"exit {rc}: {run['findings']}\n{err}"
    assert run["findings"] == []
    assert (tmp_path / "cmp" / "report.html").is_file()


def test_planted_bug_is_found_at_its_step(cli, tmp_path):
    _run_example(tmp_path / "traces", "--bug")
    rc, run, err = compare(cli, tmp_path / "traces", tmp_path / "cmp")
    assert rc == 1, f"exit {rc}\n{err}"
    findings = run["findings"]
    assert len(findings) == 1, findings
    f = findings[0]
    assert (f["kind"], f["step"], f["tensor"]) == ("divergence", 3,
                                                   "optimizer.lr"), f
    # Two ranks, two digests: no majority, so both ranks are named.
    assert f["ranks"] == [0, 1] and f["detail"]["majority"] is False, f
    assert {"0.weight", "0.bias", "2.weight", "2.bias"} <= \
        set(f["detail"]["also_differing"]), f


@pytest.mark.parametrize("bug", [False, True])
def test_the_example_under_vqcheck_watch(cli, tmp_path, bug):
    """The example as a launcher (it starts its 2 ranks itself with
    torch.multiprocessing): `vqcheck watch -- python ddp_watch.py` checks
    the ranks it spawns, with no --nproc. Clean: exit 0, no finding;
    --bug: the same divergence at step 3 as its own traces show."""
    import json
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    p = subprocess.run([cli, "watch", "--out", str(tmp_path / "run"),
                        "--json", "--", sys.executable, str(EXAMPLE),
                        "--nproc", "2", "--out", str(tmp_path / "traces"),
                        *(["--bug"] if bug else [])],
                       env=env, capture_output=True, text=True, timeout=300)
    run = json.loads(p.stdout)
    if not bug:
        assert p.returncode == 0, (p.stderr[-4000:], run["findings"])
        assert run["findings"] == []
        return
    assert p.returncode == 1, p.stderr[-4000:]
    [f] = run["findings"]
    assert (f["kind"], f["step"]) == ("divergence", 3), f
    assert f["tensor"] == "optimizer.lr", f
    assert any(t.endswith("0.weight") for t in f["detail"]["also_differing"])
