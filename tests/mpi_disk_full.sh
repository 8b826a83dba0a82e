#!/bin/sh
# mpi_disk_full.sh: `vqcheck watch -- mpiexec` with its run directory on a
# full disk; the verdict is never green: exit 3, never 0 or 1 from a
# record cut short. Two cases:
#   live  a 3 MiB tmpfs, far less than the live records of 50000
#         all-reduces: each rank says once on stderr that its record is
#         incomplete (the disk is full), stops trying to write it, and the
#         program runs to its end;
#   rma   a 9 MiB tmpfs: the live records fit (the first 4 MiB each are
#         reserved at the start), the RMA accesses of 300000 puts in fence
#         epochs (rank-<r>.rma.jsonl) do not: each rank's end line tells
#         what went unchecked (VQC_EIO, and why), and the verdict names
#         both ranks' lost records.
# Skipped (77) without mpiexec, the program, or the right to mount a tmpfs
# (root).
#   usage: mpi_disk_full.sh VQCHECK MPIEXEC "FLAGS" PROGRAM_DIR WORK_DIR
#          [live|rma]
set -u
VQCHECK=$1 MPIEXEC=$2 FLAGS=$3 PROGS=$4 WORK=$5 CASE=${6:-live}
if [ -z "$MPIEXEC" ] || ! command -v "$MPIEXEC" >/dev/null 2>&1; then
  echo "SKIP: mpiexec not found (run scripts/install-deps.sh)"; exit 77
fi
case $CASE in
  live) PROG=$PROGS/allreduce_loop N=50000 SIZE=3m ;;
  rma) PROG=$PROGS/rma_loop N=300000 SIZE=9m ;;
  *) echo "usage: mpi_disk_full.sh ... [live|rma]"; exit 2 ;;
esac
[ -x "$PROG" ] || { echo "SKIP: $PROG not built"; exit 77; }
mkdir -p "$WORK"
DISK=$WORK/disk
mkdir -p "$DISK"
mountpoint -q "$DISK" && umount "$DISK"
if ! mount -t tmpfs -o size=$SIZE tmpfs "$DISK" 2>/dev/null; then
  echo "SKIP: cannot mount a $SIZE tmpfs at $DISK (needs root)"; exit 77
fi
trap 'umount "$DISK" 2>/dev/null' EXIT
OUT=$WORK/disk_full_$CASE.out
# shellcheck disable=SC2086 # FLAGS is a list of words
"$VQCHECK" watch --timeout 20 --out "$DISK/run" -- \
  "$MPIEXEC" $FLAGS -n 2 "$PROG" $N > "$OUT" 2>&1
rc=$?
cat "$OUT"
echo "exit $rc"
fail=0
[ $rc -eq 3 ] || { echo "FAIL: exit $rc, expected 3 (never a verdict from a record cut short)"; fail=1; }
grep -q "^ns_per_call" "$OUT" ||
  { echo "FAIL: the program did not run to its end"; fail=1; }
if [ "$CASE" = live ]; then
  n=$(grep -c "cannot write its live record in the run directory: the disk is full" "$OUT")
  [ "$n" -eq 2 ] || { echo "FAIL: $n ranks said their record is incomplete, expected 2 (once each)"; fail=1; }
else
  for r in 0 1; do
    grep -q "rank $r: its RMA accesses could not all be written to rank-$r.rma.jsonl (No space left on device)" "$OUT" ||
      { echo "FAIL: the verdict does not say rank $r's RMA record is incomplete"; fail=1; }
    tr -d '\000' < "$DISK/run/rank-$r.live.jsonl" | tail -n 1 |
      grep -q '"event":"finished","status":"VQC_OK".*"unchecked":"its RMA accesses.*"unchecked_status":"VQC_EIO"' ||
      { echo "FAIL: rank $r's end line does not tell what went unchecked"; fail=1; }
  done
  grep -q "not everything was checked: rank 0: its RMA accesses" "$DISK/run/report.md" ||
    { echo "FAIL: report.md does not say what was not checked"; fail=1; }
fi
sleep 0.3
if pgrep -f "$PROG" >/dev/null 2>&1; then
  echo "FAIL: processes of the job are still running"; pkill -9 -f "$PROG"; fail=1
fi
exit $fail
