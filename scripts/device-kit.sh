#!/usr/bin/env bash
# device-kit.sh [KIT_DIR]: prepares, on this machine (no GPU), what a lent
# GPU machine needs to run vqcheck's device checks at once, since its image
# has nvcc and CMake but none of vqcheck's libraries (jansson, libyaml,
# xxhash, Criterion) and can fetch nothing.
#
# Builds build-kit/ (CUDA runtime linked statically; no MPI, so no nccl
# backend: a one-GPU machine can only form size-1 NCCL communicators, and
# OpenMPI does not travel well), then fills KIT_DIR (default .device-kit,
# git-ignored) with:
#   bin/   the gpu test programs, bench_gpu, the vqcheck CLI;
#   lib/   every shared library they load that is not glibc's, libstdc++'s
#          or the driver's (copied from this machine);
#   run.sh the checks: every gpu test, bench_gpu, `vqcheck suite
#          scenarios --device cuda`, with a time limit each, writing a
#          summary and the logs under $OUT.
# Then, from the device tool (carry names the kit):
#   run(command="sh .device-kit/run.sh", carry=[".device-kit"], timeout_s=540)
# Here, `sh .device-kit/run.sh` checks the kit itself: every library
# resolves inside it, and every test skips (no device).
set -euo pipefail
cd "$(dirname "$0")/.."
kit=${1:-.device-kit}
build=build-kit
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVQC_WITH_MPI=OFF \
  -DVQC_WITH_NCCL=OFF -DVQC_CUDART_STATIC=ON -DVQC_BUILD_EXAMPLES=OFF > /dev/null
tests=$(cd tests/gpu && ls test_gpu_*.c | sed 's/\.c$//')
# shellcheck disable=SC2086 # the names are words
cmake --build "$build" -j"$jobs" --target vqcheck_cli bench_gpu $tests
rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib"
for t in $tests; do cp "$build/tests/$t" "$kit/bin/"; done
cp "$build/bench/bench_gpu" "$build/harness/vqcheck" "$kit/bin/"
# Libraries: what ldd resolves here, except the C library, the C++ runtime,
# the GPU driver and the CUDA toolkit's (cuBLAS for bench_gpu's baseline:
# hundreds of MB), which the device machine has (and must use its own).
for b in "$kit"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r so; do
  case "$(basename "$so")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|ld-linux*|\
    libstdc++.so*|libgcc_s.so*|libcuda.so*|libnvidia*) ;;
    libcublas*|libcudart*|libnccl*) ;; # the device's CUDA toolkit has them
    *) cp -L "$so" "$kit/lib/" ;;
  esac
done
cat > "$kit/run.sh" <<'RUN'
#!/bin/sh
# run.sh: vqcheck's device checks from the kit (scripts/device-kit.sh made
# it). Run from the repository root; results go to $OUT (the device tool's)
# or ./device-out: summary.txt first, then one log per check.
set -u
kit=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-device-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$kit/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VQC_SOURCE_DIR="$PWD"
sum="$out/summary.txt"
: > "$sum"
(nvidia-smi -L 2>&1 || echo "no nvidia-smi") | tee -a "$sum"
missing=$(for b in "$kit"/bin/*; do ldd "$b" | grep "not found"; done | sort -u)
if [ -n "$missing" ]; then
  echo "libraries not found: $missing" | tee -a "$sum"
fi
check() { # name seconds command...
  name=$1 secs=$2
  shift 2
  t0=$(date +%s)
  timeout "$secs" "$@" > "$out/$name.log" 2>&1
  code=$?
  printf '%-28s exit %3s  %4ss\n' "$name" "$code" "$(( $(date +%s) - t0 ))" | tee -a "$sum"
  tail -n 3 "$out/$name.log" | sed 's/^/    /' >> "$sum"
}
for t in "$kit"/bin/test_gpu_*; do
  check "$(basename "$t")" 240 "$t" --jobs 1 --verbose
done
check bench_gpu 300 "$kit/bin/bench_gpu"
check suite_cuda 300 "$kit/bin/vqcheck" suite scenarios --device cuda \
  --out "$out/suite-cuda" --quiet
cat "$out"/test_gpu_*.log > "$out/gpu_tests.log" 2>/dev/null
rm -f "$out"/test_gpu_*.log
rm -rf "$out/suite-cuda"
echo "done: $sum"
RUN
chmod +x "$kit/run.sh"
du -sh "$kit"
echo "kit: $kit (carry it: run(command=\"sh $kit/run.sh\", carry=[\"$kit\"]))"
