#!/usr/bin/env bash
# quickstart.sh: README quick-start command (1). Installs what is missing,
# builds vqcheck, and runs the main job: the bug catalogue (scenarios/, one
# scenario per real distributed-training bug plus its clean twin) on the
# embedded threads backend. Every fault must be caught with the finding its
# scenario expects, and every clean twin must come out clean. Writes the
# suite report (junit.xml, report.md) and one run directory per scenario
# (report.html, report.md, junit.xml, run.json) under vqcheck-runs/quickstart.
# Exit 0 only if the whole suite passes.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
scripts/install-deps.sh
cmake -S . -B build
cmake --build build -j"$jobs"
vqcheck=./build/harness/vqcheck
out=vqcheck-runs/quickstart
"$vqcheck" --version
echo "== the bug catalogue on the threads backend (vqcheck suite)"
status=0
"$vqcheck" suite scenarios --backend threads --out "$out" || status=$?
echo
echo "suite report:       $out/junit.xml"
echo "                    $out/report.md"
echo "per-scenario reports (open in a browser; they fetch nothing):"
for html in "$out"/*/report.html; do
  if [ -e "$html" ]; then echo "                    $html"; fi
done
if [ "$status" -ne 0 ]; then
  echo "quickstart: the suite FAILED (exit $status): see the table above" >&2
  exit "$status"
fi
echo "quickstart: every fault was caught and every clean twin is clean"
