"""The bridge's step-end digest off the training thread (vqcheck._bridge's
_Overlap over vqcheck._core.digest_start; docs/pytorch.md, "The digest off
the training thread").

- the digest thread itself (vqcheck._core.digest_start): the same digests
  as on the calling thread, its failures raised at result(), a fork() while
  a batch is in flight;
- the catalogue of unmodified jobs the bridge's other tests run (vector-
  quantize-pytorch 1.12.10 and 1.12.11, a learning-rate divergence, a clean
  DDP job, a dropped out-of-place result, a gather without gradient, sub-
  group collectives, state the digest refuses) under `vqcheck watch` with
  VQC_WATCH_OVERLAP=1 and =0: the same exit code, findings and trace lines,
  and the digests really made on the thread in the first run;
- state written right after a step end (a module's forward, DDP's buffer
  broadcast, an in-place all_reduce into a buffer, a broadcast of a
  parameter) while that step's digest is in flight: the trace holds the
  state at the step's end, and the join really waited;
- writes no join orders: an EMA model updated after every step is learnt
  at the first step; one that starts later is an error, not a wrong digest;
- a failure on the digest thread is the same error as on the training
  thread; a digest in flight at exit is written, and exit does not wait
  on a stuck thread; a forked child never waits for the parent's thread.
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import vqcheck
from vqcheck import _core

from conftest import run_watch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
JOBS = HERE / "jobs"
THIRDPARTY = ROOT / "build-py" / "thirdparty"
WRITES = JOBS / "overlap_writes.py"
BIG = 16 << 20  # overlap_writes.py's `big`


def thirdparty(release):
    folder = THIRDPARTY / release
    if not (folder / ".complete").is_file():
        pytest.fail(f"{folder} is missing: run scripts/python-env.sh, which "
                    "installs the pinned releases the acceptance tests use")
    return folder


def watch(cli, out, nproc, args, overlap, pythonpath=None, timeout=300):
    """`vqcheck watch --nproc N --out OUT --json -- python ARGS` with
    VQC_WATCH_OVERLAP=overlap: (exit code, run.json, stderr)."""
    env = dict(os.environ, OMP_NUM_THREADS="1",
               VQC_WATCH_OVERLAP=str(overlap))
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    p = run_watch([cli, "watch", "--nproc", str(nproc), "--out", str(out),
                   "--json", "--", sys.executable, *map(str, args)],
                  env=env, timeout=timeout)
    run = json.loads(p.stdout) if p.stdout.strip().startswith("{") else None
    return p.returncode, run, p.stderr


def traces(run_dir):
    """{rank: [trace line dicts]} of a run directory."""
    out = {}
    for path in sorted(Path(run_dir).glob("rank-*.trace.jsonl")):
        rank = int(path.name[len("rank-"):-len(".trace.jsonl")])
        out[rank] = [json.loads(x) for x in path.read_text().splitlines()]
    return out


def digest_summaries(run_dir):
    """{rank: the "digests" object of its "finished" live line}."""
    out = {}
    for path in sorted(Path(run_dir).glob("rank-*.live.jsonl")):
        rank = int(path.name[len("rank-"):-len(".live.jsonl")])
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("event") == "finished" and "digests" in event:
                out[rank] = event["digests"]
    return out


def comparable(findings, run_dir):
    """Findings without what names the run directory or the time."""
    text = json.dumps(findings, sort_keys=True).replace(str(run_dir), "RUN")
    found = json.loads(text)
    for f in found:
        f.pop("time", None)
    return found


def full_digest(value):
    return f"{vqcheck.digest(torch.full((BIG,), float(value))):016x}"


# ---- the digest thread


def _items(tensors):
    from vqcheck._digest import _prepare
    return [_prepare(t, f"t{i}") for i, t in enumerate(tensors)]


def test_digest_thread_gives_the_digests_of_the_calling_thread():
    """Contiguous, strided, empty, scalar and large tensors of several
    dtypes: the batch's digests equal vqcheck.digest's, in order."""
    g = torch.Generator().manual_seed(7)
    base = torch.randn(64, 300, 5, generator=g)
    tensors = [base, base.transpose(0, 2), base[:, ::3, 1:4],
               torch.zeros(0, 3), torch.tensor(2.5),
               torch.arange(1000, dtype=torch.int64),
               torch.randn(3 << 20, generator=g),  # 12 MiB: several threads
               base.to(torch.bfloat16)]
    items = _items(tensors)
    batch = _core.digest_start([item[1] for item in items], None)
    assert batch.wait(60.0) and batch.done()
    assert batch.result() == [vqcheck.digest(t) for t in tensors]


def test_a_wait_hashes_what_the_digest_thread_has_not_started():
    """The digest thread runs only on an idle core (SCHED_IDLE), so a wait
    must not depend on it: a batch queued behind a long one is hashed by
    the thread that waits for it, done while the long one still runs, with
    the same digests."""
    big = torch.randn(64 << 20 // 4)          # 64 MiB, hashed 32 times
    small = [torch.randn(1000), torch.arange(77, dtype=torch.int64)]
    long = _core.digest_start([_items([big])[0][1]] * 32, big)
    quick = _core.digest_start([item[1] for item in _items(small)], small)
    assert quick.wait(60.0)
    assert not long.done(), "the long batch ended first: nothing was shown"
    assert quick.result() == [vqcheck.digest(t) for t in small]
    assert long.wait(120.0)
    assert long.result() == [vqcheck.digest(big)] * 32


def test_the_digest_thread_takes_only_idle_time():
    """The digest thread's policy is SCHED_IDLE (Linux): it takes no time
    from a training thread that could run."""
    if not hasattr(os, "SCHED_IDLE"):
        pytest.skip("no SCHED_IDLE on this platform")
    t = torch.randn(16 << 20 // 4)
    batch = _core.digest_start([_items([t])[0][1]] * 4, t)
    policies = []
    for tid in os.listdir("/proc/self/task"):
        try:
            policies.append(os.sched_getscheduler(int(tid)))
        except OSError:
            pass  # a thread that ended meanwhile
    assert batch.wait(60.0)
    assert os.SCHED_IDLE in policies, policies


def test_digest_thread_failure_is_raised_by_result_naming_the_item():
    """The library's refusal on the thread (0 threads) is result()'s
    exception, "item <k>: <the library's message>", and the bridge's
    wrapper names the tensor; wait() with a zero timeout returns done()."""
    from vqcheck._digest import DigestError, _digest_result
    t = torch.randn(100)
    ok = _items([t])[0][1]
    bad = ok[:4] + (0,)
    batch = _core.digest_start([ok, bad], t)
    assert batch.wait(60.0)
    with pytest.raises(ValueError, match=r"^item 1: digest\.c:\d+: "
                                         r"VQC_EINVAL: digest: nthreads 0 "
                                         r"must be >= 1$"):
        batch.result()
    with pytest.raises(DigestError, match=r"^tensor 'b': digest\.c:\d+: "
                                          r"VQC_EINVAL: digest: nthreads"):
        _digest_result(batch, ["a", "b"])
    empty = _core.digest_start([], None)
    assert empty.wait(0.0) and empty.result() == []
    with pytest.raises(TypeError, match="item 0 is not a tuple"):
        _core.digest_start([[1, 2]], None)


KEEP_SCRIPT = r"""
import torch, vqcheck
from vqcheck._digest import _digest_result, _digest_start, _prepare
big = torch.randn(48 << 20 // 4)                 # 48 MiB: freed to the OS
expected = vqcheck.digest(big)
batch = _digest_start([_prepare(big)] * 3)
del big                                          # only the Batch holds it
assert batch.wait(60.0)
print(_digest_result(batch, ["a", "b", "c"]) == [expected] * 3)
other = torch.randn(48 << 20 // 4)
late = _digest_start([_prepare(other)] * 3)      # in flight at exit
"""


def test_batch_holds_the_memory_until_done():
    """The caller drops every reference to the tensor right after starting
    the batch, and the interpreter exits with another batch in flight
    (its locals go in no set order): the Batch keeps the memory alive
    until it is done, so the digests are right and nothing crashes."""
    for _ in range(3):
        p = subprocess.run([sys.executable, "-c", KEEP_SCRIPT],
                           capture_output=True, text=True, timeout=120)
        assert (p.returncode, p.stdout.strip()) == (0, "True"), p.stderr


def test_fork_while_a_batch_is_in_flight():
    """The child has no digest thread: the parent's batch never ends there
    (wait() says so at once instead of blocking), dropping it does not
    wait, and the child's own batches run on a thread of its own."""
    big = torch.randn(64 << 20 // 4)  # 64 MiB: still hashing at the fork
    t = torch.randn(1000)
    batch = _core.digest_start([_items([big])[0][1]] * 4, big)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            started = time.monotonic()
            waited = batch.wait(0.5)
            mine = _core.digest_start([_items([t])[0][1]], t)
            ok = mine.wait(30.0) and mine.result() == [vqcheck.digest(t)]
            if ok and time.monotonic() - started < 20:
                code = 0 if not waited or batch.done() else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            pytest.fail("the forked child hung")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0
    assert batch.wait(120.0)
    assert batch.result() == [vqcheck.digest(big)] * 4


# ---- the catalogue, overlap on and off

CATALOGUE = {
    "vq-1.12.10": (2, [JOBS / "vq_job.py"], "vector-quantize-pytorch-1.12.10"),
    "vq-1.12.11": (2, [JOBS / "vq_job.py"], "vector-quantize-pytorch-1.12.11"),
    "lr_change": (3, [JOBS / "plain_ddp.py", "lr_change"], None),
    "clean": (2, [JOBS / "plain_ddp.py", "clean"], None),
    "dropped": (2, [JOBS / "distributed_mean.py", "dropped"], None),
    "gather": (2, [JOBS / "clip_job.py", "dropped"], None),
    "subgroup": (3, [JOBS / "extra_collective.py", "subgroup", "3"], None),
    "broken_state": (2, [JOBS / "broken_state.py"], None),
    "compound": (2, [JOBS / "compound_state.py", "wrapped"], None),
}


@pytest.mark.parametrize("case", sorted(CATALOGUE))
def test_catalogue_same_with_overlap_on_and_off(cli, tmp_path, case):
    nproc, args, release = CATALOGUE[case]
    path = thirdparty(release) if release else None
    runs = {}
    for overlap in (1, 0):
        out = tmp_path / f"overlap-{overlap}"
        rc, run, err = watch(cli, out, nproc, args, overlap, path)
        assert run is not None, err
        runs[overlap] = (rc, comparable(run["findings"], out), traces(out),
                         digest_summaries(out), err)
    (rc1, found1, traces1, sums1, err1), (rc0, found0, traces0, sums0, _) = \
        runs[1], runs[0]
    assert rc1 == rc0, err1
    assert found1 == found0
    assert sorted(traces1) == list(range(nproc))
    assert traces1 == traces0  # every line, digests included
    assert sorted(sums1) == list(range(nproc)), err1
    for rank in range(nproc):
        assert sums0[rank]["on_helper"] == 0
        assert sums1[rank]["overlap"] is True
        # the first digested step is hashed on the training thread; the
        # others (unless the state check stopped first) on the thread
        steps = len({line["step"] for line in traces1[rank]})
        assert sums1[rank]["on_helper"] + sums1[rank]["on_thread"] == steps
        assert sums1[rank]["on_helper"] >= 1, sums1[rank]
    if case == "vq-1.12.10":
        assert {f["kind"] for f in found1} == {"lost_inplace", "divergence"}
    if case == "broken_state":  # one tensor left out, the check goes on
        assert rc1 == 3 and "is not digested" in err1
    if case == "compound":  # a wrapper subclass's scale, on rank 1
        assert rc1 == 1 and found1[0]["tensor"] == "Module.w8:_scale"


# ---- writes right after a step end, while its digest is in flight

WRITE_CASES = {
    # mode: (the join that must wait, exit code)
    "forward": ("forward", 0),
    "ddp": ("forward", 1),          # `big` differs by rank by design
    "collective": ("collective", 0),
    "broadcast": ("collective", 1),
}


@pytest.mark.parametrize("mode", sorted(WRITE_CASES))
def test_state_written_right_after_the_step_end_is_not_in_its_digest(
        cli, tmp_path, mode):
    """Every rank's digest of `big` at step N is that of the value it held
    at step N's end, though the job writes it (or DDP or a collective
    does) at once after the step; and the join before that write waited
    for the digest at least once, so the race was there to lose."""
    why, code = WRITE_CASES[mode]
    steps = 5
    rc, run, err = watch(cli, tmp_path / "run", 2, [WRITES, mode, steps], 1)
    assert rc == code, (err, run and run["findings"])
    if code == 1:
        assert {(f["kind"], f["tensor"]) for f in run["findings"]} == \
            {("divergence", "Holder.big")}, run["findings"]
    per_rank = 100 if mode in ("ddp", "broadcast") else 0
    for rank, lines in traces(tmp_path / "run").items():
        got = {line["step"]: line["digest"] for line in lines
               if line["tensor"] == "Holder.big"}
        assert sorted(got) == list(range(steps))
        for step, d in got.items():
            assert d == full_digest(step + 1 + per_rank * rank), \
                (rank, step)
    for rank, summary in digest_summaries(tmp_path / "run").items():
        assert summary["on_helper"] == steps - 1, summary
        assert summary["waits"].get(why, 0) >= 1, summary


# ---- writes no join orders: learnt at the first step, else an error


def test_ema_model_updated_after_every_step_is_digested_on_the_thread(
        cli, tmp_path):
    """An EMA copy updated in place after every optimizer step (plain
    Python, no join) is seen at the first step (hashed on the training
    thread) and digested there from then on: the same traces as with the
    overlap off, no error."""
    runs = {}
    for overlap in (1, 0):
        out = tmp_path / f"overlap-{overlap}"
        rc, run, err = watch(cli, out, 2, [WRITES, "ema", 5], overlap)
        assert rc == 0, (err, run and run["findings"])
        runs[overlap] = traces(out)
    assert runs[1] == runs[0]
    for rank, summary in digest_summaries(tmp_path / "overlap-1").items():
        assert summary["sync_tensors"] == ["EMA.module.lin.bias",
                                           "EMA.module.lin.weight"], summary
        assert summary["on_helper"] == 4


def test_write_between_backward_and_step_is_learnt_whatever_the_timing(
        cli, tmp_path):
    """A parameter set in plain Python between backward() and
    optimizer.step() (no forward is a join point: no buffers) lands while
    the previous step's digest may be in flight, or after it is done. The
    first step's window runs to the first join point (that optimizer
    step), so the write is learnt there whatever the timing: the parameter
    is hashed on the training thread from then on, every digest is that
    of the step's end, and no error."""
    steps = 5
    rc, run, err = watch(cli, tmp_path / "run", 2,
                         [WRITES, "after_backward", steps], 1)
    assert rc == 0, (err, run and run["findings"])
    for lines in traces(tmp_path / "run").values():
        got = {line["step"]: line["digest"] for line in lines
               if line["tensor"] == "Holder.big"}
        assert got == {s: full_digest(s + 1) for s in range(steps)}
    for summary in digest_summaries(tmp_path / "run").values():
        assert summary["sync_tensors"] == ["Holder.big"], summary
        assert summary["on_helper"] == steps - 1, summary


def test_unordered_write_from_a_later_step_is_left_out_not_a_digest(
        cli, tmp_path):
    """The EMA update starts at step 3: step 3's digest of the EMA weights
    cannot be vouched for, so their lines are left out of step 3 (never a
    wrong digest), said on stderr naming them and the switch, and they are
    digested on the training thread from step 4; the check goes on, and
    the run is clean, as with the overlap off."""
    rc, run, err = watch(cli, tmp_path / "on", 2, [WRITES, "ema_late", 5], 1)
    assert rc == 0, (err, run and run["findings"])
    assert "the bridge's state check failed" not in err
    assert "'EMA.module.lin.weight', 'EMA.module.lin.bias' written in " \
        "place after step 3's end" in err
    assert "VQC_WATCH_OVERLAP=0" in err
    for lines in traces(tmp_path / "on").values():
        assert sorted({line["step"] for line in lines}) == [0, 1, 2, 3, 4]
        at3 = {line["tensor"] for line in lines if line["step"] == 3}
        at4 = {line["tensor"] for line in lines if line["step"] == 4}
        assert "EMA.module.lin.weight" not in at3
        assert "EMA.module.lin.weight" in at4
    rc, run, err = watch(cli, tmp_path / "off", 2, [WRITES, "ema_late", 5], 0)
    assert rc == 0, (err, run and run["findings"])
    for lines in traces(tmp_path / "off").values():
        assert sorted({line["step"] for line in lines}) == [0, 1, 2, 3, 4]


# ---- failures, exit, fork


def test_failure_on_the_digest_thread_is_the_synchronous_error(cli,
                                                               tmp_path):
    """From step 2 the library refuses every digest: on the digest thread
    (overlap on) it is the same error, at the same step, as on the
    training thread (overlap off): the state check stops, the run is not
    clean, and the traces hold steps 0 and 1 only."""
    errors = {}
    for overlap in (1, 0):
        out = tmp_path / f"overlap-{overlap}"
        rc, run, err = watch(cli, out, 2, [WRITES, "fail_thread", 5],
                             overlap)
        assert rc == 3, (err, run and run["findings"])
        errors[overlap] = sorted(line for line in err.splitlines()
                                 if "state check failed" in line)
        for lines in traces(out).values():
            assert sorted({line["step"] for line in lines}) == [0, 1]
    assert errors[1] == errors[0]
    assert len(errors[1]) == 2  # one per rank
    # the first tensor of the step: the optimizer's lr, then the weights
    assert "DigestError: tensor 'optimizer.lr': " in errors[1][0]
    assert "nthreads 0 must be >= 1" in errors[1][0]


def test_digest_in_flight_at_exit_is_written(cli, tmp_path):
    """The job ends right after its last optimizer step: the exit waits
    for that digest and writes it; the process ends promptly."""
    start = time.monotonic()
    rc, run, err = watch(cli, tmp_path / "run", 1, [WRITES, "exit", 3], 1)
    assert rc == 0, (err, run and run["findings"])
    assert time.monotonic() - start < 120
    [lines] = traces(tmp_path / "run").values()
    got = {line["step"]: line["digest"] for line in lines
           if line["tensor"] == "Holder.big"}
    assert got == {s: full_digest(s + 1) for s in range(3)}
    [summary] = digest_summaries(tmp_path / "run").values()
    assert summary["joins"].get("exit") == 1, summary


def test_forked_child_does_not_wait_for_the_parents_digest(cli, tmp_path):
    """After every step a forked child runs a forward of a module with
    buffers (a join point) and exits at once: it never waits for a digest
    thread it does not have, and the parent's traces are right."""
    start = time.monotonic()
    rc, run, err = watch(cli, tmp_path / "run", 2, [WRITES, "fork", 4], 1)
    assert rc == 0, (err, run and run["findings"])
    assert time.monotonic() - start < 180
    for lines in traces(tmp_path / "run").values():
        got = {line["step"]: line["digest"] for line in lines
               if line["tensor"] == "Holder.big"}
        assert got == {s: full_digest(s + 1) for s in range(4)}
