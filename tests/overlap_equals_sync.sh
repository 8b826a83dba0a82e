#!/bin/sh
# overlap_equals_sync.sh: the overlapped divergence check (the digest on a
# helper thread while the next step trains; checkers/checker.h overlap)
# must report exactly what the synchronous check reports, on every
# scenario of the catalogue and its clean twin (issue 12).
#
#   usage: overlap_equals_sync.sh VQCHECK SCENARIO_DIR WORK_DIR [RANKS...]
#
# For each scenario and each rank count (default 2 3), `vqcheck run --json`
# runs twice, with VQC_OVERLAP=0 and VQC_OVERLAP=1; the two run.json
# documents must have the same exit code, the same steps done and the same
# findings (kind, step, ranks, tensor, site, message). They are compared as
# sets: the order of two checkers' findings of one step, and of the ranks
# that made a merged finding, depends on thread timing in either mode.
set -u
VQ=$1
SCEN=$2
WORK=$3
shift 3
RANKS=${*:-2 3}
PY=/usr/bin/python3
rm -rf "$WORK"
mkdir -p "$WORK" || exit 1
fail=0
for f in "$SCEN"/*.yaml; do
  name=$(basename "$f" .yaml)
  for r in $RANKS; do
    for ov in 0 1; do
      VQC_OVERLAP=$ov "$VQ" run "$f" --ranks "$r" --json \
        --out "$WORK/$name-r$r-ov$ov" > "$WORK/$name-r$r-ov$ov.json" \
        2> "$WORK/$name-r$r-ov$ov.err"
      echo $? > "$WORK/$name-r$r-ov$ov.code"
    done
    if ! "$PY" - "$WORK/$name-r$r-ov0" "$WORK/$name-r$r-ov1" <<'PYEOF'
import json, sys
def load(base):
    code = open(base + ".code").read().strip()
    try:
        doc = json.load(open(base + ".json"))
    except ValueError as e:
        sys.exit("%s: not JSON (%s); stderr: %s" % (base, e, open(base + ".err").read()[-500:]))
    keep = ("kind", "step", "ranks", "tensor", "site", "message")
    findings = []
    for f in doc.get("findings", []):
        g = {k: f.get(k) for k in keep}
        g["ranks"] = sorted(g["ranks"] or [])
        findings.append(json.dumps(g, sort_keys=True))
    findings.sort()
    steps = (doc.get("training") or {}).get("steps_done")
    return code, steps, findings
a, b = load(sys.argv[1]), load(sys.argv[2])
if a != b:
    print("DIFFERENT: %s\n  sync:       %s\n  overlapped: %s" % (sys.argv[1], a, b))
    sys.exit(1)
print("same: %s (exit %s, %d findings)" % (sys.argv[1].rsplit("/", 1)[1][:-4], a[0], len(a[2])))
PYEOF
    then
      fail=1
    fi
  done
done
[ $fail -eq 0 ] && rm -rf "$WORK"
exit $fail
