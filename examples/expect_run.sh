#!/bin/sh
# expect_run.sh: runs a command and checks how it ended, for ctest.
#   sh expect_run.sh CODE TEXT COMMAND [ARGS...]
# Passes (exit 0) when COMMAND exits with CODE and its output (stdout and
# stderr) contains TEXT as a fixed string; otherwise prints why and exits 1.
# The output is always shown, so a failing test explains itself.
want_code=$1
want_text=$2
shift 2
out=$("$@" 2>&1)
code=$?
printf '%s\n' "$out"
if [ "$code" -ne "$want_code" ]; then
  echo "FAIL: exit code $code, expected $want_code"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -qF -- "$want_text"; then
  echo "FAIL: the output does not contain: $want_text"
  exit 1
fi
echo "PASS: exit code $code and the output contains: $want_text"
