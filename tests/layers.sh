#!/bin/sh
# layers.sh: libvqcheck's folders use only themselves and the folders below
# them: core <- comm <- quant <- train (issue 13). Each folder's layer.h
# lists the public headers (vqc/*.h) it owns; this test fails, naming the
# file, line and include, when
#   - a file of lib/src/L (any depth) includes a public header owned by a
#     layer above L, or an internal header of a folder above L
#     ("quant/vq_internal.h" from comm/, say);
#   - a file of lib/src includes an internal header without its folder
#     ("comm_internal.h"): the folder is what shows the layer;
#   - a public header includes one owned by a layer above its own;
#   - a public header belongs to no layer, or to two (vqc/vqc.h, the
#     umbrella of them all, excepted);
#   - a layer.h does not compile on its own (cc -fsyntax-only);
#   - a file of harness/ includes a header of a harness folder above its
#     own: cli <- run <- models <- scenario, and conformance/ stands alone
#     (only cli/ uses it);
#   - with OBJECT_DIR (the compiled lib/src objects: CMake's
#     lib/CMakeFiles/vqcheck_objects.dir/src), an object of one layer
#     refers to a symbol that only an object of a layer above defines: the
#     same rule at link level, where a call needs no include.
#
#   usage: layers.sh SOURCE_DIR GENERATED_INCLUDE_DIR [CC [OBJECT_DIR]]
set -u
SRC=$1
GEN=$2
CC=${3:-cc}
OBJ=${4:-}
LAYERS="core comm quant train"
PY=/usr/bin/python3
"$PY" - "$SRC" "$LAYERS" <<'PYEOF' || exit 1
import os, re, sys
src, layers = sys.argv[1], sys.argv[2].split()
rank = {l: i for i, l in enumerate(layers)}
inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
owner, errors = {}, []
for l in layers:
    path = os.path.join(src, "lib/src", l, "layer.h")
    for n, line in enumerate(open(path), 1):
        m = inc_re.match(line)
        if m and m.group(1).startswith("vqc/"):
            h = m.group(1)[4:]
            if h in owner:
                errors.append("%s:%d: vqc/%s is owned by %s/ already" % (path, n, h, owner[h]))
            owner[h] = l
pub = os.path.join(src, "lib/include/vqc")
for f in sorted(os.listdir(pub)):
    h = f[:-3] if f.endswith(".h.in") else f
    if h.endswith(".h") and h != "vqc.h" and h not in owner:
        errors.append("lib/include/vqc/%s: owned by no layer (list it in one lib/src/*/layer.h)" % f)

def check(path, shown, layer):
    for n, line in enumerate(open(path, errors="replace"), 1):
        m = inc_re.match(line)
        if not m:
            continue
        inc = m.group(1)
        top = inc.split("/")[0]
        if inc.startswith("vqc/"):
            h = inc[4:]
            if h == "vqc.h":
                errors.append("%s:%d: includes the umbrella vqc/vqc.h" % (shown, n))
            elif h in owner and rank[owner[h]] > rank[layer]:
                errors.append("%s:%d: %s/ includes %s, which %s/ (above it) owns"
                              % (shown, n, layer, inc, owner[h]))
        elif top in rank:
            if rank[top] > rank[layer]:
                errors.append("%s:%d: %s/ includes %s from %s/, above it"
                              % (shown, n, layer, inc, top))
        elif shown.startswith("lib/src/"):
            errors.append('%s:%d: include "%s" without its folder (write "%s/...")'
                          % (shown, n, inc, layer))

for l in layers:
    for root, _, files in os.walk(os.path.join(src, "lib/src", l)):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                p = os.path.join(root, f)
                check(p, os.path.relpath(p, src), l)
for f in sorted(os.listdir(pub)):
    h = f[:-3] if f.endswith(".h.in") else f
    if h in owner:
        check(os.path.join(pub, f), "lib/include/vqc/" + f, owner[h])
for e in errors:
    print(e)
if errors:
    sys.exit(1)
print("layers: %d public headers in %d layers; every include points down or sideways"
      % (len(owner), len(layers)))
PYEOF
"$PY" - "$SRC" <<'PYEOF' || exit 1
import os, re, sys
src = sys.argv[1]
h = os.path.join(src, "harness")
rank = {"scenario": 0, "models": 1, "conformance": 0, "run": 2, "cli": 3}
home = {}
for part in rank:
    for f in os.listdir(os.path.join(h, part)):
        if f.endswith(".h"):
            home[f] = part
inc_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
errors = []
for part in rank:
    for f in sorted(os.listdir(os.path.join(h, part))):
        if not f.endswith((".c", ".h")):
            continue
        for n, line in enumerate(open(os.path.join(h, part, f)), 1):
            m = inc_re.match(line)
            if not m or m.group(1) not in home:
                continue
            other = home[m.group(1)]
            if other != part and (rank[other] >= rank[part] or
                                  (other == "conformance" and part != "cli")):
                errors.append("harness/%s/%s:%d: %s/ includes %s from %s/"
                              % (part, f, n, part, m.group(1), other))
for e in errors:
    print(e)
if errors:
    sys.exit(1)
print("layers: harness/ folders include down only "
      "(cli <- run <- models <- scenario)")
PYEOF
for l in $LAYERS; do
  if ! echo "#include \"$l/layer.h\"" | "$CC" -std=gnu11 -fsyntax-only -x c - \
      -I"$SRC/lib/include" -I"$GEN" -I"$SRC/lib/src" 2> /tmp/layers.$$; then
    echo "lib/src/$l/layer.h does not compile on its own:"
    cat /tmp/layers.$$
    rm -f /tmp/layers.$$
    exit 1
  fi
done
rm -f /tmp/layers.$$
echo "layers: each layer.h compiles on its own"
if [ -n "$OBJ" ]; then
  [ -d "$OBJ" ] || { echo "layers: no object directory $OBJ"; exit 1; }
  command -v nm > /dev/null || { echo "layers: no nm (binutils)"; exit 1; }
  "$PY" - "$OBJ" "$LAYERS" <<'PYEOF' || exit 1
import os, subprocess, sys
obj, layers = sys.argv[1], sys.argv[2].split()
rank = {l: i for i, l in enumerate(layers)}
defined, wanted = {}, {}
for root, _, files in os.walk(obj):
    for f in sorted(files):
        if not f.endswith(".o"):
            continue
        p = os.path.join(root, f)
        layer = os.path.relpath(p, obj).split(os.sep)[0]
        if layer not in rank:
            continue
        for line in subprocess.check_output(["nm", "-g", p], text=True).splitlines():
            w = line.split()
            if len(w) == 3 and w[1] in "TDBRCV":
                defined[w[2]] = (layer, os.path.relpath(p, obj))
            elif len(w) == 2 and w[0] == "U":
                wanted.setdefault((layer, os.path.relpath(p, obj)), set()).add(w[1])
if not defined:
    sys.exit("layers: no objects under %s" % obj)
bad = []
for (layer, p), syms in sorted(wanted.items()):
    for s in sorted(syms):
        if s in defined and rank[defined[s][0]] > rank[layer]:
            bad.append("%s (%s/) uses %s, defined in %s (above it)"
                       % (p, layer, s, defined[s][1]))
for b in bad:
    print(b)
if bad:
    sys.exit(1)
print("layers: %d objects' symbols point down or sideways" % len(wanted))
PYEOF
fi
