#!/bin/sh
# docs.sh: a fresh clone is complete (issue 25 item 5): the design the code,
# tests and docs cite lives in the repository, and the paths the
# architecture pages name exist.
#
#   usage: docs.sh ROOT
#
# Fails (exit 1), printing file:line and what is wrong, when
#   - a file of the repository other than this one mentions the sibling
#     folder the design used to live in: "../shared", or "shared/" followed
#     by DESIGN, STYLE, spec, fixtures or hooks (the old citation form);
#   - a path named in backticks in CONTRIBUTING.md or docs/DESIGN.md does
#     not exist in the repository. A backticked word is a path when it
#     contains a '/' or ends in .c, .h, .md, .sh, .py, .cu or .yaml, and has
#     no space, '<', '*' or '$' (a pattern or a command, not a path); an
#     absolute path or a URL is not the repository's. A path is relative to
#     ROOT; it exists when it is a file of the repository or a folder
#     holding one. Fenced code blocks are not read (their backticks are
#     literal text);
#   - one of the pages themselves is missing (CONTRIBUTING.md,
#     docs/DESIGN.md, docs/STYLE.md, docs/spec/bugs.md,
#     docs/spec/quantizers.md), or the pages name no path at all (a check
#     that read nothing never passes).
# The repository's files: in a git checkout whose top is ROOT, what git
# lists (tracked, and untracked but not ignored: a new page counts before
# its commit; build outputs never do); elsewhere (a tarball), every file
# under ROOT but .git and the top-level build*, vqcheck-runs, .venv and
# __pycache__ folders (.gitignore's). Exit 2: bad usage.
set -u

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 ROOT (the repository's top folder)" >&2
  exit 2
fi
ROOT=$(cd "$1" && pwd -P) || exit 2
cd "$ROOT" || exit 2

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vqc-docs.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
files=$tmp/files

top=
if command -v git > /dev/null 2>&1; then
  top=$(git -C "$ROOT" rev-parse --show-toplevel 2> /dev/null) &&
    top=$(cd "$top" && pwd -P)
fi
if [ -n "$top" ] && [ "$top" = "$ROOT" ]; then
  how="git ls-files"
  git -C "$ROOT" ls-files --cached --others --exclude-standard > "$tmp/all" ||
    { echo "docs: git ls-files failed in $ROOT" >&2; exit 1; }
else
  how="find"
  find . \( -path ./.git -o -path './build*' -o -path ./vqcheck-runs \
         -o -path ./.venv -o -name __pycache__ \) -prune \
       -o -type f -print | sed 's|^\./||' > "$tmp/all"
fi
# Files only (a deleted file git still tracks, a submodule's folder: not).
while IFS= read -r f; do
  [ -f "$f" ] && printf '%s\n' "$f"
done < "$tmp/all" > "$files"

fail=0
bad() {
  echo "$*"
  fail=1
}

pages="CONTRIBUTING.md docs/DESIGN.md docs/STYLE.md docs/spec/bugs.md
       docs/spec/quantizers.md"
for p in $pages; do
  grep -qxF "$p" "$files" || bad "$p: missing (the repository's own design pages)"
done

# 1. Nothing points outside the repository for the design or fixtures.
pattern='\.\./shared|(^|[^A-Za-z0-9_./-])shared/(DESIGN|STYLE|spec|fixtures|hooks)'
grep -vxF tests/docs.sh "$files" | tr '\n' '\0' |
  xargs -0 grep -nIE -- "$pattern" /dev/null > "$tmp/mentions"
if [ -s "$tmp/mentions" ]; then
  while IFS= read -r m; do
    bad "$m"
  done < "$tmp/mentions"
  echo "  ^ points outside the repository: cite docs/DESIGN.md, docs/STYLE.md," \
       "docs/spec/ or tests/fixtures/ instead"
fi

# 2. The paths the architecture pages name exist.
checked=0
for doc in CONTRIBUTING.md docs/DESIGN.md; do
  [ -f "$doc" ] || continue
  awk '
    /^[ \t]*```/ { fenced = !fenced; next }
    fenced { next }
    {
      rest = $0
      while (match(rest, /`[^`]+`/)) {
        tok = substr(rest, RSTART + 1, RLENGTH - 2)
        rest = substr(rest, RSTART + RLENGTH)
        if (tok ~ /[ <*$]/ || tok ~ /^\// || tok ~ /:\/\//) continue
        if (tok ~ /\// || tok ~ /\.(c|h|md|sh|py|cu|yaml)$/)
          print FNR "\t" tok
      }
    }' "$doc" > "$tmp/paths"
  while IFS="$(printf '\t')" read -r line tok; do
    checked=$((checked + 1))
    p=${tok#./}
    while [ "${p%/}" != "$p" ]; do p=${p%/}; done
    if ! awk -v p="$p" '$0 == p || index($0, p "/") == 1 { found = 1; exit }
                        END { exit !found }' "$files"; then
      bad "$doc:$line: \`$tok\` is not a file or folder of the repository"
    fi
  done < "$tmp/paths"
done
if [ "$checked" -eq 0 ]; then
  bad "CONTRIBUTING.md, docs/DESIGN.md: no backticked path found (nothing checked)"
fi

if [ "$fail" -ne 0 ]; then
  echo "docs: FAILED ($how, $(wc -l < "$files" | tr -d ' ') files)"
  exit 1
fi
echo "docs: $(wc -l < "$files" | tr -d ' ') files ($how) cite nothing outside" \
     "the repository; $checked backticked paths in CONTRIBUTING.md and" \
     "docs/DESIGN.md exist"
