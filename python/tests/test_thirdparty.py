"""The torch 2.x acceptance on current third-party releases, unmodified,
under `vqcheck watch` (pinned by scripts/torch-env.sh into build-py/
thirdparty; the jobs, in jobs/thirdparty/, are written as their READMEs
show, with no vqcheck import):

- vector-quantize-pytorch 1.32.0 in 2-rank DDP jobs: VectorQuantize and
  ResidualVQ with k-means init and dead-code expiry (their
  all_gather_variably_sized drops async broadcast Works, then barrier()
  orders them: clean), FSQ (clean), and LFQ, whose maybe_distributed_mean
  discards the result of torch.distributed.nn's all_reduce: found at its
  line;
- a Lightning 2.6.6 DDP job on CPU: clean, and with a weight changed on
  rank 0 only, a divergence.
"""
import json
import os
import sys
from pathlib import Path

import pytest

from conftest import run_watch

torch = pytest.importorskip("torch")
_version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
pytestmark = pytest.mark.skipif(
    _version < (2, 5),
    reason=f"torch {torch.__version__}: these releases need torch >= 2.5 "
           "(the torch 2.x lane, scripts/torch-env.sh)")

HERE = Path(__file__).resolve().parent
JOBS = HERE / "jobs" / "thirdparty"
THIRDPARTY = HERE.parents[1] / "build-py" / "thirdparty"


def release(name):
    folder = THIRDPARTY / name
    if not (folder / ".complete").is_file():
        pytest.fail(f"{folder} is missing: run scripts/torch-env.sh, which "
                    "installs the pinned releases these tests use")
    return folder


def watch(cli, tmp_path, folder, job, *args):
    out = tmp_path / "run"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(folder))
    p = run_watch([cli, "watch", "--nproc", "2", "--timeout", "60",
                   "--out", str(out), "--", sys.executable, str(JOBS / job),
                   *args], env=env, timeout=400)
    text = p.stdout + p.stderr
    assert (out / "run.json").exists(), text[-4000:]
    return p.returncode, json.loads((out / "run.json").read_text()), text


@pytest.mark.parametrize("kind", ["vq", "rvq", "fsq"])
def test_vector_quantize_pytorch_quantizers_are_clean(cli, tmp_path, kind):
    rc, run, text = watch(cli, tmp_path,
                          release("vector-quantize-pytorch-1.32.0"),
                          "vq_pytorch_job.py", kind)
    assert rc == 0, (run["findings"], text[-3000:])
    assert run["findings"] == []
    assert run["analysis"]["digests_compared"] > 0


def test_vector_quantize_pytorch_lfq_discarded_all_reduce(cli, tmp_path):
    rc, run, text = watch(cli, tmp_path,
                          release("vector-quantize-pytorch-1.32.0"),
                          "vq_pytorch_job.py", "lfq")
    assert rc == 1, text[-3000:]
    [f] = run["findings"]
    assert f["kind"] == "lost_inplace" and f["ranks"] == [0, 1], f
    assert f["site"].endswith("lookup_free_quantization.py:41 "
                              "maybe_distributed_mean"), f
    assert f["detail"]["result"] == "discarded"


def test_lightning_ddp_clean(cli, tmp_path):
    rc, run, text = watch(cli, tmp_path, release("lightning-2.6.6"),
                          "lightning_job.py", "clean")
    assert rc == 0, (run["findings"], text[-3000:])
    assert run["analysis"]["digests_compared"] > 0


def test_lightning_ddp_rank0_weight_change_diverges(cli, tmp_path):
    rc, run, text = watch(cli, tmp_path, release("lightning-2.6.6"),
                          "lightning_job.py", "planted")
    assert rc == 1, text[-3000:]
    kinds = {f["kind"] for f in run["findings"]}
    assert kinds == {"divergence"}, run["findings"]
    f = min(run["findings"], key=lambda f: f["step"])
    assert f["tensor"].endswith("net.0.weight"), f
