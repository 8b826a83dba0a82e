#!/bin/sh
# mpi_disk_full.sh: `vqcheck watch -- mpiexec` with its run directory on a
# full disk (a 3 MiB tmpfs, far less than the records of 50000 all-reduces):
# each rank says once on stderr that its record is incomplete (the disk is
# full), stops trying to write it (the program runs to its end), and the
# verdict is never green: exit 3, never 0 or 1 from a truncated record.
# Skipped (77) without mpiexec, the program, or the right to mount a tmpfs
# (root).
#   usage: mpi_disk_full.sh VQCHECK MPIEXEC "FLAGS" PROGRAM_DIR WORK_DIR
set -u
VQCHECK=$1 MPIEXEC=$2 FLAGS=$3 PROGS=$4 WORK=$5
if [ -z "$MPIEXEC" ] || ! command -v "$MPIEXEC" >/dev/null 2>&1; then
  echo "SKIP: mpiexec not found (run scripts/install-deps.sh)"; exit 77
fi
PROG=$PROGS/allreduce_loop
[ -x "$PROG" ] || { echo "SKIP: $PROG not built"; exit 77; }
mkdir -p "$WORK"
DISK=$WORK/disk
mkdir -p "$DISK"
mountpoint -q "$DISK" && umount "$DISK"
if ! mount -t tmpfs -o size=3m tmpfs "$DISK" 2>/dev/null; then
  echo "SKIP: cannot mount a 3 MiB tmpfs at $DISK (needs root)"; exit 77
fi
trap 'umount "$DISK" 2>/dev/null' EXIT
# shellcheck disable=SC2086 # FLAGS is a list of words
"$VQCHECK" watch --timeout 20 --out "$DISK/run" -- \
  "$MPIEXEC" $FLAGS -n 2 "$PROG" 50000 > "$WORK/disk_full.out" 2>&1
rc=$?
cat "$WORK/disk_full.out"
echo "exit $rc"
fail=0
[ $rc -eq 3 ] || { echo "FAIL: exit $rc, expected 3 (never a verdict from a record cut short)"; fail=1; }
n=$(grep -c "cannot write its live record in the run directory: the disk is full" "$WORK/disk_full.out")
[ "$n" -eq 2 ] || { echo "FAIL: $n ranks said their record is incomplete, expected 2 (once each)"; fail=1; }
grep -q "^ns_per_call" "$WORK/disk_full.out" ||
  { echo "FAIL: the program did not run to its end"; fail=1; }
sleep 0.3
if pgrep -f "$PROG" >/dev/null 2>&1; then
  echo "FAIL: processes of the job are still running"; pkill -9 -f "$PROG"; fail=1
fi
exit $fail
