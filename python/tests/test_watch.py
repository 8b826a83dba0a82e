"""vqcheck.torch.watch in one process: what it digests and names, when, the
trace it writes, how it hooks the optimizer, and its errors."""
import json
import os

import pytest
import torch

import vqcheck
import vqcheck.torch as vt


def read_trace(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def by_step(lines):
    steps = {}
    for line in lines:
        steps.setdefault(line["step"], []).append(line)
    return steps


class VQLike(torch.nn.Module):
    """State like vector-quantize-pytorch's VectorQuantize: a bool
    `initted` buffer, a bf16 codebook, fp16 EMA statistics."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)
        self.register_buffer("initted", torch.tensor([False]))
        self.register_buffer("embed", torch.randn(16, 4).to(torch.bfloat16))
        self.register_buffer("cluster_size", torch.zeros(16,
                                                         dtype=torch.float16))

    def forward(self, x):
        z = self.proj(x)
        with torch.no_grad():
            self.initted.fill_(True)
            self.cluster_size.mul_(0.9).add_(0.1)
        return z


def train(model, opt, steps, w=None):
    for _ in range(steps):
        opt.zero_grad()
        model(torch.randn(4, 8)).square().mean().backward()
        opt.step()


def test_every_step_digests_params_buffers_and_optimizer_state(tmp_path):
    torch.manual_seed(0)
    model = VQLike()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with vt.watch(model, opt, out=tmp_path) as w:
        train(model, opt, 3)
    assert w.closed and w.steps == 3 and w.rank == 0
    lines = read_trace(tmp_path / "rank-0.trace.jsonl")
    steps = by_step(lines)
    assert sorted(steps) == [0, 1, 2]
    names = [line["tensor"] for line in steps[2]]
    # the hyper-parameters first, one line each (lr, betas, eps, ...: each
    # param group's value, float64), then the module, then its state
    hyper = ["optimizer.lr", "optimizer.betas", "optimizer.eps",
             "optimizer.weight_decay", "optimizer.maximize",
             "optimizer.amsgrad"]
    assert names[:len(hyper)] == hyper, names
    assert names[len(hyper):] == [
        "proj.weight", "proj.bias", "initted", "embed", "cluster_size",
        "modules.training", "proj.weight.step", "proj.weight.exp_avg", "proj.weight.exp_avg_sq",
        "proj.bias.step", "proj.bias.exp_avg", "proj.bias.exp_avg_sq"]
    last = {line["tensor"]: line for line in steps[2]}
    for name in hyper:
        assert last[name]["dtype"] == "float64" and "group" not in last[name]
    assert last["optimizer.betas"]["shape"] == [2]
    assert last["optimizer.lr"]["digest"] == \
        f"{vqcheck.digest(torch.tensor([0.01], dtype=torch.float64)):016x}"
    assert last["initted"]["dtype"] == "bool"
    assert last["embed"]["dtype"] == "bfloat16"
    assert last["cluster_size"]["dtype"] == "float16"
    state = dict(model.named_parameters(), **dict(model.named_buffers()))
    state["proj.weight.exp_avg"] = opt.state[model.proj.weight]["exp_avg"]
    for name, t in state.items():
        assert last[name]["digest"] == f"{vqcheck.digest(t):016x}", name
        assert last[name]["shape"] == list(t.shape)
    for line in lines:
        assert line["schema"] == "vqcheck-trace/1"
        assert line["digest_algo"] == "vqc-xxh3-tree-1"
        assert line["rank"] == 0
        assert line["program"]


def test_interval_writes_every_kth_step_and_the_last(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = vt.watch(model, opt, out=tmp_path, interval=3)
    for _ in range(8):
        opt.zero_grad()
        model(torch.randn(2, 3)).sum().backward()
        opt.step()
        if w.steps == 4:  # flushed at every step: readable while running
            assert sorted(by_step(read_trace(w.path))) == [0, 3]
    w.close()
    assert sorted(by_step(read_trace(w.path))) == [0, 3, 6, 7]
    w.close()  # a second close does nothing
    assert sorted(by_step(read_trace(w.path))) == [0, 3, 6, 7]


def test_manual_steps_without_an_optimizer(tmp_path):
    model = torch.nn.Linear(3, 2)
    w = vt.watch([model, torch.nn.Linear(2, 2)], out=tmp_path)
    for _ in range(2):
        with torch.no_grad():
            model.weight.add_(1)
        w.step()
    w.close()
    steps = by_step(read_trace(tmp_path / "rank-0.trace.jsonl"))
    assert [line["tensor"] for line in steps[0]] == [
        "0.weight", "0.bias", "0.modules.training", "1.weight", "1.bias",
        "1.modules.training"]
    assert steps[0][0]["digest"] != steps[1][0]["digest"]


def test_names_prefixes_tied_weights_once(tmp_path):
    enc, dec = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    dec.weight = enc.weight  # tied
    w = vt.watch([enc, dec], out=tmp_path, names=["enc", "dec."])
    w.step()
    w.close()
    names = [line["tensor"] for line in read_trace(w.path)]
    assert names == ["enc.weight", "enc.bias", "enc.modules.training",
                     "dec.bias", "dec.modules.training"]


def test_optimizer_params_outside_the_modules_are_named_by_position(tmp_path):
    model = torch.nn.Linear(2, 2)
    extra = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([{"params": model.parameters()},
                           {"params": [extra]}], lr=0.1, momentum=0.9)
    with vt.watch(model, opt, out=tmp_path) as w:
        opt.zero_grad()
        (model(torch.ones(1, 2)).sum() + extra.sum()).backward()
        opt.step()
    names = [line["tensor"] for line in read_trace(w.path)]
    assert "optimizer.param_groups.1.params.0" in names
    assert "optimizer.param_groups.1.params.0.momentum_buffer" in names
    assert "weight.momentum_buffer" in names


@pytest.mark.parametrize("scheduler_first", [True, False])
def test_lr_scheduler_before_or_after_watch(tmp_path, scheduler_first,
                                            recwarn):
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    make = lambda: torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    sched = make() if scheduler_first else None
    w = vt.watch(model, opt, out=tmp_path)
    sched = sched or make()
    for _ in range(3):
        opt.zero_grad()
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
        sched.step()
    w.close()
    # the scheduler saw every step: torch 1.x counts them on the optimizer
    # (_step_count), torch 2.x marks that one was taken (_opt_called)
    assert w.steps == 3
    assert getattr(opt, "_step_count", 3) == 3
    assert getattr(opt, "_opt_called", True)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 / 8)
    assert not [x for x in recwarn if "lr_scheduler" in str(x.message)]
    opt.step()  # after close the optimizer still steps, undigested
    assert w.steps == 3
    if scheduler_first:  # the scheduler's counting wrapper is back in place
        assert getattr(opt.step, "_with_counter", False) or \
            getattr(opt.step, "_wrapped_by_lr_sched", False)
    assert sorted(by_step(read_trace(w.path))) == [0, 1, 2]


def test_unhooked_after_close_when_nothing_else_wrapped(tmp_path):
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = vt.watch(model, opt, out=tmp_path)
    assert "step" in opt.__dict__
    w.close()
    assert "step" not in opt.__dict__


def test_bad_calls_raise_clear_errors(tmp_path):
    with pytest.raises(TypeError, match="torch.nn.Module"):
        vt.watch(3, out=tmp_path)
    with pytest.raises(TypeError, match=r"modules\[1\] is a str"):
        vt.watch([torch.nn.Linear(1, 1), "x"], out=tmp_path)
    with pytest.raises(ValueError, match="no modules"):
        vt.watch([], out=tmp_path)
    with pytest.raises(TypeError, match="Optimizer"):
        vt.watch(torch.nn.Linear(1, 1), optimizer="sgd", out=tmp_path)
    with pytest.raises(ValueError, match="interval"):
        vt.watch(torch.nn.Linear(1, 1), out=tmp_path, interval=0)
    with pytest.raises(ValueError, match="one string prefix per module"):
        vt.watch([torch.nn.Linear(1, 1)] * 2, out=tmp_path, names=["a"])
    w = vt.watch(torch.nn.Linear(1, 1), out=tmp_path)
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.step()


def test_a_tensor_whose_shape_changes_between_steps_raises(tmp_path):
    model = torch.nn.Linear(3, 2)
    w = vt.watch(model, out=tmp_path)
    w.step()
    model.register_buffer("codebook", torch.zeros(4, 3))
    w.step()
    model.codebook = torch.zeros(5, 3)  # dead-code replacement grew it
    with pytest.raises(ValueError, match=r"'codebook' was float32 \[4, 3\] "
                                         r"at step 1 and is float32 \[5, 3\] "
                                         r"at step 2"):
        w.step()
    w.close()


def test_a_file_that_is_not_a_trace_is_never_overwritten(tmp_path):
    mine = tmp_path / "rank-0.trace.jsonl"
    mine.write_text("my own log, not a trace\n")
    w = vt.watch(torch.nn.Linear(1, 1), out=tmp_path)
    with pytest.raises(FileExistsError, match="not a vqcheck trace"):
        w.step()
    assert mine.read_text() == "my own log, not a trace\n"


def test_rank0_replaces_its_trace_and_removes_stale_higher_ranks(tmp_path,
                                                                 capfd):
    for r in range(3):
        w = vt.watch(torch.nn.Linear(1, 1), out=tmp_path)
        w.step()
        w.close()
        os.replace(w.path, tmp_path / f"rank-{r}.trace.jsonl")
    (tmp_path / "rank-7.trace.jsonl").write_text("not a trace\n")
    w = vt.watch(torch.nn.Linear(1, 1), out=tmp_path)
    w.step()
    w.step()
    w.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rank-0.trace.jsonl", "rank-7.trace.jsonl"]
    assert sorted(by_step(read_trace(w.path))) == [0, 1]
    assert "removed" in capfd.readouterr().err


def test_exclude_leaves_out_per_rank_state(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3))
    with vt.watch(model, out=tmp_path,
                  exclude=["*.running_mean", "*.running_var"]) as w:
        w.step()
    names = [line["tensor"] for line in read_trace(w.path)]
    assert names == ["0.weight", "0.bias", "1.weight", "1.bias",
                     "1.num_batches_tracked", "modules.training"]
    with pytest.raises(TypeError, match="exclude"):
        vt.watch(model, out=tmp_path, exclude="*.running_mean")


def test_a_block_that_raises_digests_no_extra_last_step(tmp_path):
    model = torch.nn.Linear(2, 2)
    with pytest.raises(KeyError):
        with vt.watch(model, out=tmp_path, interval=10) as w:
            w.step()
            w.step()
            raise KeyError("the loop failed mid-step")
    assert w.closed
    assert sorted(by_step(read_trace(w.path))) == [0]


def test_program_names_with_undecodable_bytes_stay_valid_json(tmp_path,
                                                              monkeypatch,
                                                              cli):
    from conftest import compare
    odd = b"/jobs/tr\xffain.py".decode("utf-8", "surrogateescape")
    monkeypatch.setattr("sys.argv", [odd])
    with vt.watch(torch.nn.Linear(2, 2), out=tmp_path / "t") as w:
        w.step()
    rank0 = (tmp_path / "t" / "rank-0.trace.jsonl").read_text()
    (tmp_path / "t" / "rank-1.trace.jsonl").write_text(
        rank0.replace('"rank":0', '"rank":1'))
    rc, run, err = compare(cli, tmp_path / "t", tmp_path / "c")
    assert rc == 0, err
    assert run["compare"]["program"] == "tr\ufffdain.py"


def test_compound_tensors_are_digested_through_their_dense_parts(tmp_path):
    """vqcheck._dense: a per-channel quantized buffer is its integer values,
    scales, zero points and axis; a CSR buffer is digested as its dense
    form (the same digest as the dense tensor); a meta buffer is left out
    as holding nothing, a torch.bits8 one as unchecked (stderr says
    which)."""
    from vqcheck import _dense
    m = torch.nn.Module()
    m.register_buffer("q", torch.quantize_per_channel(
        torch.randn(3, 4), torch.tensor([0.1, 0.2, 0.3]),
        torch.tensor([0, 1, 2]), 0, torch.qint8))
    # (torch.where, not a product: a product's -0.0 is no stored zero)
    dense = torch.where(torch.rand(4, 4) > 0.5, torch.randn(4, 4), 0.0)
    m.register_buffer("csr", dense.to_sparse_csr())
    m.register_buffer("meta", torch.empty(2, device="meta"))
    m.register_buffer("bits", torch.zeros(2, dtype=torch.uint8).view(
        torch.bits8))
    assert isinstance(_dense.dense_parts("m", m.meta), _dense.Left)
    assert _dense.dense_parts("m", m.meta).unchecked is False
    assert _dense.dense_parts("b", m.bits).unchecked is True
    with vt.watch(m, out=tmp_path) as w:
        w.step()
    lines = {x["tensor"]: x for x in read_trace(tmp_path / "rank-0.trace.jsonl")}
    assert {"q:int_repr", "q:scales", "q:zero_points", "q:axis", "csr"} <= \
        set(lines)
    assert "q" not in lines
    # the two left out are named in the trace, without a digest
    assert lines["meta"]["unchecked"] is False and "digest" not in \
        lines["meta"]
    assert lines["bits"]["unchecked"] is True
    assert lines["bits"]["not_digested"] == \
        "its element type torch.bits8 has no digest code"
    assert lines["q:int_repr"]["dtype"] == "int8"
    assert lines["q:int_repr"]["shape"] == [3, 4]
    assert lines["q:scales"]["dtype"] == "float64"
    assert lines["csr"]["shape"] == [4, 4]
    assert lines["csr"]["digest"] == f"{vqcheck.digest(dense):016x}"
    assert lines["q:int_repr"]["digest"] == \
        f"{vqcheck.digest(m.q.int_repr()):016x}"
    assert set(w._skipped) == {"meta", "bits"}


def test_compare_of_a_trace_with_unchecked_state_is_no_verdict(tmp_path, cli):
    """A tensor the digest cannot read is named in the trace at every
    checked step, so `vqcheck compare` of a plain watch()'s traces is no
    clean verdict while its contents went unchecked (exit 3; it was exit 0
    with the tensor named only on the job's stderr), and a tensor that held
    nothing (a meta buffer) is listed without changing the verdict."""
    from conftest import compare
    for kind in ("bits", "meta"):
        m = torch.nn.Linear(2, 2)
        if kind == "bits":
            m.register_buffer("q", torch.zeros(2, dtype=torch.uint8).view(
                torch.bits8))
        else:
            m.register_buffer("q", torch.empty(2, device="meta"))
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        traces = tmp_path / kind / "t"
        with vt.watch(m, opt, out=traces):
            for _ in range(3):
                opt.zero_grad()
                m(torch.randn(3, 2)).sum().backward()
                opt.step()
        lines = read_trace(traces / "rank-0.trace.jsonl")
        left = [x for x in lines if "not_digested" in x]
        assert [x["step"] for x in left] == [0, 1, 2]
        assert all(x["tensor"] == "q" for x in left)
        # a second rank's trace (the same job on another rank)
        (traces / "rank-1.trace.jsonl").write_text(
            (traces / "rank-0.trace.jsonl").read_text().replace(
                '"rank":0', '"rank":1'))
        rc, run, err = compare(cli, traces, tmp_path / kind / "c")
        listed = run["compare"]["not_digested"]
        assert [(x["rank"], x["tensor"]) for x in listed] == \
            [(0, "q"), (1, "q")]
        assert run["compare"]["digests_compared"] == \
            3 * run["compare"]["tensors_per_step"] > 0
        if kind == "bits":
            assert rc == 3, err
            assert run["training"]["status"] == "VQC_EUNSUPPORTED"
            assert "tensor 'q' was not digested on ranks 0, 1" in \
                run["training"]["message"]
        else:
            assert rc == 0, err
            assert listed[0]["unchecked"] is False


def test_a_name_too_long_for_a_trace_line_is_cut_and_tagged(tmp_path, cli):
    """A tensor name of 256 bytes or more (a deeply nested module's) is
    written as its first 200 bytes, "...#" and a hash of the whole name:
    the trace stays one vqcheck compare reads (it refused it, exit 2), and
    two long names that share their first 200 bytes stay apart."""
    from conftest import compare
    m = torch.nn.Module()
    long_a, long_b = "\u00e9" * 150 + "a", "\u00e9" * 150 + "b"
    m.register_buffer(long_a, torch.zeros(2))
    m.register_buffer(long_b, torch.ones(2))
    with vt.watch(m, out=tmp_path / "t") as w:
        w.step()
    names = [x["tensor"] for x in read_trace(w.path)][:2]
    assert all(len(n.encode()) < 256 and "...#" in n for n in names)
    assert names[0] != names[1] and names[0][:100] == names[1][:100]
    (tmp_path / "t" / "rank-1.trace.jsonl").write_text(
        (tmp_path / "t" / "rank-0.trace.jsonl").read_text().replace(
            '"rank":0', '"rank":1'))
    rc, run, err = compare(cli, tmp_path / "t", tmp_path / "c")
    assert rc == 0, err


def test_a_functional_collectives_result_is_waited_for(tmp_path):
    """A buffer holding funcol.all_reduce's result before anyone waited
    (an AsyncCollectiveTensor) is digested after the wait, as the plain
    tensor it holds: its bytes read before the wait could be the input's."""
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    from vqcheck import _dense
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store",
                            rank=0, world_size=1)
    try:
        x = torch.arange(4, dtype=torch.float32)
        pending = funcol.all_reduce(x, "sum", dist.group.WORLD)
        assert type(pending).__name__ == "AsyncCollectiveTensor"
        parts = _dense.dense_parts("buf", pending)
        assert [n for n, _ in parts] == ["buf"]
        assert type(parts[0][1]) is torch.Tensor
        assert torch.equal(parts[0][1], x)
    finally:
        dist.destroy_process_group()


class _NoStorage(torch.Tensor):
    """A subclass without bytes whose data_ptr() raises (as torch's own
    storage-less tensors do), and which says nothing of what it wraps."""

    @staticmethod
    def __new__(cls, shape):
        return torch.Tensor._make_wrapper_subclass(cls, shape)

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that "
                           "doesn't have storage")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(func)


class _FlattenRaises(_NoStorage):
    def __tensor_flatten__(self):
        raise RuntimeError("boom")

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        raise NotImplementedError


def test_a_subclass_that_raises_is_left_out_as_unchecked(tmp_path):
    """A tensor subclass whose own methods raise (data_ptr(),
    __tensor_flatten__()) is left out with why, as unchecked contents; the
    other tensors are digested, the check goes on."""
    from vqcheck import _dense
    left = _dense.dense_parts("w", _NoStorage((2,)))
    assert left == _dense.Left(
        "_NoStorage could not be read: RuntimeError: Cannot access data "
        "pointer of Tensor that doesn't have storage", True)
    left = _dense.dense_parts("w", _FlattenRaises((2,)))
    assert left == _dense.Left("_FlattenRaises.__tensor_flatten__() raised "
                               "RuntimeError: boom", True)
    m = torch.nn.Linear(2, 2)
    m.register_buffer("odd", _NoStorage((3,)))
    with vt.watch(m, out=tmp_path) as w:
        w.step()
        w.step()
    lines = read_trace(tmp_path / "rank-0.trace.jsonl")
    names = {x["tensor"] for x in lines if "digest" in x}
    assert names == {"weight", "bias", "modules.training"}
    assert [(x["step"], x["tensor"], x["unchecked"]) for x in lines
            if "not_digested" in x] == [(0, "odd", True), (1, "odd", True)]
    assert list(w._skipped) == ["odd"]
