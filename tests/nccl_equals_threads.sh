#!/bin/sh
# nccl_equals_threads.sh: a vq scenario run on the device with the nccl
# backend gives the same bits as the same run on the threads backend
# (issue 14, item 2): every digest of every tensor at every step on every
# rank is equal. The nccl backend's float sums add the ranks in rank order
# (comm_nccl.c, kernels/rank_sum.cu), as the threads backend does, and the
# device statistics follow the CPU's fixed order (vqc_vq_batch_stats), so
# no tolerance is allowed.
#
#   usage: nccl_equals_threads.sh VQCHECK SCENARIO WORK_DIR RANKS
#
# Label gpu. Exits 77 (ctest: skipped) without a GPU per rank: NCCL needs a
# distinct device for every rank of a communicator, so RANKS GPUs are
# needed (nvidia-smi -L counts them), plus mpiexec.
set -u
VQ=$1
SCEN=$2
WORK=$3
RANKS=$4
PY=/usr/bin/python3
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
if [ "$gpus" -lt "$RANKS" ]; then
  echo "skipped: $RANKS GPUs needed (one per NCCL rank), $gpus found"
  exit 77
fi
command -v mpiexec >/dev/null 2>&1 || { echo "skipped: no mpiexec"; exit 77; }
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1

timeout 240 "$VQ" run "$SCEN" --ranks "$RANKS" --backend threads --device cuda \
  --out "$WORK/threads" > "$WORK/threads.log" 2>&1
t=$?
launcher="mpiexec --oversubscribe"
[ "$(id -u)" = 0 ] && launcher="$launcher --allow-run-as-root"
timeout 240 $launcher -n "$RANKS" "$VQ" run "$SCEN" --ranks "$RANKS" --backend nccl \
  --device cuda --out "$WORK/nccl" > "$WORK/nccl.log" 2>&1
n=$?
if [ "$t" -ne "$n" ]; then
  echo "exit codes differ: threads $t, nccl $n"
  tail -20 "$WORK/threads.log" "$WORK/nccl.log"
  exit 1
fi
exec "$PY" - "$WORK/threads" "$WORK/nccl" "$RANKS" <<'PYEOF'
import glob, json, sys
def digests(d, ranks):
    out = {}
    for r in range(ranks):
        for line in open("%s/rank-%d.trace.jsonl" % (d, r)):
            rec = json.loads(line)
            if "digest" in rec:
                out[(r, rec["step"], rec["tensor"])] = rec["digest"]
    return out
ranks = int(sys.argv[3])
a, b = digests(sys.argv[1], ranks), digests(sys.argv[2], ranks)
if not a:
    sys.exit("no digests in %s" % sys.argv[1])
if set(a) != set(b):
    sys.exit("different (rank, step, tensor) sets: only threads %s, only nccl %s"
             % (sorted(set(a) - set(b))[:5], sorted(set(b) - set(a))[:5]))
bad = sorted(k for k in a if a[k] != b[k])
if bad:
    sys.exit("%d digests differ; first: rank %d step %d %s" % ((len(bad),) + bad[0]))
print("equal: %d digests over %d ranks" % (len(a), ranks))
PYEOF
