#!/usr/bin/env bash
# python-env.sh: makes the venv build-py/venv (with Debian's site packages,
# so python3-torch and numpy are importable) and installs this checkout's
# Python package into it with `pip install .` (pyproject.toml: scikit-build-
# core from PyPI builds libvqcheck, the extension vqcheck._core and the
# vqcheck CLI, which lands in build-py/venv/bin). Prints the venv's python.
#   scripts/python-env.sh            (re)install; the CMake build in
#                                    build-py/<wheel tag> is reused
# Needs the Debian packages of scripts/install-deps.sh and network access to
# PyPI for the pinned build backend and the pinned third-party releases the
# acceptance tests run (build-py/thirdparty/).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build-py/venv

if [ ! -x "$venv/bin/python" ]; then
  echo "python-env: creating $venv (--system-site-packages, /usr/bin/python3)" >&2
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
echo "python-env: pip install . into $venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check . >&2

# Third-party releases the acceptance tests run unmodified under `vqcheck
# watch` (python/tests/test_bridge.py), pinned, each in its own folder the
# tests put on PYTHONPATH; downloaded once, so the tests need no network.
#   vector-quantize-pytorch 1.12.10: the lost all_reduce of
#     `embed_sum.contiguous()` (upstream issue #101); 1.12.11: the fix.
thirdparty=build-py/thirdparty
for release in vector-quantize-pytorch==1.12.10 vector-quantize-pytorch==1.12.11; do
  dir="$thirdparty/${release/==/-}"
  if [ ! -f "$dir/.complete" ]; then
    echo "python-env: installing $release and einops 0.8.1 into $dir" >&2
    rm -rf "$dir"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      --no-deps --target "$dir" "$release" einops==0.8.1 >&2
    touch "$dir/.complete"
  fi
done
echo "$PWD/$venv/bin/python"
