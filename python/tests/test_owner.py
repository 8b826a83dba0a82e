"""The bridge never writes through a link in its run directory (the C
library's rule, vqc/fsutil.h "Links"): a symbolic link at rank-<r>.live.jsonl,
rank-<r>.findings.jsonl or rank-<r>.trace.jsonl is refused with a message
naming it, and the file it points to, outside the directory, is untouched.
Before, the live record and the findings were truncated and overwritten
through the link, and a linked trace was refused as "not a vqcheck trace"
without saying it was a link.

The jobs run like test_bridge's: the bridge loaded by sitecustomize
(PYTHONPATH) with VQC_WATCH_DIR set, no `vqcheck watch` around them (which
would refuse the directory before the job starts)."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import vqcheck.torch as vt

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BRIDGE = ROOT / "python" / "bridge"
JOBS = HERE / "jobs"
PRECIOUS = "the user's file, outside the run directory\n"


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _linked_run_dir(tmp_path, name):
    """tmp_path/run with `name` a symbolic link to tmp_path/precious.txt."""
    target = tmp_path / "precious.txt"
    target.write_text(PRECIOUS)
    run = tmp_path / "run"
    run.mkdir()
    (run / name).symlink_to(target)
    return run, target


def _run_lost_cases(run):
    """lost_cases.py (a live record and findings on rank 0) under the
    bridge, writing into run."""
    path = str(BRIDGE)
    if os.environ.get("PYTHONPATH"):
        path += os.pathsep + os.environ["PYTHONPATH"]
    env = dict(os.environ, VQC_WATCH_DIR=str(run), PYTHONPATH=path,
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    return subprocess.run([sys.executable, str(JOBS / "lost_cases.py")],
                          env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("name", ["rank-0.live.jsonl",
                                  "rank-0.findings.jsonl"])
def test_bridge_refuses_a_linked_rank_file(tmp_path, name):
    run, target = _linked_run_dir(tmp_path, name)
    p = _run_lost_cases(run)
    assert target.read_text() == PRECIOUS, p.stderr
    assert (run / name).is_symlink()
    assert f"refusing to write through the link {run / name}" in p.stderr, \
        p.stderr
    assert "remove it" in p.stderr, p.stderr


def test_trace_writer_refuses_a_link(tmp_path):
    run, target = _linked_run_dir(tmp_path, "rank-0.trace.jsonl")
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    # The trace is opened at the first checked step. OSError: the bridge's
    # LinkRefused (before, a FileExistsError that did not say "link").
    with pytest.raises(OSError) as e:
        with vt.watch(model, opt, out=run):
            opt.zero_grad()
            model(torch.randn(3, 4)).square().mean().backward()
            opt.step()
    assert str(run / "rank-0.trace.jsonl") in str(e.value)
    assert "refusing to write through the link" in str(e.value)
    assert target.read_text() == PRECIOUS
    assert (run / "rank-0.trace.jsonl").is_symlink()
