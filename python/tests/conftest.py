"""Shared helpers for the vqcheck package's tests (pytest, run by
scripts/test.sh against the package installed in a venv by `pip install .`).

- cli: the `vqcheck` CLI the package installed (next to sys.executable), or
  $VQC_TEST_CLI.
- run_ranks: starts a script as N real processes with the torchrun
  environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
  MASTER_PORT), waits for all with a deadline, kills them all on timeout.
- run_watch: subprocess.run of `vqcheck watch`, again after torch's abort
  at exit (TORCH_EXIT_ABORT) only, up to EXIT_ABORT_TRIES runs.
- compare: runs `vqcheck compare DIR --json` and returns (exit code, run.json).
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def cli_path() -> str:
    env = os.environ.get("VQC_TEST_CLI")
    if env:
        return env
    return str(Path(sys.executable).parent / "vqcheck")


@pytest.fixture
def cli() -> str:
    path = cli_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"no vqcheck CLI at {path}: install the package with "
                    "`pip install .` into this venv (scripts/test.sh does)")
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# torch 2.15's gloo process group can abort a rank at interpreter exit,
# after the job's work is done and destroy_process_group() returned: a
# finished AsyncWork destroyed on gloo's runLoop thread releases a Python
# object held in its ThreadLocalState, needs the GIL while Python
# finalizes, the thread is ended by pthread_exit's forced unwind through a
# noexcept destructor, and std::terminate aborts the process (SIGABRT,
# this text on stderr; seen on this repository's 2-vCPU machine in about
# one job in ten, with or without vqcheck, from a core dump's backtrace;
# under CI's load a torch.compile'd DDP job ended so twice in a row).
# A job that ends so is run again (EXIT_ABORT_TRIES runs at most), never
# passed as it is; the tests whose subject is not the job's exit can also
# set such ranks apart (run_ranks exit_abort_ok, split_torch_exit_aborts),
# and judge the rest.
TORCH_EXIT_ABORT = "terminate called without an active exception"
# How many times a torch job is run when its ranks keep hitting that abort
# at exit (a torch bug, pytorch#190489: a gloo thread frees work holding a
# Python object while the interpreter finalizes). Under CI's load a job's
# plain run has hit it twice in a row (test_layouts' compiled DDP job, and
# test_ddp's ema_no_reduce job at 0e8b8d0's fresh-clone run); three runs
# make a spurious failure unlikely, and only that exact abort is retried.
EXIT_ABORT_TRIES = 3


def torch_exit_abort(rc, err):
    """Whether a process ended as the torch bug above ends one."""
    return rc in (-6, 134) and TORCH_EXIT_ABORT in (err or "")


def split_torch_exit_aborts(run):
    """The findings of a watched run's run.json, as (torch's aborts at exit,
    the others). An abort at exit is a rank_failure every process of which
    finished first (after_finish: its end line written, its steps' digests
    compared) and then died by SIGABRT with TORCH_EXIT_ABORT on its stderr;
    vqcheck reports it, rightly: the job failed. Anything else, a crash
    mid-training included, is in the others."""
    aborts, others = [], []
    for f in run["findings"]:
        procs = (f.get("detail") or {}).get("processes") or []
        at_exit = f["kind"] == "rank_failure" and procs and all(
            p.get("after_finish") is True and p.get("signal") == 6 and
            TORCH_EXIT_ABORT in (p.get("stderr_tail") or "") for p in procs)
        (aborts if at_exit else others).append(f)
    return aborts, others


def run_watch(argv, **kwargs):
    """subprocess.run(argv, capture_output=True, text=True, **kwargs) for a
    `vqcheck watch` of torch ranks: run again when a rank hit torch's
    abort at exit (TORCH_EXIT_ABORT on the ranks' stderr, which vqcheck
    passes through), up to EXIT_ABORT_TRIES runs, never passed as it is.
    The run directory is vqcheck's own, cleared by the next run."""
    p = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    for _ in range(EXIT_ABORT_TRIES - 1):
        if TORCH_EXIT_ABORT not in p.stdout + p.stderr:
            break
        p = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    return p


def run_ranks(script, nproc, args, timeout=180.0, tries=EXIT_ABORT_TRIES,
              env=None, exit_abort_ok=False):
    """Runs `python script args...` as nproc ranks; returns a list of
    CompletedProcess-like (returncode, stdout, stderr) per rank. A run in
    which a rank hit torch's abort at exit (TORCH_EXIT_ABORT) is run again,
    up to `tries` runs in all. env: the ranks' environment (default
    os.environ), to which the torchrun variables are added. exit_abort_ok:
    ranks that ended by torch's abort at exit are accepted as they are (for
    a run whose files, written before, are all that is used)."""
    port = free_port()
    procs = []
    base = os.environ if env is None else env
    for rank in range(nproc):
        env_r = dict(base)
        env_r.update(RANK=str(rank), WORLD_SIZE=str(nproc),
                     LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nproc),
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                     OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen(
            [sys.executable, str(script), *map(str, args)], env=env_r,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        details = []
        for rank, p in enumerate(procs):
            out, err = p.communicate()
            details.append(f"rank {rank}: {err[-2000:]}")
        pytest.fail(f"{script} did not finish in {timeout} s:\n" +
                    "\n".join(details))
    if exit_abort_ok:
        results = [(0 if torch_exit_abort(rc, err) else rc, out, err)
                   for rc, out, err in results]
    elif tries > 1 and any(torch_exit_abort(rc, err)
                           for rc, _, err in results):
        return run_ranks(script, nproc, args, timeout, tries - 1, env=env)
    for rank, (rc, out, err) in enumerate(results):
        assert rc == 0, f"rank {rank} of {script} exited {rc}:\n{err[-4000:]}"
    return results


def compare(cli, trace_dir, out_dir):
    """`vqcheck compare trace_dir --out out_dir --json`: (exit code, run.json
    as a dict, stderr)."""
    p = subprocess.run([cli, "compare", str(trace_dir), "--out", str(out_dir),
                        "--json"], capture_output=True, text=True, timeout=120)
    run = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, run, p.stderr
