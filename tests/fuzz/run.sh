#!/bin/sh
# run.sh: builds one libFuzzer target with clang and runs it for a bounded
# time from its seed corpus; the ctest entries slow.fuzz_trace and
# slow.fuzz_scenario call it (tests/CMakeLists.txt).
#
#   tests/fuzz/run.sh TARGET [SECONDS] [WORK_DIR]
#     TARGET    trace (checkers/trace.c + trace_compare.c) or scenario
#               (harness/models/scenario.c)
#     SECONDS   -max_total_time (default 30)
#     WORK_DIR  binaries, the growing corpus, crash files (default
#               /tmp/vqc-fuzz)
#
# libFuzzer needs clang (-fsanitize=fuzzer; gcc has no equivalent), so the
# targets are compiled here against the parser sources rather than by the
# main (gcc) build. ASan, UBSan (no recovery) and leak checking are on. The
# seed corpus in tests/fuzz/corpus/TARGET is copied into WORK_DIR first, so
# new inputs never touch the repository. Exit: 0 no crash, 1 a crash (the
# input is saved as WORK_DIR/crash-TARGET-*: replay it with
# WORK_DIR/fuzz_TARGET FILE), 2 usage, 77 skip (no clang or no libFuzzer;
# scripts/install-deps.sh installs clang and libclang-rt-dev).
set -eu

target=${1:-}
secs=${2:-30}
work=${3:-/tmp/vqc-fuzz}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
cc=${VQC_FUZZ_CC:-clang}

case "$target" in
  trace)
    sources="$src/checkers/trace.c $src/checkers/trace_compare.c
             $src/checkers/findings.c $src/lib/src/core/status.c
             $src/lib/src/core/fsutil.c"
    libs="jansson" ;;
  scenario)
    sources="$src/harness/models/scenario.c $src/checkers/findings.c
             $src/lib/src/core/fault.c $src/lib/src/core/status.c"
    libs="yaml-0.1 jansson" ;;
  *)
    echo "usage: $0 trace|scenario [SECONDS] [WORK_DIR]" >&2
    exit 2 ;;
esac

if ! command -v "$cc" >/dev/null 2>&1; then
  echo "SKIP: $cc not found: the fuzzers need clang's libFuzzer (scripts/install-deps.sh)"
  exit 77
fi
mkdir -p "$work"
# libFuzzer present? (Debian ships it in libclang-rt-<version>-dev.)
probe="$work/probe.c"
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if ! "$cc" -fsanitize=fuzzer "$probe" -o "$work/probe" >/dev/null 2>&1; then
  echo "SKIP: $cc -fsanitize=fuzzer does not link (install libclang-rt-dev: scripts/install-deps.sh)"
  exit 77
fi

bin="$work/fuzz_$target"
# shellcheck disable=SC2086 # word splitting of the lists is intended
"$cc" -std=gnu11 -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src/lib/include" -I"$src/checkers" -I"$src/harness/models" \
  $(pkg-config --cflags $libs) \
  "$here/fuzz_$target.c" $sources \
  $(pkg-config --libs $libs) -lm -lpthread -o "$bin"

corpus="$work/corpus-$target"
mkdir -p "$corpus"
cp "$here/corpus/$target"/* "$corpus"/
dict=""
[ -f "$here/$target.dict" ] && dict="-dict=$here/$target.dict"

log="$work/fuzz_$target.log"
set +e
# shellcheck disable=SC2086
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -max_len=16384 -print_final_stats=1 $dict \
  -artifact_prefix="$work/crash-$target-" "$corpus" >"$log" 2>&1
rc=$?
set -e
runs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1)
echo "fuzz_$target: ${runs:-no summary} (corpus: $(ls "$corpus" | wc -l) inputs, log: $log)"
if [ "$rc" -ne 0 ]; then
  echo "fuzz_$target: FAILED (exit $rc): the end of the log:"
  tail -40 "$log"
  ls "$work"/crash-"$target"-* 2>/dev/null || true
  exit 1
fi
