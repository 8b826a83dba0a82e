#!/usr/bin/env bash
# test.sh: README quick-start command (2), and what CI runs (.ci/run).
# Installs what is missing, builds with warnings as errors, runs every test
# (unit, mpi through real mpiexec processes, gpu tests skip without a device),
# installs the Python package into a torch 2.x venv and runs its pytest suite
# (real multi-process gloo jobs checked by the installed CLI), and into
# Debian's torch 1.13 venv for the tests that need torch 1.13, then rebuilds
# with AddressSanitizer + UndefinedBehaviorSanitizer and runs the unit and mpi
# tests again.
#   VQC_SKIP_ASAN=1 scripts/test.sh   skips the sanitizer pass (local use).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

scripts/install-deps.sh

echo "== build (warnings as errors)"
cmake -S . -B build -DVQC_WERROR=ON
cmake --build build -j"$jobs"
echo "== tests"
ctest --test-dir build --output-on-failure -j"$jobs"

# The torch 2.x lane, the primary target (scripts/torch-env.sh: a pinned
# torch 2.x from PyPI, installed once per machine): every Python test but
# the two that need torch 1.13. Then Debian's torch 1.13 lane
# (scripts/python-env.sh) for those: vector-quantize-pytorch 1.12.10's lost
# all_reduce is latent on torch 2.x (docs/pytorch.md "torch versions").
# python-env.sh also installs the pinned third-party releases both lanes'
# acceptance tests run (build-py/thirdparty), so it comes first.
torch113_only="1_12_10 or vq-1.12.10"
echo "== Python package: pip install . into build-py/venv (torch 1.13) and build-py/venv-torch2 (torch 2.x)"
python=$(scripts/python-env.sh)
python2=$(scripts/torch-env.sh)
# The jobs these tests start (and the ranks they kill on purpose: a killed
# rank's multiprocessing directory is never removed) get a temporary
# directory of their own, removed afterwards unless a test failed (pytest's
# tmp_path directories are in it too); short, for UNIX socket paths.
py_tmp=$(mktemp -d /tmp/vqc-py-XXXXXX)
trap 'rc=$?; if [ "$rc" -eq 0 ]; then rm -rf "$py_tmp"; else
      echo "test.sh: the Python tests'"'"' temporary files are kept in $py_tmp" >&2; fi' EXIT
echo "== Python tests, torch 2.x lane"
TMPDIR="$py_tmp" "$python2" -m pytest -q python/tests -k "not ($torch113_only)"
echo "== Python tests, torch 1.13 lane: those that need it"
TMPDIR="$py_tmp" "$python" -m pytest -q python/tests -k "$torch113_only"

if [ "${VQC_SKIP_ASAN:-0}" != 1 ]; then
  echo "== sanitizer build (ASan + UBSan)"
  cmake -S . -B build-asan -DVQC_SANITIZE=ON -DVQC_WERROR=ON -DCMAKE_BUILD_TYPE=Debug
  cmake --build build-asan -j"$jobs"
  export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
  echo "== sanitizer tests: unit (leak checking on)"
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit
  # OpenMPI's plugins allocate memory that lives until exit and are unloaded
  # before LeakSanitizer runs, so their frames show as <unknown module> and
  # cannot be suppressed by name: check memory errors, not leaks, here.
  echo "== sanitizer tests: mpi (memory errors; leak checking off)"
  ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -L mpi
fi
