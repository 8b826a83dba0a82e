#!/usr/bin/env bash
# python-env.sh: makes the venv build-py/venv (with Debian's site packages,
# so python3-torch and numpy are importable) and installs this checkout's
# Python package into it with `pip install .` (pyproject.toml: scikit-build-
# core from PyPI builds libvqcheck, the extension vqcheck._core and the
# vqcheck CLI, which lands in build-py/venv/bin). Prints the venv's python.
#   scripts/python-env.sh            (re)install; the CMake build in
#                                    build-py/<wheel tag> is reused
# Needs the Debian packages of scripts/install-deps.sh and network access to
# PyPI for the pinned build backend.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build-py/venv

if [ ! -x "$venv/bin/python" ]; then
  echo "python-env: creating $venv (--system-site-packages, /usr/bin/python3)" >&2
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
echo "python-env: pip install . into $venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check . >&2
echo "$PWD/$venv/bin/python"
