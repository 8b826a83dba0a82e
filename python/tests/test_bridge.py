"""The bridge (vqcheck._bridge, loaded by python/bridge/sitecustomize.py):
unmodified jobs checked end to end by `vqcheck watch`, on real third-party
releases (vector-quantize-pytorch 1.12.10 with its lost all_reduce, 1.12.11
with the fix; installed pinned into build-py/thirdparty by
scripts/python-env.sh, so these tests need no network)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_watch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BRIDGE = ROOT / "python" / "bridge"
JOBS = HERE / "jobs"
THIRDPARTY = ROOT / "build-py" / "thirdparty"


def thirdparty(release):
    folder = THIRDPARTY / release
    if not (folder / ".complete").is_file():
        pytest.fail(f"{folder} is missing: run scripts/python-env.sh, which "
                    "installs the pinned releases the acceptance tests use")
    return folder


def findings_of(run_dir):
    out = []
    for path in sorted(Path(run_dir).glob("rank-*.findings.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


def watch(cli, out, nproc, args, pythonpath=None, timeout=240):
    """`vqcheck watch --nproc N --out OUT --json -- python ARGS`: (exit code,
    run.json, stderr)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    p = run_watch([cli, "watch", "--nproc", str(nproc), "--out", str(out),
                   "--json", "--", sys.executable, *map(str, args)],
                  env=env, timeout=timeout)
    run = json.loads(p.stdout) if p.stdout.strip().startswith("{") else None
    return p.returncode, run, p.stderr


def test_a_rank_killed_under_mp_spawn_is_named_not_its_victim(cli,
                                                               tmp_path):
    """torch.multiprocessing.spawn stops the other ranks with SIGTERM when
    one dies: the bridge notes the SIGTERM in the rank's live record, so
    the finding names rank 1 (killed by SIGKILL, no end record) as the rank
    that failed and rank 0 as ended by its launcher (both were named as
    failed, the culprit hidden among its victims)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    p = subprocess.run([cli, "watch", "--timeout", "30", "--out",
                        str(tmp_path / "run"), "--json", "--",
                        sys.executable, str(JOBS / "spawn_kill.py")],
                       env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 1, p.stderr[-3000:]
    run = json.loads(p.stdout)
    [f] = [f for f in run["findings"] if f["kind"] == "rank_failure"]
    assert f["ranks"] == [1], f
    lines = (tmp_path / "run" / "rank-0.live.jsonl").read_text()
    assert '"event":"signal","signal":15' in lines, lines[-2000:]
    assert "rank 0 was then ended by signal 15 (SIGTERM" in f["message"], f


@pytest.mark.parametrize("when", ["at_exit", "in_step_1"])
def test_a_rank_that_fails_on_its_way_out_is_told_from_one_mid_training(
        cli, tmp_path, when):
    """A rank that aborts after its end line (at interpreter exit, as torch
    2.x's gloo can) is still a rank_failure, exit 1, never green; the
    finding says it came after the rank finished, so its steps' checks
    stand (detail: after_finish). One that aborts mid-training is not said
    to have finished."""
    env = dict(os.environ, OMP_NUM_THREADS="1", ABORT_RANK="1")
    env.pop("PYTHONPATH", None)
    if when == "in_step_1":
        env["ABORT_AT_STEP"] = "1"
    p = subprocess.run([cli, "watch", "--nproc", "2", "--timeout", "20",
                        "--out", str(tmp_path / "run"), "--json", "--",
                        sys.executable, str(JOBS / "abort_at_exit.py")],
                       env=env, capture_output=True, text=True, timeout=240)
    assert p.returncode == 1, p.stderr[-3000:]
    run = json.loads(p.stdout)
    # (mid-training, rank 0's gloo then raises: a finding of its own)
    [f] = [f for f in run["findings"] if f["kind"] == "rank_failure" and
           f["ranks"] == [1] and "signal 6 (SIGABRT" in f["message"]]
    procs = {x["rank"]: x for x in f["detail"]["processes"]}
    if when == "at_exit":
        assert run["findings"] == [f], run["findings"]
        assert "after it finished (its end line follows 3 steps: it failed " \
               "on its way out" in f["message"], f
        assert "planted abort at exit" in f["message"], f
        assert procs[1]["after_finish"] is True, procs
    else:
        assert "after it finished" not in p.stdout, f
        assert procs[1]["after_finish"] is False, procs


def test_lost_result_rule_reports_only_temporaries(tmp_path):
    """In one process under the bridge: named tensors, views, list elements,
    a contiguous() that returned its input, a named copy and async Works
    that are waited on (directly or from a list) are never reported; the
    temporary copy, the alias call on `x + 1` and the async all_reduce
    whose Work is dropped are."""
    env = dict(os.environ, VQC_WATCH_DIR=str(tmp_path), PYTHONPATH=str(BRIDGE),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    p = subprocess.run([sys.executable, str(JOBS / "lost_cases.py")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = (JOBS / "lost_cases.py").read_text().splitlines()
    want = [i + 1 for i, text in enumerate(lines) if "# LOST:" in text]
    found = findings_of(tmp_path)
    assert sorted(f["site"]["line"] for f in found) == want, found
    for f in found:
        assert f["kind"] == "lost_inplace" and f["ranks"] == [0]
        assert f["site"]["file"].endswith("lost_cases.py")
        assert f["site"]["func"] == \
            ("log_async" if f["detail"]["result"] == "not waited" else "main")
    assert {(f["tensor"], f["detail"]["result"]) for f in found} == {
        ("x.t().contiguous()", "temporary"), ("x + 1", "temporary"),
        ("t", "not waited"), ("z", "discarded")}
    # The fields the C checker's lost_inplace findings have too.
    for f in found:
        for key in ("op", "dtype", "count", "out_of_place", "result",
                    "reason"):
            assert key in f["detail"], (key, f)
        assert f["detail"]["out_of_place"] == \
            (f["detail"]["result"] == "discarded")


def test_no_bridge_without_vqcheck_watch(tmp_path):
    """sitecustomize does nothing outside `vqcheck watch` (no VQC_WATCH_DIR),
    and runs the sitecustomize it shadows."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SC'] = '1'\n")
    env = dict(os.environ, PYTHONPATH=f"{BRIDGE}:{user}")
    env.pop("VQC_WATCH_DIR", None)
    code = ("import os, sys; print(os.environ.get('USER_SC'), "
            "'vqcheck._bridge' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True)
    assert p.stdout.split() == ["1", "False"], p.stderr
    env["VQC_WATCH_DIR"] = str(tmp_path / "w")
    p = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True)
    assert p.stdout.split() == ["1", "True"], p.stderr
    assert not (tmp_path / "w").exists()  # nothing before any training


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- end to end: `vqcheck watch --nproc N -- python job.py`


def test_vector_quantize_pytorch_1_12_10_lost_all_reduce(cli, tmp_path):
    rc, run, err = watch(cli, tmp_path / "run", 2, [JOBS / "vq_job.py"],
                         pythonpath=thirdparty("vector-quantize-pytorch-1.12.10"))
    assert rc == 1, err
    kinds = {f["kind"]: f for f in run["findings"]}
    lost = kinds["lost_inplace"]
    assert lost["ranks"] == [0, 1]
    assert "/vector_quantize_pytorch.py:496 forward" in lost["site"], lost
    div = kinds["divergence"]
    assert div["step"] == 0
    codebook = [div["tensor"]] + div["detail"].get("also_differing", [])
    assert "VectorQuantize._codebook.embed" in codebook, div


def test_vector_quantize_pytorch_1_12_11_is_clean(cli, tmp_path):
    rc, run, err = watch(cli, tmp_path / "run", 2, [JOBS / "vq_job.py"],
                         pythonpath=thirdparty("vector-quantize-pytorch-1.12.11"))
    assert rc == 0, (err, run and run["findings"])
    assert run["findings"] == []


def test_learning_rate_change_diverges_at_step_3(cli, tmp_path):
    rc, run, err = watch(cli, tmp_path / "run", 3,
                         [JOBS / "plain_ddp.py", "lr_change"])
    assert rc == 1, err
    [f] = run["findings"]
    assert (f["kind"], f["step"], f["ranks"]) == ("divergence", 3, [1])
    # the cause, first in the step; the weights it moved follow it
    assert f["tensor"] == "optimizer.lr"
    assert "Sequential.0.weight" in f["detail"]["also_differing"]


def test_clean_ddp_job_is_clean(cli, tmp_path):
    rc, run, err = watch(cli, tmp_path / "run", 2,
                         [JOBS / "plain_ddp.py", "clean"])
    assert rc == 0, (err, run and run["findings"])


def test_hang_is_a_deadlock_naming_the_waiting_line(cli, tmp_path):
    """Rank 1 waits in an all_reduce rank 0 never reaches: the job is ended
    within timeout + 5 s of rank 1 starting to wait, nothing is left
    running, and the deadlock names rank 1's line, the collective it last
    completed, and where rank 0 is (from the stacks it dumped on SIGUSR1)."""
    import time
    job = JOBS / "hang_job.py"
    env_timeout = 3
    p = subprocess.run([cli, "watch", "--nproc", "2", "--timeout",
                        str(env_timeout), "--out", str(tmp_path / "run"),
                        "--json", "--", sys.executable, str(job)],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    ended = time.monotonic_ns()
    assert p.returncode == 1, p.stderr
    # From the moment rank 1 entered the all_reduce it waits in (its ledger
    # line's t_enter_ns: CLOCK_MONOTONIC, this process's clock too), not
    # from the start: two torch imports on a loaded 2-core machine can take
    # longer than the promise itself.
    live = [json.loads(line) for line in
            (tmp_path / "run" / "rank-1.live.jsonl").read_text().splitlines()
            if line.strip()]
    done = {r["seq"] for r in live if r.get("state") == "done"}
    waits = [r["t_enter_ns"] for r in live
             if r.get("state") == "entered" and r["seq"] not in done]
    assert len(waits) == 1, live
    waited = (ended - waits[-1]) / 1e9
    assert waited < env_timeout + 5, waited
    run = json.loads(p.stdout)
    [dead] = [f for f in run["findings"] if f["kind"] == "deadlock"]
    lines = job.read_text().splitlines()
    waiting = next(i + 1 for i, t in enumerate(lines)
                   if "rank 1 waits here" in t)
    completed = next(i + 1 for i, t in enumerate(lines)
                     if "both ranks: completes" in t)
    marker = dead["detail"]["hang_markers"]["1"]
    assert marker["site"].endswith(f"hang_job.py:{waiting} main")
    assert marker["last_completed"]["site"].endswith(
        f"hang_job.py:{completed} main")
    elsewhere = next(i + 1 for i, t in enumerate(lines)
                     if "rank 0 is here" in t)
    assert f"hang_job.py:{waiting} (main)" in dead["message"], dead
    assert f"rank 0 never entered it: it is at hang_job.py:{elsewhere} " \
        "(somewhere_else)" in dead["message"], dead
    assert dead["ranks"] == [0, 1]
    left = subprocess.run(["pgrep", "-f", str(job)], capture_output=True,
                          text=True)
    assert left.stdout.strip() == "", f"processes left: {left.stdout}"


@pytest.mark.parametrize("mode", ["dropped", "reinserted", "autograd"])
def test_openclip_gather_without_gradient(cli, tmp_path, mode):
    """dist.all_gather of features that require grad, used as gathered, is
    a gradient_mismatch at the gather; putting the local features back
    (OpenCLIP's fix) or the differentiable torch.distributed.nn.all_gather
    is clean."""
    job = JOBS / "clip_job.py"
    rc, run, err = watch(cli, tmp_path / "run", 2, [job, mode])
    if mode != "dropped":
        assert rc == 0, (err, run and run["findings"])
        return
    assert rc == 1, err
    [f] = run["findings"]
    line = next(i + 1 for i, t in enumerate(job.read_text().splitlines())
                if "dist.all_gather(gathered, text)" in t)
    assert f["kind"] == "gradient_mismatch" and f["ranks"] == [0, 1]
    assert f["site"].endswith(f"clip_job.py:{line} gather_text"), f
    assert f["tensor"] == "text"


def test_a_tensor_the_digest_cannot_read_never_stops_the_check(cli,
                                                               tmp_path):
    """From step 3 every rank holds a torch.bits8 buffer, which the digest
    has no code for: it is left out and named once per rank (stderr, and a
    not_digested event in the live record, "unchecked": true); every other
    tensor is digested to the last step. Its contents went unchecked, so
    the verdict is "not everything was checked" (exit 3), never clean.
    (A check that does stop mid-run is never clean either: test_overlap's
    test_failure_on_the_digest_thread_is_the_synchronous_error.)"""
    out = tmp_path / "run"
    rc, run, err = watch(cli, out, 2, [JOBS / "broken_state.py"])
    assert rc == 3, (run and run["findings"], err)
    assert run["findings"] == []
    assert run["training"]["message"] == (
        "not everything was checked: tensor 'Module.q' was not digested on "
        "ranks 0, 1 (its element type torch.bits8 has no digest code)")
    assert "the bridge's state check failed" not in err
    assert err.count("tensor 'Module.q' is not digested (its element type "
                     "torch.bits8 has no digest code): its contents are NOT "
                     "checked") == 2
    for rank in range(2):
        events = [json.loads(x) for x in
                  (out / f"rank-{rank}.live.jsonl").read_text().splitlines()]
        skipped = [e for e in events if e.get("event") == "not_digested"]
        assert [(e["tensor"], e["step"], e["unchecked"]) for e in skipped] \
            == [("Module.q", 3, True)], skipped
        steps = {json.loads(x)["step"] for x in
                 (out / f"rank-{rank}.trace.jsonl").read_text().splitlines()}
        assert steps == set(range(6))


COMPOUND = JOBS / "compound_state.py"


def test_compound_tensors_are_digested_through_their_parts(cli, tmp_path):
    """A quantized buffer, a sparse one and a float8 weight in a wrapper
    subclass, equal on both ranks: each is digested (the quantized one as
    its integer values and parameters, the sparse one dense, the wrapper as
    the tensors its __tensor_flatten__ names), so the run is clean; a meta
    buffer holds nothing to compare: named, never a reason for no
    verdict."""
    out = tmp_path / "run"
    rc, run, err = watch(cli, out, 2, [COMPOUND, "clean"])
    assert rc == 0, (run and run["findings"], err)
    lines = [json.loads(x) for x in
             (out / "rank-1.trace.jsonl").read_text().splitlines()]
    at0 = {x["tensor"]: (x["dtype"], x["shape"]) for x in lines
           if x["step"] == 0 and "digest" in x}
    # the meta buffer: named in the trace too, holding nothing to compare
    assert [(x["step"], x["unchecked"]) for x in lines
            if x["tensor"] == "Module.m"] == [(k, False) for k in range(5)]
    assert at0["Module.q:int_repr"] == ("int8", [8])
    assert at0["Module.q:scale"] == ("float64", [])
    assert at0["Module.q:zero_point"] == ("int64", [])
    assert at0["Module.s"] == ("float32", [4, 4])
    assert at0["Module.w8:_data"] == ("float8_e4m3fn", [2, 4])
    assert at0["Module.w8:_scale"] == ("float32", [1])
    assert "Module.q" not in at0 and "Module.w8" not in at0
    assert "tensor 'Module.m' is not digested (a meta tensor has no " \
        "data): it holds nothing to compare" in err
    nd = run["analysis"]["not_digested"]
    assert [(e["tensor"], e["unchecked"]) for e in nd] == \
        [("Module.m", False)] * 2


@pytest.mark.parametrize("mode,tensor", [("quantized", "Module.q:int_repr"),
                                         ("sparse", "Module.s"),
                                         ("wrapped", "Module.w8:_scale")])
def test_a_rank_differing_in_a_compound_tensor_is_found(cli, tmp_path, mode,
                                                        tensor):
    """Rank 1 changes the quantized buffer (another scale), the sparse one
    (one stored value) or the wrapper's scale at step 2: a divergence at
    step 2 in that part."""
    out = tmp_path / "run"
    rc, run, err = watch(cli, out, 2, [COMPOUND, mode])
    assert rc == 1, err
    f = run["findings"][0]
    assert (f["kind"], f["step"], f["tensor"]) == \
        ("divergence", 2, tensor), f


def _line_of(job, text):
    return next(i + 1 for i, t in enumerate(job.read_text().splitlines())
                if text in t)


def _ledger_lines(run_dir, rank):
    path = Path(run_dir) / f"rank-{rank}.live.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return [x for x in lines if "event" not in x]


def test_collectives_are_in_the_ledger_and_agree(cli, tmp_path):
    """Every default-group collective is an entered line then a done line
    in rank-<r>.live.jsonl, with torch's dtype, the count and the call
    site; the ranks' ledgers agree, so the job is clean. A sub-group's
    calls, which rank 2 never makes, carry the group's world ranks and name
    and are numbered in the group's own sequence; send/recv are not in the
    ledger."""
    job = JOBS / "extra_collective.py"
    rc, run, err = watch(cli, tmp_path / "run", 3, [job, "subgroup", "3"])
    assert rc == 0, (err, run and run["findings"])
    stats = _line_of(job, "dist.all_reduce(stats)")
    pair = _line_of(job, "# PAIR")
    for rank in range(3):
        every = _ledger_lines(tmp_path / "run", rank)
        lines = [x for x in every if "group" not in x]
        grouped = [x for x in every if "group" in x]
        if rank < 2:
            assert [(x["seq"], x["state"]) for x in grouped] == [
                (s, state) for s in (1, 2, 3) for state in ("entered",
                                                            "done")]
            assert {(x["line"], tuple(x["group"]), x["group_size"],
                     x["count"]) for x in grouped} == {(pair, (0, 1), 2, 2)}
            assert len({x["group_name"] for x in grouped}) == 1
        else:
            assert grouped == []
        done = [x for x in lines if x["state"] == "done"]
        assert [x["state"] for x in lines] == ["entered", "done"] * 12
        assert [x["seq"] for x in done] == list(range(1, 13))
        first = done[0]
        assert (first["op"], first["redop"], first["dtype"], first["count"],
                first["root"], first["rank"], first["group_size"]) == \
            ("all_reduce", "sum", "float32", 4, -1, rank, 3)
        assert (first["line"], first["func"]) == (stats, "sync_stats")
        assert first["file"] == str(job)
        assert first["t_exit_ns"] >= first["t_enter_ns"] > 0


def test_an_extra_collective_on_one_rank_names_its_line(cli, tmp_path):
    """Rank 1 makes one all_reduce the others do not: gloo pairs it with
    rank 0's next all_reduce (of another size) and rank 0 then waits
    forever. The finding is the misaligned collective from the ledgers:
    rank 0 waiting in sync_stats, rank 1's extra call at its line."""
    job = JOBS / "extra_collective.py"
    p = subprocess.run([cli, "watch", "--nproc", "2", "--timeout", "3",
                        "--out", str(tmp_path / "run"), "--json", "--",
                        sys.executable, str(job), "extra"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 1, p.stderr
    run = json.loads(p.stdout)
    [dead] = [f for f in run["findings"] if f["kind"] == "deadlock"]
    extra = _line_of(job, "# EXTRA")
    stats = _line_of(job, "dist.all_reduce(stats)")
    assert dead["detail"]["misaligned"] is True
    assert dead["ranks"] == [1] and dead["step"] == 2
    assert dead["site"].endswith(f"extra_collective.py:{stats} sync_stats")
    [missing] = dead["detail"]["missing"]
    assert missing["record"]["site"].endswith(
        f"extra_collective.py:{extra} main"), missing
    assert missing["record"]["count"] == 1
    assert f"all_reduce(float32, count 1) at {job}:{extra} main" in \
        dead["message"], dead["message"]
    # Besides: the extra call's temporary. gloo sometimes writes rank 0's 4
    # floats into rank 1's 1-float buffer and rank 1 dies of SIGSEGV in its
    # next call; that rank is then a rank_failure too.
    others = sorted(f["kind"] for f in run["findings"] if f is not dead)
    assert others in (["lost_inplace"], ["lost_inplace", "rank_failure"]), \
        run["findings"]
    for f in run["findings"]:
        if f["kind"] == "rank_failure":
            assert f["ranks"] == [1], f


def test_a_collective_one_rank_of_a_subgroup_skips(cli, tmp_path):
    """Ranks 0 and 1 all_reduce in a group of their own each step; at step
    2 rank 1 skips it and waits in recv while rank 0 waits in the
    all_reduce. The hang is reported within the timeout, and the group's
    ledger names the call: a deadlock in process group (ranks 0, 1) at the
    pair's line, entered by rank 0, never by rank 1; rank 2 (not in the
    group) is not named."""
    job = JOBS / "extra_collective.py"
    p = subprocess.run([cli, "watch", "--nproc", "3", "--timeout", "4",
                        "--out", str(tmp_path / "run"), "--json", "--",
                        sys.executable, str(job), "subgroup_skip"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 1, p.stderr
    run = json.loads(p.stdout)
    pair = _line_of(job, "# PAIR")
    grouped = [f for f in run["findings"]
               if "process_group" in (f.get("detail") or {})]
    assert len(grouped) == 1, run["findings"]
    [f] = grouped
    assert f["kind"] == "deadlock" and f["ranks"] == [1], f
    assert f["detail"]["process_group"]["ranks"] == [0, 1]
    assert f["message"].startswith("in process group "), f["message"]
    assert f"extra_collective.py:{pair} main" in f["site"], f
    assert [e["rank"] for e in f["detail"]["entered"]] == [0]


def test_a_subgroup_collective_called_with_another_count(cli, tmp_path):
    """At step 2 rank 1's all_reduce in the pair's group has 3 floats where
    rank 0's has 2: a collective_mismatch in that group at the pair's line
    (gloo aborts on the size; the mismatch tells it)."""
    job = JOBS / "extra_collective.py"
    p = subprocess.run([cli, "watch", "--nproc", "3", "--timeout", "4",
                        "--out", str(tmp_path / "run"), "--json", "--",
                        sys.executable, str(job), "subgroup_count"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert p.returncode == 1, p.stderr
    run = json.loads(p.stdout)
    pair = _line_of(job, "# PAIR")
    [f] = [f for f in run["findings"] if f["kind"] == "collective_mismatch"]
    assert f["detail"]["process_group"]["ranks"] == [0, 1], f
    assert f"extra_collective.py:{pair} main" in f["site"], f
    assert f["detail"]["differs"] == ["count"], f
    assert sorted(c["rank"] for c in f["detail"]["calls"]) == [0, 1]


@pytest.mark.parametrize("mode", ["clean", "count"])
def test_functional_collectives_on_a_device_mesh(cli, tmp_path, mode):
    """torch 2.x functional collectives on a 2 x 2 mesh, given (mesh, dim)
    or mesh["tp"]: ledgered with their dtype, count, reduction and the
    mesh dimension's process group. Clean when every rank agrees; rank 3's
    3-element statistic against rank 1's 2 is a collective_mismatch in dp
    group {1, 3} at the job's line, naming no rank outside it."""
    job = JOBS / "funcol_mesh.py"
    p = run_watch([cli, "watch", "--nproc", "4", "--timeout", "6",
                   "--out", str(tmp_path / "run"), "--json", "--",
                   sys.executable, str(job), mode],
                  timeout=240, env=dict(os.environ, OMP_NUM_THREADS="1"))
    run = json.loads(p.stdout)
    stats = _line_of(job, "# DP_STATS")
    if mode == "clean":
        assert p.returncode == 0, (p.stderr, run["findings"])
        lines = [x for x in _ledger_lines(tmp_path / "run", 3)
                 if x["state"] == "done" and "group" in x]
        assert {(x["op"], x["redop"], x["dtype"], x["count"], x["line"],
                 tuple(x["group"])) for x in lines} >= {
            ("all_reduce", "sum", "float32", 2, stats, (1, 3)),
            ("all_reduce", "avg", "float32", 1, stats + 3, (2, 3))}, lines
        return
    assert p.returncode == 1, p.stderr
    [f] = [f for f in run["findings"] if f["kind"] == "collective_mismatch"]
    assert f["detail"]["process_group"]["ranks"] == [1, 3], f
    assert f"funcol_mesh.py:{stats} main" in f["site"], f
    assert f["detail"]["differs"] == ["count"], f
    assert set(f["ranks"]) <= {1, 3}, f


@pytest.mark.parametrize("mode", ["dropped", "fixed", "async_dropped",
                                  "async_waited"])
def test_discarded_out_of_place_result(cli, tmp_path, mode):
    """torch.distributed.nn's all_reduce returns its result: dropping it is
    lost_inplace at the call (detail result "discarded"), although the
    replicas never diverge; `t = dist_nn.all_reduce(t)` is clean. An
    async_op=True Work never waited on is reported, a waited one is not."""
    job = JOBS / "distributed_mean.py"
    rc, run, err = watch(cli, tmp_path / "run", 2, [job, mode])
    if mode in ("fixed", "async_waited"):
        assert rc == 0, (err, run and run["findings"])
        assert run["findings"] == []
        return
    assert rc == 1, err
    [f] = run["findings"]
    assert f["kind"] == "lost_inplace" and f["ranks"] == [0, 1], f
    if mode == "dropped":
        line = _line_of(job, "# DROPPED")
        assert f["site"].endswith(f"distributed_mean.py:{line} "
                                  "distributed_mean"), f
        assert f["detail"]["result"] == "discarded"
        assert f["detail"]["out_of_place"] is True
        assert f["detail"]["op"] == "all_reduce"
    else:
        line = _line_of(job, "# ASYNC")
        assert f["site"].endswith(f"distributed_mean.py:{line} log_loss"), f
        assert f["detail"]["result"] == "not waited"


@pytest.mark.parametrize("mode", ["dropped", "fixed"])
def test_a_job_under_a_path_that_is_not_utf8(cli, tmp_path, mode):
    """A script in a folder named with the byte 0xff (Python's file names
    then hold a lone surrogate, which json.dumps writes as a \\udcff escape
    that is not UTF-8): the ledger, the findings and the reports hold '?'
    there, vqcheck reads its own output back, and the verdict is the job's
    (a lost result: exit 1; the fixed job: clean)."""
    folder = tmp_path / os.fsdecode(b"caf\xff")
    folder.mkdir()
    job = folder / "distributed_mean.py"
    job.write_bytes((JOBS / "distributed_mean.py").read_bytes())
    out = tmp_path / "run"
    rc, run, err = watch(cli, out, 2, [job, mode])
    assert run is not None, err
    for name in ("run.json", "report.md", "report.html", "junit.xml",
                 "rank-0.live.jsonl", "rank-1.live.jsonl"):
        (out / name).read_bytes().decode("utf-8")  # strict
    ledger = _ledger_lines(out, 0)
    assert any("caf?/" in x["file"] for x in ledger), ledger[:2]
    p = subprocess.run([cli, "analyze", str(out), "--quiet"],
                       capture_output=True, timeout=120)
    assert p.returncode == rc, p.stderr.decode("utf-8", "replace")
    if mode == "fixed":
        assert rc == 0 and run["findings"] == [], (err, run["findings"])
        return
    assert rc == 1, err
    [f] = run["findings"]
    assert f["kind"] == "lost_inplace"
    assert "caf?/distributed_mean.py:" in f["site"], f


@pytest.mark.parametrize("mode", ["barrier", "no_barrier"])
def test_async_broadcast_ordered_by_a_later_barrier(cli, tmp_path, mode):
    """vector-quantize-pytorch's all_gather_variably_sized drops the Work of
    each async broadcast, then calls barrier() on the same group, which
    orders after all earlier work of the group: clean. Its twin without
    the barrier returns the tensors with nothing ordering them: the Work
    never waited on is lost_inplace at the broadcast's line."""
    job = JOBS / "async_then_barrier.py"
    rc, run, err = watch(cli, tmp_path / "run", 2, [job, mode])
    if mode == "barrier":
        assert rc == 0, (err, run and run["findings"])
        assert run["findings"] == []
        return
    assert rc == 1, err
    [f] = run["findings"]
    assert f["kind"] == "lost_inplace" and f["ranks"] == [0, 1], f
    line = _line_of(job, "async_op=True)")
    assert f["site"].endswith(f"async_then_barrier.py:{line} "
                              "all_gather_variably_sized"), f
    assert f["detail"]["result"] == "not waited"


def test_a_warning_inside_a_wrapped_call_names_the_callers_line(
        monkeypatch):
    """torch warns with stacklevel=2 ("your call"); through a bridge wrapper
    that would name the wrapper. The bridge's showwarning names the line
    that called the wrapper instead: here a wrapper compiled as if it were
    one of vqcheck's files."""
    import warnings
    from vqcheck._bridge import _sites
    shown = []
    monkeypatch.setattr(warnings, "showwarning",
                        lambda message, category, filename, lineno,
                        file=None, line=None:
                        shown.append((filename, lineno)))
    _sites.keep_warnings_at_the_callers_line()
    scope = {"warnings": warnings}
    source = ("def torch_call():\n"
              "    warnings.warn('deprecated', FutureWarning, stacklevel=2)\n"
              "def wrapper():\n"
              "    return torch_call()\n")
    exec(compile(source, os.path.join(_sites._PACKAGE_DIR, "fake.py"),
                 "exec"), scope)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        scope["wrapper"]()
    assert shown == [(__file__, line)], shown
