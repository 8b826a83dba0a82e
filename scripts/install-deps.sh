#!/usr/bin/env bash
# Installs every Debian package vqcheck needs to build, test and benchmark.
# Idempotent: packages already present are left alone, and apt-get update runs
# only when something is missing. Both README quick-start commands call it.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  openmpi-bin libopenmpi-dev        # comm: mpi backend, mpiexec for tests
  gfortran                          # tests: Fortran MPI programs (mpifort)
  libdw1                            # call sites and stacks named file:line (opened at run time)
  libxxhash-dev                     # digests (XXH3)
  libcriterion-dev                  # unit tests
  lcov                              # coverage build
  libjansson-dev                    # JSON (fixtures, run.json, traces)
  libyaml-dev                       # scenario files
  libopenblas-dev                   # sgemm baseline in bench/quantizers
  libmpfr-dev                       # tests: FSQ's tanh against exact values
  libb2-dev                         # BLAKE2b: verifies fixture files
  python3-xxhash                    # tests: the README digest in pure Python
  python3-dev python3-venv          # the Python package (pip install .)
  python3-torch python3-numpy       # PyTorch jobs checked by vqcheck.torch (CPU, gloo)
  python3-pytest                    # the Python package's tests
  clang libclang-rt-dev             # tests/fuzz: libFuzzer targets (label slow)
  libxml2-dev                       # tests: parse junit.xml with a real XML parser
  valgrind                          # tests: memcheck over the EMA statistics' unzeroed buffer
  chromium                          # tests: render report.html headless (big)
  groff-base man-db                 # tests: the man page renders; man -w vqcheck
  slurmd slurmctld slurm-client     # tests/slurm.sh: a one-node Slurm of its own
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 3; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
