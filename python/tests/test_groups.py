"""Replica groups in traces written by the Python package
(docs/trace-format.md "Replica groups"): a 2 x 2 mesh (dp x tp) whose
tensor-parallel shards differ by design is clean under `vqcheck compare`,
and a shard that drifts on one dp replica is found within its group."""
import json

from vqcheck._trace import TraceWriter

from conftest import compare


def write_mesh(out, drift_rank=None):
    for dp in range(2):
        for tp in range(2):
            rank = dp * 2 + tp
            w = TraceWriter(str(out), rank, "mesh.py")
            for step in range(2):
                shard_digest = 0xA0 + tp + (1 if rank == drift_rank else 0)
                w.write_step(step, [
                    ("mlp.weight", "float32", [4, 4], shard_digest,
                     [tp, 2 + tp], f"Shard(0)@tp={tp}"),
                    ("ln.weight", "float32", [4], 0xC0),
                ])
            w.close()


def test_shards_are_not_a_divergence(cli, tmp_path):
    write_mesh(tmp_path / "t")
    rc, doc, err = compare(cli, tmp_path / "t", tmp_path / "out")
    assert rc == 0, err
    assert doc["findings"] == []
    assert doc["compare"]["digests_compared"] == 6


def test_drift_within_a_group_is_found(cli, tmp_path):
    write_mesh(tmp_path / "t", drift_rank=3)
    rc, doc, err = compare(cli, tmp_path / "t", tmp_path / "out")
    assert rc == 1
    (f,) = doc["findings"]
    assert f["tensor"] == "mlp.weight" and f["step"] == 0
    assert f["detail"]["group"] == [1, 3]
    assert f["detail"]["shard"] == "Shard(0)@tp=1"
    assert sorted(f["ranks"]) == [1, 3]  # two replicas: no majority
    line = json.loads((tmp_path / "t" / "rank-3.trace.jsonl").read_text()
                      .splitlines()[0])
    assert line["group"] == [1, 3]
