#!/bin/sh
# consumer_test.sh: `cmake --install` of a vqcheck build into a fresh
# prefix, then programs built OUTSIDE vqcheck's build against it, the two
# ways a user would (issue 13):
#   1. the install holds what it promises (bin, both libraries in .so and
#      .a, the headers with instrument.h and version.h, the CMake package,
#      vqcheck.pc, the man page, the bash completion, scenarios, bridge),
#      and the installed vqcheck runs: --version, and `list` finds the
#      installed scenarios by itself;
#   2. find_package(vqcheck CONFIG REQUIRED): a digest program
#      (vqcheck::vqcheck) whose digest must equal the README's formula
#      computed in Python, and examples/ddp_instrumented.c
#      (vqcheck::checkers, and again vqcheck::checkers_static), run with 2
#      thread ranks: clean exits 0 with "0 findings", --bug exits 1 with
#      the divergence finding;
#   3. pkg-config --cflags --libs vqcheck: the same digest program and
#      the instrumented loop, built with cc alone.
#
#   usage: consumer_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -u
SRC=$1
BUILD=$2
WORK=$3
PY=/usr/bin/python3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1
P=$WORK/prefix

cmake --install "$BUILD" --prefix "$P" > "$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log"; fail "cmake --install"; }
libdir=lib
[ -d "$P/lib" ] || fail "no $P/lib"
for f in bin/vqcheck lib/libvqcheck.so lib/libvqcheck.a \
         lib/libvqcheck_checkers.so lib/libvqcheck_checkers.a \
         include/vqc/vqc.h include/vqc/comm.h include/vqc/version.h \
         include/vqc/instrument.h include/vqc/gpu_base.h \
         lib/cmake/vqcheck/vqcheckConfig.cmake \
         lib/cmake/vqcheck/vqcheckConfigVersion.cmake \
         lib/cmake/vqcheck/vqcheckTargets.cmake lib/pkgconfig/vqcheck.pc \
         share/man/man1/vqcheck.1 share/bash-completion/completions/vqcheck \
         share/vqcheck/bridge/sitecustomize.py; do
  [ -e "$P/$f" ] || fail "the install has no $f"
done
ls "$P"/share/vqcheck/scenarios/*.yaml > /dev/null 2>&1 ||
  fail "the install has no scenarios"
"$P/bin/vqcheck" --version > "$WORK/version.txt" 2>&1 ||
  { cat "$WORK/version.txt"; fail "installed vqcheck --version"; }
cat "$WORK/version.txt"
grep -q "^vqcheck [0-9]" "$WORK/version.txt" || fail "--version: no version"
grep -q "^options: .*VQC_WITH_MPI=" "$WORK/version.txt" ||
  fail "--version: no build options"
# The installed binary finds the installed scenarios (not the source tree's).
(cd "$WORK" && env -u VQC_SCENARIO_DIR "$P/bin/vqcheck" list --json) \
  > "$WORK/list.json" 2> "$WORK/list.err" || { cat "$WORK/list.err"; fail "installed vqcheck list"; }
grep -q "$P/bin/../share/vqcheck/scenarios" "$WORK/list.json" ||
  fail "installed vqcheck list did not read $P/share/vqcheck/scenarios"

# The digest the README defines, in Python (python3-xxhash).
want=$("$PY" - <<'PYEOF'
import struct, xxhash
N = 100000
buf = struct.pack("<%df" % N, *[i * 0.5 for i in range(N)])
C = 65536
leaves = b"".join(struct.pack("<Q", xxhash.xxh3_64_intdigest(buf[o:o + C]))
                  for o in range(0, max(len(buf), 1), C))
header = b"VQCD" + bytes([1, 1, 1, 0]) + struct.pack("<1q", N)
print("%016x" % xxhash.xxh3_64_intdigest(header + leaves))
PYEOF
) || fail "python3 with xxhash is needed for the reference digest"

expect_ddp() { # $1 binary, $2 label
  out=$("$1" --ranks 2 --steps 4 --out "$WORK/runs-$2-clean" 2>&1)
  code=$?
  [ "$code" -eq 0 ] && printf '%s\n' "$out" | grep -qF "0 findings" ||
    { printf '%s\n' "$out"; fail "$2: clean run exited $code"; }
  out=$("$1" --ranks 2 --steps 4 --bug --out "$WORK/runs-$2-bug" 2>&1)
  code=$?
  [ "$code" -eq 1 ] &&
    printf '%s\n' "$out" | grep -qF "divergence at step 2 in fc1.weight" ||
    { printf '%s\n' "$out"; fail "$2: --bug run exited $code without the finding"; }
  echo "ok: $2 (2 thread ranks: clean 0 findings, --bug the divergence)"
}

# ---- find_package
C=$WORK/consumer-cmake
cmake -S "$SRC/tests/install/consumer" -B "$C" -DCMAKE_PREFIX_PATH="$P" \
  -DDDP_SOURCE="$SRC/examples/ddp_instrumented.c" > "$WORK/consumer.log" 2>&1 &&
  cmake --build "$C" >> "$WORK/consumer.log" 2>&1 ||
  { cat "$WORK/consumer.log"; fail "find_package(vqcheck) consumer build"; }
got=$("$C/digest_main") || fail "digest_main (find_package) failed"
[ "$got" = "$want" ] || fail "digest $got (find_package), the README's formula gives $want"
echo "ok: find_package digest $got"
# The shared libraries come from the prefix, not from the build tree.
ldd "$C/digest_main" | grep -q "$P/$libdir/libvqcheck.so" ||
  { ldd "$C/digest_main"; fail "digest_main does not use $P/$libdir/libvqcheck.so"; }
expect_ddp "$C/ddp_instrumented" find_package
expect_ddp "$C/ddp_static" find_package-static

# ---- pkg-config
export PKG_CONFIG_PATH="$P/$libdir/pkgconfig"
flags=$(pkg-config --cflags --libs vqcheck) || fail "pkg-config vqcheck"
echo "pkg-config --cflags --libs vqcheck: $flags"
K=$WORK/consumer-pc
mkdir -p "$K"
# shellcheck disable=SC2086 # the flags are words
cc -std=c11 -o "$K/digest_main" "$SRC/tests/install/consumer/digest_main.c" \
  $flags -Wl,-rpath,"$P/$libdir" || fail "cc with pkg-config flags (digest)"
# shellcheck disable=SC2086
cc -std=gnu11 -o "$K/ddp_instrumented" "$SRC/examples/ddp_instrumented.c" \
  $flags -lm -Wl,-rpath,"$P/$libdir" || fail "cc with pkg-config flags (ddp)"
got=$("$K/digest_main") || fail "digest_main (pkg-config) failed"
[ "$got" = "$want" ] || fail "digest $got (pkg-config), the README's formula gives $want"
echo "ok: pkg-config digest $got"
expect_ddp "$K/ddp_instrumented" pkg-config
echo "PASS: installed into $P; find_package and pkg-config consumers work"
