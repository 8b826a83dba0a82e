#!/bin/sh
# slurm.sh: vqcheck under a real Slurm (issue 26 item 3). Starts a one-node
# Slurm cluster of its own (Debian's slurmctld and slurmd, configured here in
# a temporary directory: no munge, auth/none, its own ports, 8 CPUs
# declared on this node so 4 ranks fit on 2 cores), runs vqcheck through
# srun for real, and stops the daemons at the end, whatever happened.
#
#   usage: slurm.sh VQCHECK SCENARIO_DIR WORK_DIR [MPI_PROGRAM_DIR]
#
# Cases, each on 4 ranks launched by srun (MPI over PMIx: srun --mpi=pmix,
# the cluster's default here):
#   clean     `vqcheck run mismatched_collective-clean.yaml --backend mpi
#             --launcher srun`: exit 0, run.json clean;
#   deadlock  `vqcheck run seed_sync_some_ranks.yaml --launcher srun`
#             (ranks 1 and 3 skip an all_reduce): exit 1, a deadlock naming
#             ranks 1 and 3, within --timeout + 10 s;
#   srun      `srun -n 4 vqcheck run ... --backend mpi` (the cluster form:
#             no supervisor, rank 0 writes the run directory): exit 0;
#   scancel   a long run under `vqcheck run --launcher srun`, its job killed
#             mid-training by `scancel --signal=KILL` (Slurm cancels the
#             step: every task gets SIGTERM, then SIGKILL): never clean:
#             exit 1 with a rank_failure (when a rank's trace ended before
#             the others') or exit 3 with training.status VQC_EABORTED
#             ("the job ended before ranks ... reached a clean end"),
#             report.html written, no process of the job left and no job
#             left in the queue.
# With MPI_PROGRAM_DIR (tests/mpi_programs built: plain MPI programs, no
# vqcheck header), through the PMPI interposer (docs/mpi.md):
#   watch_clean     `vqcheck watch -- srun -n 4 ./clean`: exit 0, no
#                   finding, the program's own result checks passed;
#   watch_deadlock  `vqcheck watch --timeout 5 -- srun -n 4 ./split_skip`
#                   (rank 3 skips an all-reduce of the odd ranks'
#                   communicator): exit 1, a deadlock naming rank 3 in
#                   world/split1, within --timeout + 10 s, the step ended.
# After each case: no rank process left, the queue empty.
# Exit 77 (a skip, saying why) without Slurm's programs, without root (the
# daemons run as root here), without the MPI backend, or when the daemons
# do not come up (their log's last lines are shown): never a pass.
set -u
VQ=$1
SCENARIOS=$2
WORK=$3
PROGS=${4:-}
TIMEOUT=5
NP=4

for p in slurmctld slurmd srun squeue scancel sinfo; do
  command -v "$p" >/dev/null 2>&1 ||
    { echo "SKIP: no $p (scripts/install-deps.sh installs Slurm)"; exit 77; }
done
[ "$(id -u)" = 0 ] ||
  { echo "SKIP: the test's own slurmctld and slurmd run as root here"; exit 77; }
case $("$VQ" run "$SCENARIOS/mismatched_collective-clean.yaml" --backend mpi \
         --ranks 1 --out "$WORK.probe" --quiet 2>&1) in
  *"no MPI backend"*) echo "SKIP: this build has no MPI backend"; exit 77 ;;
esac
rm -rf "$WORK" "$WORK.probe"
mkdir -p "$WORK/state" "$WORK/spool"

# ---- the cluster: free ports, a config, the two daemons
port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
node=$(hostname)
cat > "$WORK/slurm.conf" <<EOF
ClusterName=vqctest
SlurmctldHost=$node(127.0.0.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(port)
SlurmdPort=$(port)
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=pmix
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=vqc Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
export SLURM_CONF="$WORK/slurm.conf"

stop_cluster() {
  scancel --full --signal=KILL --user=root >/dev/null 2>&1
  for d in slurmd slurmctld; do
    [ -f "$WORK/$d.pid" ] && kill "$(cat "$WORK/$d.pid")" 2>/dev/null
  done
  sleep 1
  for d in slurmd slurmctld; do
    [ -f "$WORK/$d.pid" ] && kill -9 "$(cat "$WORK/$d.pid")" 2>/dev/null
  done
}
trap stop_cluster EXIT INT TERM

slurmctld -f "$SLURM_CONF" -i >"$WORK/slurmctld.out" 2>&1 ||
  { echo "SKIP: slurmctld did not start:"; tail -5 "$WORK/slurmctld.out" \
      "$WORK/slurmctld.log" 2>/dev/null; exit 77; }
slurmd -f "$SLURM_CONF" >"$WORK/slurmd.out" 2>&1 ||
  { echo "SKIP: slurmd did not start:"; tail -5 "$WORK/slurmd.out" \
      "$WORK/slurmd.log" 2>/dev/null; exit 77; }
i=0
until sinfo -h -o '%t' 2>/dev/null | grep -qx idle; do
  i=$((i + 1))
  if [ $i -gt 200 ]; then
    echo "SKIP: the node did not come up in 20 s (sinfo: $(sinfo -h 2>&1)):"
    tail -5 "$WORK/slurmctld.log" "$WORK/slurmd.log" 2>/dev/null
    exit 77
  fi
  sleep 0.1
done
echo "slurm: one-node cluster up ($(sinfo -h -o '%P %D %t %c' | head -1))"

fail=0
bad() { echo "FAIL: $*"; fail=1; }
compact() { tr -d ' \n' < "$1/run.json" 2>/dev/null; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# No rank process of the run in DIR left, and no job in the queue.
no_leftovers() {
  sleep 1
  for f in "$1"/rank-*.live.jsonl; do
    [ -f "$f" ] || continue
    p=$(sed -n '1s/.*"pid":\([0-9]*\).*/\1/p' "$f")
    if [ -n "$p" ] && [ -d "/proc/$p" ] &&
       [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" != Z ]; then
      bad "$2: rank process $p still exists"
      kill -9 "$p" 2>/dev/null
    fi
  done
  left=$(pgrep -f -- "--out $1" 2>/dev/null)
  [ -z "$left" ] || { bad "$2: processes left: $left"; kill -9 $left 2>/dev/null; }
  q=$(squeue -h 2>/dev/null)
  [ -z "$q" ] || { bad "$2: jobs left in the queue: $q"; scancel --signal=KILL --user=root 2>/dev/null; }
}

# The pid in rank R's live record in DIR once it finished 3 steps (30 s).
rank_started() {
  f=$1/rank-$2.live.jsonl
  i=0
  while [ $i -lt 300 ]; do
    [ -f "$f" ] && [ "$(grep -c '"event":"step"' "$f")" -ge 3 ] && return 0
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

# ---- clean
out=$WORK/clean
timeout 180 "$VQ" run "$SCENARIOS/mismatched_collective-clean.yaml" \
  --backend mpi --launcher srun --ranks $NP --timeout $TIMEOUT --out "$out" \
  --quiet > "$WORK/clean.log" 2>&1
code=$?
[ $code -eq 0 ] || bad "clean: exit $code, expected 0 (see $WORK/clean.log)"
compact "$out" | grep -q '"findings":\[\]' || bad "clean: run.json has findings"
no_leftovers "$out" clean

# ---- deadlock
out=$WORK/deadlock
t0=$(now)
timeout 180 "$VQ" run "$SCENARIOS/seed_sync_some_ranks.yaml" --backend mpi \
  --launcher srun --ranks $NP --timeout $TIMEOUT --out "$out" --quiet \
  > "$WORK/deadlock.log" 2>&1
code=$?
took=$(elapsed "$t0" "$(now)")
echo "deadlock: reported after $took s (timeout $TIMEOUT s)"
[ $code -eq 1 ] || bad "deadlock: exit $code, expected 1 (see $WORK/deadlock.log)"
compact "$out" | grep -q '"kind":"deadlock","step":[0-9-]*,"ranks":\[1,3\]' ||
  bad "deadlock: run.json has no deadlock naming ranks 1 and 3"
awk -v t="$took" -v l=$((TIMEOUT + 10)) 'BEGIN { exit !(t <= l) }' ||
  bad "deadlock: took $took s, more than timeout + 10 s"
no_leftovers "$out" deadlock

# ---- srun (no supervisor: each task is vqcheck)
out=$WORK/srun
timeout 180 srun -n $NP "$VQ" run \
  "$SCENARIOS/mismatched_collective-clean.yaml" --backend mpi --ranks $NP \
  --timeout $TIMEOUT --out "$out" --quiet > "$WORK/srun.log" 2>&1
code=$?
[ $code -eq 0 ] || bad "srun: exit $code, expected 0 (see $WORK/srun.log)"
compact "$out" | grep -q '"findings":\[\]' || bad "srun: run.json has findings"
no_leftovers "$out" srun

# ---- scancel
out=$WORK/scancel
timeout 180 "$VQ" run "$SCENARIOS/skip_weight_sync-clean.yaml" --backend mpi \
  --launcher srun --ranks $NP --steps 100000 --timeout $TIMEOUT --out "$out" \
  --quiet > "$WORK/scancel.log" 2>&1 &
sup=$!
if rank_started "$out" 1; then
  job=$(squeue -h -o '%i' | head -1)
  if [ -n "$job" ]; then
    scancel --signal=KILL "$job"
    wait $sup
    code=$?
    echo "scancel: exit $code"
    case $code in
      1) compact "$out" | grep -q '"kind":"rank_failure"' ||
           bad "scancel: exit 1 but run.json has no rank_failure" ;;
      3) compact "$out" | grep -q '"status":"VQC_EABORTED"' ||
           bad "scancel: exit 3 but training is not VQC_EABORTED" ;;
      *) bad "scancel: exit $code, expected 1 or 3 (see $WORK/scancel.log)" ;;
    esac
    [ -f "$out/report.html" ] || bad "scancel: no report.html"
  else
    bad "scancel: no job in the queue while the run trained"
    kill $sup 2>/dev/null
    wait $sup
  fi
else
  bad "scancel: rank 1 never started training (see $WORK/scancel.log)"
  kill $sup 2>/dev/null
  wait $sup
fi
no_leftovers "$out" scancel

# ---- watch -- srun -n 4 ./prog (an unmodified MPI program)
watch_cases=""
if [ -n "$PROGS" ] && [ -x "$PROGS/clean" ] && [ -x "$PROGS/split_skip" ]; then
  watch_cases="watch_clean watch_deadlock"
  out=$WORK/watch_clean
  timeout 180 "$VQ" watch --timeout 20 --out "$out" -- srun -n $NP \
    "$PROGS/clean" > "$WORK/watch_clean.log" 2>&1
  code=$?
  [ $code -eq 0 ] ||
    bad "watch_clean: exit $code, expected 0 (see $WORK/watch_clean.log)"
  compact "$out" | grep -q '"findings":\[\]' ||
    bad "watch_clean: run.json has findings"
  [ "$(cat "$out"/rank-*.live.jsonl 2>/dev/null | grep -c '"event":"finished"')" \
    -eq $NP ] || bad "watch_clean: not every rank's record says finished"
  no_leftovers "$out" watch_clean

  out=$WORK/watch_deadlock
  t0=$(now)
  timeout 180 "$VQ" watch --timeout $TIMEOUT --out "$out" -- srun -n $NP \
    "$PROGS/split_skip" > "$WORK/watch_deadlock.log" 2>&1
  code=$?
  took=$(elapsed "$t0" "$(now)")
  echo "watch_deadlock: reported after $took s (timeout $TIMEOUT s)"
  [ $code -eq 1 ] ||
    bad "watch_deadlock: exit $code, expected 1 (see $WORK/watch_deadlock.log)"
  compact "$out" | grep -q '"kind":"deadlock","step":[0-9-]*,"ranks":\[[0-9,]*3\]' ||
    bad "watch_deadlock: run.json has no deadlock naming rank 3"
  compact "$out" | grep -q '"name":"world/split1"' ||
    bad "watch_deadlock: the deadlock does not name world/split1"
  awk -v t="$took" -v l=$((TIMEOUT + 10)) 'BEGIN { exit !(t <= l) }' ||
    bad "watch_deadlock: took $took s, more than timeout + 10 s"
  no_leftovers "$out" watch_deadlock
  pgrep -f "$PROGS/split_skip" >/dev/null 2>&1 &&
    { bad "watch_deadlock: split_skip still running"; pkill -9 -f "$PROGS/split_skip"; }
else
  echo "slurm: no MPI programs built (MPI_PROGRAM_DIR), watch -- srun not run"
fi

if [ $fail -ne 0 ]; then
  for l in clean deadlock srun scancel $watch_cases; do
    echo "---- $l.log"
    tail -20 "$WORK/$l.log" 2>/dev/null
  done
  exit 1
fi
echo "slurm: clean, deadlock, srun, scancel${watch_cases:+ and $watch_cases} cases passed"
exit 0
