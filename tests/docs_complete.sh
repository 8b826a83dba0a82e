#!/bin/sh
# docs_complete.sh: the man page and the bash completion must keep up with
# the command line (issue 13). The help texts are the source of truth:
#
#   usage: docs_complete.sh VQCHECK MANPAGE COMPLETION
#
#   - every command listed by `VQCHECK --help` has its own .SS subsection in
#     MANPAGE and is offered by the completion after `vqcheck `;
#   - every option of `VQCHECK --help` (a token starting with --) is in
#     MANPAGE's OPTIONS section and offered after `vqcheck --`;
#   - every option of `VQCHECK CMD --help` is in CMD's subsection of
#     MANPAGE and offered after `vqcheck CMD --`; an option given with its
#     values in the usage lines (`[--backend threads|mpi|nccl]`) has each
#     value in that subsection and offered after `vqcheck CMD --backend `;
#   - MANPAGE renders without a warning (groff -man -ww, else
#     man --warnings; mandoc -T lint too where it is installed).
#
# The completion is checked by behaviour: COMPLETION is sourced in bash and
# its _vqcheck is called with COMP_WORDS/COMP_CWORD set, as bash does on
# TAB. Exit 0 all present, 1 something is missing or a warning (each named
# on stderr), 2 bad usage, 77 (skip) when neither groff nor man is installed
# to check the rendering (Debian package groff-base) and nothing is missing.
set -u

if [ $# -ne 3 ]; then
  echo "usage: $0 VQCHECK MANPAGE COMPLETION" >&2
  exit 2
fi
VQ=$1
MAN=$2
COMP=$3
for f in "$MAN" "$COMP"; do
  [ -r "$f" ] || { echo "docs_complete: cannot read $f" >&2; exit 2; }
done
[ -x "$VQ" ] || { echo "docs_complete: $VQ is not executable" >&2; exit 2; }

# Options the help texts quote from other programs (the default launcher
# 'mpiexec --oversubscribe', + --allow-run-as-root as root): the man page
# must explain them, the completion must not offer them to vqcheck.
FOREIGN=" --oversubscribe --allow-run-as-root "

fail=0
missing() {
  echo "docs_complete: MISSING: $*" >&2
  fail=1
}

# The man page as plain words: roff's minus \-, font changes \fB \fI \fR
# \fP \f(XX \f[X], and the zero-width \& and \% taken out.
plain_man() {
  sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\f(..//g' \
      -e 's/\\f\[[^]]*\]//g' -e 's/\\&//g' -e 's/\\%//g' "$MAN"
}
PLAIN=$(plain_man)

# The lines of one section: from the .SH/.SS line whose title starts with
# $2 (a whole word, quoted or not) up to the next .SH or .SS. $1 is SH or SS.
section() {
  printf '%s\n' "$PLAIN" | awk -v kind=".$1" -v name="$2" '
    /^\.S[HS]([ \t]|$)/ {
      if (on) exit
      t = $0
      sub(/^\.S[HS][ \t]+/, "", t)
      sub(/^"/, "", t)
      if ($1 == kind && (t == name || index(t, name " ") == 1 ||
                         index(t, name "\"") == 1)) on = 1
      next
    }
    on { print }'
}

# Whether word $1 appears as a whole token in standard input.
has_word() {
  grep -Eq -e "(^|[^A-Za-z0-9_-])$1([^A-Za-z0-9_-]|\$)"
}

# The --tokens of standard input, one a line, sorted, without duplicates.
dash_tokens() {
  tr -c 'A-Za-z0-9_-' '\n' | grep -e '^--[A-Za-z]' | sort -u
}

# What the completion offers for the words "$@" (the last one being
# completed), one a line. Needs bash; prints nothing without it.
complete_words() {
  bash --norc --noprofile -c '
    comp=$1; shift
    . "$comp" || exit 1
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    _vqcheck vqcheck "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"' sh "$COMP" "$@"
}
if command -v bash >/dev/null 2>&1; then
  HAVE_BASH=1
else
  HAVE_BASH=0
  echo "docs_complete: no bash: the completion file is only searched for" \
       "the words, not run" >&2
fi

# Sourcing the file must register the function for vqcheck.
if [ "$HAVE_BASH" -eq 1 ]; then
  bash --norc --noprofile -c '. "$1" >/dev/null 2>&1; complete -p vqcheck' \
      sh "$COMP" 2>/dev/null | grep -q -e '-F _vqcheck' ||
    missing "completion: sourcing $COMP does not run" \
            "'complete -F _vqcheck vqcheck'"
fi

# Whether the completion offers word $1 for the words "$2..."; without bash,
# whether the completion file holds it at all.
offers() {
  want=$1
  shift
  if [ "$HAVE_BASH" -eq 1 ]; then
    complete_words "$@" | grep -qxF -e "$want"
  else
    has_word "$want" < "$COMP"
  fi
}

# ---- the commands and the global options

top=$("$VQ" --help) || { echo "docs_complete: '$VQ --help' failed" >&2; exit 1; }
commands=$(printf '%s\n' "$top" | awk '
  /^commands:/ { on = 1; next }
  on && /^$/   { exit }
  on && /^  [a-z]/ { print $1 }')
if [ -z "$commands" ]; then
  echo "docs_complete: '$VQ --help' lists no commands" >&2
  exit 1
fi

opts_section=$(section SH OPTIONS)
[ -n "$opts_section" ] || missing "man page: no OPTIONS section"
for o in $(printf '%s\n' "$top" | dash_tokens); do
  printf '%s\n' "$opts_section" | has_word "$o" ||
    missing "man page: global option $o (OPTIONS section)"
  offers "$o" vqcheck -- ||
    missing "completion: global option $o (after 'vqcheck --')"
done

# ---- each command

for cmd in $commands; do
  if ! help=$("$VQ" "$cmd" --help 2>&1); then
    echo "docs_complete: '$VQ $cmd --help' failed:" >&2
    printf '%s\n' "$help" | head -n 3 >&2
    fail=1
    continue
  fi
  sec=$(section SS "$cmd")
  if [ -z "$sec" ]; then
    missing "man page: command $cmd (no '.SS $cmd ...' subsection)"
  fi
  offers "$cmd" vqcheck "" ||
    missing "completion: command $cmd (after 'vqcheck ')"
  for o in $(printf '%s\n' "$help" | dash_tokens); do
    if [ -n "$sec" ]; then
      printf '%s\n' "$sec" | has_word "$o" ||
        missing "man page: option $o of '$cmd' (its .SS subsection)"
    fi
    case $FOREIGN in *" $o "*) continue ;; esac
    offers "$o" vqcheck "$cmd" -- ||
      missing "completion: option $o of '$cmd' (after 'vqcheck $cmd --')"
  done
  # Options with a fixed set of values, as the usage lines give them:
  # "[--backend threads|mpi|nccl]" (the usage: the lines up to the first
  # blank one).
  printf '%s\n' "$help" | awk '/^$/ { exit } { print }' | awk '{
      for (i = 1; i < NF; i++) {
        o = $i; v = $(i + 1)
        sub(/^\[/, "", o); sub(/\]$/, "", v)
        if (o ~ /^--[a-z-]+$/ && v ~ /^[a-z0-9_]+(\|[a-z0-9_]+)+$/) print o, v
      }}' > "${TMPDIR:-/tmp}/docs_complete.$$"
  while read -r o vals; do
    for v in $(printf '%s\n' "$vals" | tr '|' ' '); do
      if [ -n "$sec" ]; then
        printf '%s\n' "$sec" | has_word "$v" ||
          missing "man page: value '$v' of $o of '$cmd'"
      fi
      if [ "$HAVE_BASH" -eq 1 ]; then
        offers "$v" vqcheck "$cmd" "$o" "" ||
          missing "completion: value '$v' of $o of '$cmd'" \
                  "(after 'vqcheck $cmd $o ')"
      fi
    done
  done < "${TMPDIR:-/tmp}/docs_complete.$$"
  rm -f "${TMPDIR:-/tmp}/docs_complete.$$"
done

# ---- rendering

checked=0
if command -v groff >/dev/null 2>&1; then
  checked=1
  warn=$(groff -man -ww -z "$MAN" 2>&1) || warn="$warn (groff failed)"
  if [ -n "$warn" ]; then
    echo "docs_complete: WARNING from groff -man -ww -z $MAN:" >&2
    printf '%s\n' "$warn" >&2
    fail=1
  fi
elif command -v man >/dev/null 2>&1; then
  checked=1
  warn=$(man --warnings -l "$MAN" 2>&1 >/dev/null) || warn="$warn (man failed)"
  if [ -n "$warn" ]; then
    echo "docs_complete: WARNING from man --warnings -l $MAN:" >&2
    printf '%s\n' "$warn" >&2
    fail=1
  fi
fi
if command -v mandoc >/dev/null 2>&1; then
  warn=$(mandoc -T lint -W warning "$MAN" 2>&1)
  if [ -n "$warn" ]; then
    echo "docs_complete: WARNING from mandoc -T lint $MAN:" >&2
    printf '%s\n' "$warn" >&2
    fail=1
  fi
fi

if [ "$fail" -ne 0 ]; then
  echo "docs_complete: FAIL (see above)" >&2
  exit 1
fi
if [ "$checked" -eq 0 ]; then
  echo "SKIP: neither groff nor man is installed to check that $MAN renders" \
       "(install the Debian package groff-base)"
  exit 77
fi
echo "docs_complete: every command and option is in $MAN and $COMP;" \
     "the man page renders without warnings"
exit 0
