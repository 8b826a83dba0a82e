#!/bin/sh
# chaos_ranks.sh: kills and stops real ranks of real MPI jobs and checks that
# vqcheck never reports such a run as clean, reports it in time, and leaves
# no process behind (DESIGN.md "Nothing hangs", "Never a false green").
#
#   usage: chaos_ranks.sh VQCHECK SCENARIO_DIR WORK_DIR
#
# Each case runs scenarios/skip_weight_sync-clean.yaml on 3 ranks with
# enough steps to be mid-training when the rank is hit (--steps 100000; a
# step takes milliseconds, so the job would run for minutes):
#   kill9   `vqcheck run --backend mpi --ranks 3` (the supervisor launches
#           mpiexec); rank 1 gets SIGKILL after a few steps: exit 1,
#           run.json with a rank_failure naming rank 1, report.html, no
#           process of the job left;
#   teardown  the same, then rank 0 gets SIGKILL 0.5 s after rank 1 (what
#           mpiexec's teardown does when its SIGKILL beats the rank's note
#           of SIGTERM on a loaded machine): still rank 1 alone is named;
#   stop    the same with SIGSTOP to rank 2 and --timeout 5: the report
#           comes within timeout + 5 s of the stop, names rank 2
#           (rank_failure or deadlock), and the stopped process is gone too;
#   suite   `vqcheck suite --backend mpi` on a directory holding that
#           scenario; rank 1 gets SIGKILL: the scenario's run.json has the
#           rank_failure (not an "exit 137" ERROR), the suite exits 1;
#   mpirun  `mpiexec -n 3 vqcheck run` (no supervisor; mpiexec kills every
#           rank once rank 0 dies): `vqcheck analyze DIR` afterwards exits 1
#           with a rank_failure naming rank 0 (maybe with a rank the
#           teardown SIGKILLed before it noted the SIGTERM: without a
#           supervisor their records cannot be told apart) ($VQC_LAUNCHER, else
#           mpiexec --oversubscribe, is the launcher).
# Exit 77 (a skip) without mpiexec or without the MPI backend.
set -u
VQ=$1
SCEN=$2/skip_weight_sync-clean.yaml
WORK=$3
TIMEOUT=5

command -v mpiexec >/dev/null 2>&1 || { echo "SKIP: no mpiexec"; exit 77; }
rm -rf "$WORK"
mkdir -p "$WORK"
probe=$("$VQ" run "$SCEN" --backend mpi --ranks 2 --out "$WORK/probe" \
          --quiet 2>&1)
case $probe in
  *"no MPI backend"*) echo "SKIP: this build has no MPI backend"; exit 77 ;;
esac

fail=0
bad() { echo "FAIL: $*"; fail=1; }

# The pid in rank R's live record in DIR, waiting up to 30 s for it and for
# the rank to have finished 3 steps (mid-training).
rank_pid() {
  f=$1/rank-$2.live.jsonl
  i=0
  while [ $i -lt 300 ]; do
    if [ -f "$f" ] && [ "$(grep -c '"event":"step"' "$f")" -ge 3 ]; then
      sed -n '1s/.*"pid":\([0-9]*\).*/\1/p' "$f"
      return 0
    fi
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

# run.json of DIR without blanks, so a finding reads as one string.
compact() { tr -d ' \n' < "$1/run.json" 2>/dev/null; }

# No process of the job in DIR left: its ranks' pids, and nothing whose
# command line names DIR (a second's grace for the last reaping). With a
# third argument, zombies are not counted: a plain mpiexec may exit before
# its ranks are reaped, leaving them to a PID 1 that may never reap (in a
# container); the supervisor reaps its own (it is their subreaper).
no_leftovers() {
  sleep 1
  for f in "$1"/rank-*.live.jsonl; do
    [ -f "$f" ] || continue
    p=$(sed -n '1s/.*"pid":\([0-9]*\).*/\1/p' "$f")
    st=$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)
    [ $# -ge 3 ] && [ "$st" = Z ] && continue
    if [ -n "$p" ] && [ -d "/proc/$p" ]; then
      bad "$2: rank process $p ($(cat /proc/$p/stat 2>/dev/null | cut -d' ' -f3)) still exists"
      kill -9 "$p" 2>/dev/null
    fi
  done
  left=$(pgrep -f -- "--out $1" 2>/dev/null)
  if [ -n "$left" ]; then
    bad "$2: processes left: $left"
    kill -9 $left 2>/dev/null
  fi
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# ---- kill9
out=$WORK/kill9
timeout 120 "$VQ" run "$SCEN" --backend mpi --ranks 3 --steps 100000 \
  --timeout $TIMEOUT --out "$out" --quiet > "$WORK/kill9.log" 2>&1 &
sup=$!
if pid=$(rank_pid "$out" 1); then
  kill -9 "$pid"
  wait $sup
  code=$?
  [ $code -eq 1 ] || bad "kill9: exit $code, expected 1 (see $WORK/kill9.log)"
  compact "$out" | grep -q '"kind":"rank_failure","step":[0-9-]*,"ranks":\[1\]' ||
    bad "kill9: run.json has no rank_failure naming rank 1"
  [ -f "$out/report.html" ] || bad "kill9: no report.html"
else
  bad "kill9: rank 1 never started training"
  kill $sup 2>/dev/null
  wait $sup
fi
no_leftovers "$out" kill9

# ---- teardown
out=$WORK/teardown
timeout 120 "$VQ" run "$SCEN" --backend mpi --ranks 3 --steps 100000 \
  --timeout $TIMEOUT --out "$out" --quiet > "$WORK/teardown.log" 2>&1 &
sup=$!
if pid=$(rank_pid "$out" 1) && pid0=$(rank_pid "$out" 0); then
  kill -9 "$pid"
  sleep 0.5
  kill -9 "$pid0" 2>/dev/null
  wait $sup
  code=$?
  [ $code -eq 1 ] || bad "teardown: exit $code, expected 1 (see $WORK/teardown.log)"
  compact "$out" | grep -q '"kind":"rank_failure","step":[0-9-]*,"ranks":\[1\]' ||
    bad "teardown: run.json has no rank_failure naming rank 1 alone"
else
  bad "teardown: ranks 0 and 1 never started training"
  kill $sup 2>/dev/null
  wait $sup
fi
no_leftovers "$out" teardown

# ---- stop
out=$WORK/stop
timeout 120 "$VQ" run "$SCEN" --backend mpi --ranks 3 --steps 100000 \
  --timeout $TIMEOUT --out "$out" --quiet > "$WORK/stop.log" 2>&1 &
sup=$!
if pid=$(rank_pid "$out" 2); then
  kill -STOP "$pid"
  t0=$(now)
  wait $sup
  code=$?
  took=$(elapsed "$t0" "$(now)")
  echo "stop: reported $took s after SIGSTOP (timeout $TIMEOUT s)"
  awk -v t="$took" -v l=$((TIMEOUT + 5)) 'BEGIN { exit !(t <= l) }' ||
    bad "stop: took $took s, more than timeout + 5 s"
  [ $code -eq 1 ] || bad "stop: exit $code, expected 1 (see $WORK/stop.log)"
  compact "$out" |
    grep -Eq '"kind":"(rank_failure|deadlock)","step":[0-9-]*,"ranks":\[2\]' ||
    bad "stop: run.json names rank 2 in no rank_failure or deadlock"
  [ -f "$out/report.html" ] || bad "stop: no report.html"
else
  bad "stop: rank 2 never started training"
  kill $sup 2>/dev/null
  wait $sup
fi
no_leftovers "$out" stop

# ---- suite
sdir=$WORK/scenarios
mkdir -p "$sdir"
cp "$SCEN" "$sdir/"
out=$WORK/suite
timeout 120 "$VQ" suite "$sdir" --backend mpi --steps 100000 \
  --timeout $TIMEOUT --out "$out" > "$WORK/suite.log" 2>&1 &
sup=$!
run=$out/skip_weight_sync-clean
if pid=$(rank_pid "$run" 1); then
  kill -9 "$pid"
  wait $sup
  code=$?
  [ $code -eq 1 ] || bad "suite: exit $code, expected 1 (see $WORK/suite.log)"
  compact "$run" | grep -q '"kind":"rank_failure","step":[0-9-]*,"ranks":\[1\]' ||
    bad "suite: run.json has no rank_failure naming rank 1"
  grep -q 'rank_failure@' "$WORK/suite.log" ||
    bad "suite: the table does not show the rank_failure"
else
  bad "suite: rank 1 never started training"
  kill $sup 2>/dev/null
  wait $sup
fi
no_leftovers "$run" suite

# ---- mpirun
out=$WORK/mpirun
launcher=${VQC_LAUNCHER:-mpiexec --oversubscribe}
[ "$(id -u)" = 0 ] && [ -z "${VQC_LAUNCHER:-}" ] &&
  launcher="$launcher --allow-run-as-root"
timeout 120 $launcher -n 3 "$VQ" run "$SCEN" --backend mpi --ranks 3 \
  --steps 100000 --timeout $TIMEOUT --out "$out" --quiet \
  > "$WORK/mpirun.log" 2>&1 &
job=$!
if pid=$(rank_pid "$out" 0); then
  kill -9 "$pid"
  wait $job
  "$VQ" analyze "$out" --quiet >> "$WORK/mpirun.log" 2>&1
  code=$?
  [ $code -eq 1 ] || bad "mpirun: analyze exit $code, expected 1"
  # Rank 0 is named; so may be a rank that mpiexec's teardown SIGKILLed
  # before it could note the SIGTERM (a loaded machine): with no supervisor
  # watching, its record stops as rank 0's does and nothing tells them
  # apart.
  compact "$out" |
    grep -Eq '"kind":"rank_failure","step":[0-9-]*,"ranks":\[([0-9]+,)*0(,[0-9]+)*\]' ||
    bad "mpirun: analyze wrote no rank_failure naming rank 0"
else
  bad "mpirun: rank 0 never started training"
  kill $job 2>/dev/null
  wait $job
fi
no_leftovers "$out" mpirun zombies-allowed

if [ $fail -ne 0 ]; then
  for l in kill9 teardown stop suite mpirun; do
    echo "---- $l.log"
    tail -20 "$WORK/$l.log" 2>/dev/null
  done
  exit 1
fi
echo "chaos_ranks: kill9, teardown, stop, suite and mpirun cases passed"
exit 0
