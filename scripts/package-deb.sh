#!/usr/bin/env bash
# package-deb.sh [BUILD_DIR]: builds vqcheck's Debian 12 package.
#
# Configures a release build made for packaging in BUILD_DIR (default
# build-deb), builds it and runs `cpack -G DEB`, which writes
# BUILD_DIR/vqcheck_<version>_<arch>.deb. Its Depends name the Debian 12
# packages of the shared libraries the binaries use
# (cmake/VqcInstall.cmake). What differs from the development build, and
# why:
#   -DVQC_CUDART_STATIC=ON  the CUDA runtime is linked in, so the package
#                           needs no CUDA toolkit: with an NVIDIA driver the
#                           GPU path works, without one vqcheck runs on the
#                           CPU (device tests skip, --device cuda exits 3);
#   -DVQC_WITH_NCCL=OFF     no Debian 12 package ships libnccl.so.2, and a
#                           binary linked to it would not start without it;
#                           the nccl backend needs a build from source;
#   tests, benchmarks and examples are not built.
# Prints the path of the .deb on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-deb}
jobs=$(nproc 2>/dev/null || echo 2)
cuda=()
if [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null 2>&1; then
  cuda=(-DVQC_CUDART_STATIC=ON)
fi
cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DVQC_WITH_NCCL=OFF "${cuda[@]}" -DVQC_BUILD_TESTS=OFF \
  -DVQC_BUILD_BENCH=OFF -DVQC_BUILD_EXAMPLES=OFF
cmake --build "$out" -j"$jobs"
rm -f "$out"/vqcheck_*.deb
(cd "$out" && cpack -G DEB)
ls "$out"/vqcheck_*.deb
