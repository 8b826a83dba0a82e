#!/usr/bin/env bash
# ptxas-report.sh: the per-kernel resource table (ptxas -v: registers, spill
# stores/loads, stack frame, static shared memory) of the CUDA kernels, as
# Markdown on stdout; bench/ptxas_sm90.md is its output, before and after.
#
# Usage: scripts/ptxas-report.sh BUILD_DIR [FILE.cu ...]
#   BUILD_DIR  a configured build with CUDA on (cmake -S . -B BUILD_DIR;
#              VQC_PTXAS_VERBOSE need not be on). Its own nvcc and flags
#              (kernels/CMakeFiles/vqc_kernels.dir/flags.make) are used, so
#              the numbers are those of the build; each file is compiled
#              again into a temporary directory, one at a time, and nothing
#              in BUILD_DIR changes.
#   FILE.cu    the files to report (default: every kernels/*.cu). A file
#              given from elsewhere (an old version, say) is compiled with
#              the same flags; its quoted #includes come from its own
#              directory first.
# Exit status: 0 table written, 1 a compile failed (its output on stderr),
# 2 misuse.
set -euo pipefail

usage() { echo "usage: $0 BUILD_DIR [FILE.cu ...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help)
  sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
build=$(cd "$1" && pwd) || usage
shift
src=$(cd "$(dirname "$0")/.." && pwd)
dir="$build/kernels"
flags="$dir/CMakeFiles/vqc_kernels.dir/flags.make"
[ -f "$flags" ] || { echo "$0: $flags not found (configured with CUDA?)" >&2; exit 2; }
nvcc=$(sed -n 's/^# compile CUDA with //p' "$flags")
[ -x "$nvcc" ] || { echo "$0: no nvcc named in $flags" >&2; exit 2; }
command -v c++filt >/dev/null || { echo "$0: c++filt not found" >&2; exit 2; }

flag() { sed -n "s/^$1 = //p" "$flags"; }
read -r -a opts <<<"$(flag CUDA_DEFINES) $(flag CUDA_INCLUDES) $(flag CUDA_FLAGS)"
case " ${opts[*]} " in *" -Xptxas=-v "*) ;; *) opts+=(-Xptxas=-v) ;; esac

if [ $# -eq 0 ]; then set -- "$src"/kernels/*.cu; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "| file | kernel | variant | registers | spill stores / loads (B) | stack (B) | smem (B) |"
echo "|---|---|---|---:|---:|---:|---:|"
for f in "$@"; do
  f=$(cd "$(dirname "$f")" && pwd)/$(basename "$f")
  # relative paths in flags.make (the includes .rsp) are from $dir
  if ! (cd "$dir" && "$nvcc" "${opts[@]}" -c "$f" -o "$tmp/k.o") \
      >"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    exit 1
  fi
  # ptxas -v, per entry function:
  #   Compiling entry function 'NAME' for 'sm_90'
  #   Function properties for NAME
  #       S bytes stack frame, W bytes spill stores, R bytes spill loads
  #   Used N registers, ..., M bytes smem        (smem absent when 0)
  awk -v file="$(basename "$f")" '
    /Compiling entry function/ {
      name = $0; sub(/.*entry function \x27/, "", name); sub(/\x27.*/, "", name)
      stack = st = ld = "?"; next }
    /bytes stack frame/ && name != "" {
      stack = $1; st = $5; ld = $9; next }
    /Used [0-9]+ registers/ && name != "" {
      regs = $0; sub(/.*Used /, "", regs); sub(/ .*/, "", regs)
      smem = 0
      if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH - 11)
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", file, name, regs, st, ld, stack, smem
      name = "" }' "$tmp/log" >"$tmp/rows"
  cut -f2 "$tmp/rows" | c++filt >"$tmp/names"
  # demangled "void k<A, B>(args)" -> kernel "k", variant "<A, B>"; the
  # versioned inline namespaces of CUB and libcu++ left out
  paste "$tmp/rows" "$tmp/names" | awk -F'\t' '
    function strip_args(s,   i, depth, c) {
      if (substr(s, length(s)) != ")") return s
      depth = 0
      for (i = length(s); i > 0; i--) {
        c = substr(s, i, 1)
        if (c == ")") depth++
        else if (c == "(" && --depth == 0) return substr(s, 1, i - 1)
      }
      return s }
    {
      d = strip_args($8)
      sub(/^void /, "", d)
      gsub(/cub::CUB_[0-9]+_SM_[0-9]+::/, "cub::", d)
      gsub(/cuda::std::__[0-9]+::/, "cuda::std::", d)
      i = index(d, "<")
      kernel = i ? substr(d, 1, i - 1) : d
      variant = i ? "`" substr(d, i) "`" : "-"
      printf "| %s | `%s` | %s | %s | %s / %s | %s | %s |\n",
             $1, kernel, variant, $3, $4, $5, $6, $7 }'
done
