#!/bin/sh
# report_chromium.sh: renders a run's report.html in a real browser.
#
# Copies the sample run directory (tests/data/reports/sample-run: 3 ranks,
# a divergence at step 2, a deadlock at collective #15, and a finding whose
# tensor name, call site and message are HTML/script injections), runs
# `vqcheck report` on it, loads report.html in headless Chromium with
# --dump-dom (the DOM after parsing, as the browser built it) and checks:
#   - the verdict banner and the three findings (rows and messages);
#   - the three figures by id, each with drawn child elements;
#   - the injections stayed text: no <img> or <script> element exists.
# Exit 0 pass, 1 fail, 77 skip (no Chromium: scripts/install-deps.sh
# installs Debian's `chromium`).
#
# usage: report_chromium.sh VQCHECK SAMPLE_RUN_DIR WORK_DIR
set -u
vqcheck=$1
sample=$2
work=$3

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  echo "SKIP: chromium is not installed (scripts/install-deps.sh installs Debian's chromium)"
  exit 77
fi

rm -rf "$work"
mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd) # file:// needs an absolute path
cp -r "$sample" "$work/run" || exit 1

"$vqcheck" report "$work/run" --quiet
rc=$?
if [ "$rc" -ne 1 ]; then
  echo "FAIL: vqcheck report exited $rc, expected 1 (the run has findings)"
  exit 1
fi

# --user-data-dir: a fresh profile, so runs never share state; timeout: a
# browser that hangs fails the test instead of blocking ctest.
timeout 120 "$browser" --headless --disable-gpu --no-sandbox \
  --user-data-dir="$work/profile" --dump-dom "file://$work/run/report.html" \
  >"$work/dom.html" 2>"$work/chromium.log"
rc=$?
if [ "$rc" -ne 0 ] || [ ! -s "$work/dom.html" ]; then
  echo "FAIL: $browser --dump-dom exited $rc; its log:"
  tail -20 "$work/chromium.log"
  exit 1
fi

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# How many times a fixed string occurs in the DOM.
count() { grep -oF -- "$1" "$work/dom.html" | wc -l; }

expect_present() {
  [ "$(count "$1")" -ge 1 ] || fail "the DOM lacks: $1"
}

# The <svg id=...> element's markup, from its start tag to its end tag.
svg_of() {
  awk -v id="$1" 'index($0, "<svg id=\"" id "\"") { on = 1 }
                  on { print }
                  on && index($0, "</svg>") { exit }' "$work/dom.html"
}

expect_present 'class="verdict verdict-findings"'
expect_present 'FINDINGS: 3 findings'
[ "$(count '<tr class="finding-row"')" -eq 3 ] || fail "expected 3 finding rows"
expect_present "tensor 'codebook.embed' differs on rank 1 from rank 0 at step 2"
expect_present 'collective #15 all_reduce(float32, count 1552) at lib/src/ddp.c:88 vqc_ddp_allreduce_grads was entered by ranks 0, 2 but never by rank 1'
expect_present 'lib/src/ddp.c:88 vqc_ddp_allreduce_grads'

for id in digest-heatmap divergence-plot collective-timeline; do
  n=$(svg_of "$id" | grep -oE '<(rect|circle|polyline|line|text)[ >]' | wc -l)
  [ "$n" -ge 5 ] || fail "<svg id=\"$id\"> has $n drawn children (expected >= 5)"
done
[ "$(svg_of digest-heatmap | grep -oF 'class="cell differ"' | wc -l)" -eq 3 ] ||
  fail "the heatmap should have 3 differing cells (rank 1, steps 2-4)"
[ "$(svg_of divergence-plot | grep -oF '<circle' | wc -l)" -eq 5 ] ||
  fail "the divergence plot should have 5 points (steps 0-4)"
svg_of collective-timeline | grep -qF 'stuck: #15' ||
  fail "the timeline does not outline collective #15"

# The injections are text in the DOM, never elements.
[ "$(count '<img')" -eq 0 ] || fail "an <img> element exists: HTML injection"
[ "$(count '<script')" -eq 0 ] || fail "a <script> element exists: HTML injection"
expect_present '&lt;img src=x onerror=alert(1)&gt;'
expect_present '&lt;/td&gt;&lt;/tr&gt;&lt;script&gt;alert(3)&lt;/script&gt;'

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed; the DOM is in $work/dom.html"
  exit 1
fi
echo "report.html renders in $browser: findings, 3 figures, no injection"
exit 0
