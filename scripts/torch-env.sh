#!/usr/bin/env bash
# torch-env.sh: the torch 2.x lane. Makes the venv build-py/venv-torch2 (a
# plain venv, NOT --system-site-packages, so Debian's torch 1.13 and numpy
# cannot shadow the pinned ones), gives it a pinned torch 2.x from PyPI for
# CPU use, numpy, xxhash and pytest, installs this checkout's Python package
# into it with `pip install .` (as scripts/python-env.sh does) and prints the
# venv's python on stdout:
#   python=$(scripts/torch-env.sh) && "$python" -m pytest -q python/tests
# Debian's torch 1.13 lane (scripts/python-env.sh, build-py/venv) stays for
# what needs it: the vector-quantize-pytorch 1.12.10 acceptance test (on
# torch 2.x its einsum output is already contiguous, so that bug is latent).
#
# Where torch goes, and why there: PyPI's Linux torch is the CUDA build
# (about 2.3 GB of wheels, 4 GB installed, even for CPU use; the CPU-only
# wheels are on download.pytorch.org, which these machines cannot reach).
# It is installed once per machine, not per checkout, into
#   ${VQC_TORCH_HOME:-$HOME/.cache/vqcheck}/torch-<version>-<python tag>
# with `pip install --target`, and the venv sees it through a .pth file. A
# fresh clone on the same machine (CI runs in one) then reuses it: seconds,
# no download. pip's own cache cannot do this here: the PyPI mirror sends
# no Cache-Control headers, so pip caches none of the wheels it downloads.
# The folder holds only the pinned releases below, is made under a
# temporary name and renamed when `import torch` and a gloo group work in
# it, and is never changed after: a new pin gets a new folder (delete old
# ones by hand).
#
# What is installed, and why not simply `pip install torch==X`: torch's
# libtorch_cuda.so is loaded by `import torch` even without a GPU, and it
# links the CUDA libraries, so torch fails to import without them
# ("libcufile.so.0: cannot open shared object file"). Installed --no-deps
# are torch, its pure-Python requirements, and only the nvidia-* wheels
# whose libraries libtorch links (readelf -d torch/lib/*.so, NEEDED); left
# out are triton (GPU kernels for torch.compile, 272 MB), cusolver (only
# dlopen'ed by CUDA linear algebra, 217 MB), cuda-bindings, cuda-toolkit
# (a meta package), cccl and nvtx: 2.3 GB of downloads instead of 2.85 GB,
# 4.0 GB installed instead of 5.3 GB. The versions are the ones pip's
# resolver picks for torch 2.15.0 on Python 3.11; change them together.
#
# Needs /usr/bin/python3 (3.11) with python3-venv, the Debian packages of
# scripts/install-deps.sh for `pip install .`, and network access to PyPI
# the first time on a machine (later runs need it only for `pip install .`'s
# build backend, as python-env.sh does). Do not run it at the same time as
# python-env.sh: both builds use build-py/<wheel tag>.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build-py/venv-torch2
torch_version=2.15.0
pins=(
  "torch==$torch_version"
  # torch's pure-Python requirements (and theirs)
  filelock==4.3.1 typing-extensions==4.16.0 setuptools==84.2.1
  sympy==1.14.0 mpmath==1.3.0 networkx==3.6.1 jinja2==3.1.6
  markupsafe==3.0.4 fsspec==2026.9.0
  # the CUDA libraries libtorch links (import fails without each of them)
  nvidia-cuda-runtime==13.2.86 nvidia-cuda-cupti==13.2.86
  nvidia-cuda-nvrtc==13.2.86 nvidia-cublas==13.4.1.3
  nvidia-cufft==12.2.0.57 nvidia-cufile==1.17.1.22
  nvidia-cusparse==12.7.10.12 nvidia-nvjitlink==13.5.37
  nvidia-cusparselt-cu13==0.8.1 nvidia-cudnn-cu13==9.26.0.51
  nvidia-nccl-cu13==2.30.7 nvidia-nvshmem-cu13==3.7.2
)
# What the tests import besides torch (numpy, xxhash: test_digest.py), and
# pytest: installed into the venv itself (small; pip skips them when present).
test_pins=(numpy==2.4.6 xxhash==3.5.0 pytest==8.4.2)
pip=(--disable-pip-version-check --quiet)

if [ ! -x "$venv/bin/python" ]; then
  echo "torch-env: creating $venv (plain venv, /usr/bin/python3)" >&2
  /usr/bin/python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install "${pip[@]}" "${test_pins[@]}" >&2
tag=$("$venv/bin/python" -c \
  'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
home=${VQC_TORCH_HOME:-$HOME/.cache/vqcheck}
dir="$home/torch-$torch_version-$tag"
# The folder's name has a hash of the pins: other pins, another folder, so a
# checkout on older pins keeps working (delete folders no longer used by
# hand). The marker, written last, lists the pins.
want=$(printf '%s\n' "${pins[@]}")
dir="$dir-$(printf '%s' "$want" | sha256sum | cut -c1-8)"
if [ ! -f "$dir/.complete" ]; then
  echo "torch-env: installing torch $torch_version (CPU use, ~2.3 GB from" \
       "PyPI, once per machine) into $dir" >&2
  mkdir -p "$home"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  "$venv/bin/python" -m pip install "${pip[@]}" --no-deps --only-binary=:all: \
    --target "$tmp" "${pins[@]}" >&2
  # Entry-point scripts would name this checkout's venv: not used (run
  # `python -m pytest`, `python -m torch.distributed.run`).
  rm -rf "${tmp:?}/bin"
  # Checked before it is used: torch imports and two CPU ranks all_reduce.
  PYTHONPATH="$tmp" OMP_NUM_THREADS=1 "$venv/bin/python" - >&2 <<'EOF'
import socket
import torch, torch.distributed as dist, torch.multiprocessing as mp
def rank(r, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=r, world_size=2)
    x = torch.full((3,), float(r + 1))
    dist.all_reduce(x)
    assert x.tolist() == [3.0] * 3, x
    dist.destroy_process_group()
if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(rank, args=(port,), nprocs=2, start_method="fork")
    print("torch-env: torch", torch.__version__, "imports; gloo all_reduce works")
EOF
  printf '%s\n' "$want" >"$tmp/.complete"
  rm -rf "$dir"                   # one without its marker: unfinished
  mv -T "$tmp" "$dir"
  trap - EXIT
fi
# The venv sees the folder through a .pth file (rewritten each run, so a new
# pin takes effect); the venv's own site-packages come first.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$dir" >"$site/vqcheck-torch.pth"

echo "torch-env: pip install . into $venv" >&2
"$venv/bin/python" -m pip install "${pip[@]}" . >&2

# The pinned third-party releases the acceptance tests run (test_bridge.py),
# in build-py/thirdparty as scripts/python-env.sh installs them (same
# folders, same marker, so whichever script runs first installs them).
thirdparty=build-py/thirdparty
for release in vector-quantize-pytorch==1.12.10 vector-quantize-pytorch==1.12.11; do
  tp="$thirdparty/${release/==/-}"
  if [ ! -f "$tp/.complete" ]; then
    echo "torch-env: installing $release and einops 0.8.1 into $tp" >&2
    rm -rf "$tp"
    "$venv/bin/python" -m pip install "${pip[@]}" --no-deps --target "$tp" \
      "$release" einops==0.8.1 >&2
    touch "$tp/.complete"
  fi
done
# Current releases for the torch 2.x acceptance (test_thirdparty.py), each
# folder with exactly its pinned requirements (--no-deps; torch, numpy,
# sympy, fsspec and typing-extensions come from the venv):
#   vector-quantize-pytorch 1.32.0: VectorQuantize, ResidualVQ, FSQ, LFQ;
#   lightning 2.6.6: a Lightning DDP job on CPU.
torch2_releases=(
  "vector-quantize-pytorch-1.32.0:vector-quantize-pytorch==1.32.0 einops==0.8.2 einx==0.4.3 frozendict==2.5.1 loguru==0.7.3 torch-einops-utils==0.2.0"
  "lightning-2.6.6:lightning==2.6.6 pytorch-lightning==2.6.6 torchmetrics==1.9.0 lightning-utilities==0.15.3 PyYAML==6.0.4 tqdm==4.70.1 packaging==26.4"
)
for entry in "${torch2_releases[@]}"; do
  tp="$thirdparty/${entry%%:*}"
  read -r -a wheels <<<"${entry#*:}"
  if [ ! -f "$tp/.complete" ]; then
    echo "torch-env: installing ${wheels[*]} into $tp" >&2
    rm -rf "$tp"
    "$venv/bin/python" -m pip install "${pip[@]}" --no-deps --target "$tp" \
      "${wheels[@]}" >&2
    rm -rf "${tp:?}/bin"
    touch "$tp/.complete"
  fi
done
echo "$PWD/$venv/bin/python"
