#!/usr/bin/env bash
# coverage.sh SRC BUILD: runs the unit and mpi tests of a VQC_COVERAGE=ON build
# and turns the gcov counters into BUILD/coverage/index.html plus a one-line
# summary. Test failures are reported but do not stop the report.
set -euo pipefail
src=$1 build=$2
cd "$build"
lcov --quiet --zerocounters --directory .
ctest --output-on-failure -L 'unit|mpi' || echo "coverage: some tests failed (report still written)"
lcov --quiet --capture --directory . --output-file coverage.all.info
lcov --quiet --extract coverage.all.info "$src/lib/*" "$src/harness/*" \
     "$src/checkers/*" "$src/reports/*" --output-file coverage.info
genhtml --quiet --output-directory coverage coverage.info
lines=$(lcov --summary coverage.info 2>&1 | sed -n 's/^ *lines\.*: //p')
funcs=$(lcov --summary coverage.info 2>&1 | sed -n 's/^ *functions\.*: //p')
echo "coverage: lines $lines, functions $funcs -> $build/coverage/index.html"
