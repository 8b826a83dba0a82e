# vqcheck.bash: bash completion for the vqcheck command line (issue 13).
#
#   source docs/completion/vqcheck.bash      # or install it as
#   /usr/share/bash-completion/completions/vqcheck
#
# Completes the commands, each command's options, the values of options with
# a fixed set of values, directories for --out and for commands that take a
# directory, *.yaml / *.yml scenario files for `run`, and the job's command
# line after `watch --`. The lists below follow the help texts
# (`vqcheck CMD --help`, the source of truth); tests/docs_complete.sh calls
# _vqcheck for every command and fails when an option of a help text is not
# offered. Needs nothing but bash 4 (mapfile), not the bash-completion
# package.

# Fills COMPREPLY with the directories matching $1.
_vqcheck_dirs() {
  compopt -o filenames 2>/dev/null
  mapfile -t COMPREPLY < <(compgen -d -- "$1")
}

# Fills COMPREPLY with the scenario files (*.yaml, *.yml) and the
# directories matching $1 (directories, to walk down to a file).
_vqcheck_scenarios() {
  compopt -o filenames 2>/dev/null
  # Two patterns, not '!*.@(yaml|yml)': that needs extglob, which a plain
  # interactive bash does not have on.
  mapfile -t COMPREPLY < <(compgen -d -- "$1"
                           compgen -f -X '!*.yaml' -- "$1"
                           compgen -f -X '!*.yml' -- "$1")
}

# The options of command $1, one string (what its --help lists).
_vqcheck_options() {
  case $1 in
    smoke) echo "--ranks --steps --seed --timeout --backend --fault --quiet --verbose --help" ;;
    conformance) echo "--kind --strict --json --verbose --help" ;;
    list) echo "--json --verbose --help" ;;
    run) echo "--ranks --steps --seed --backend --device --timeout --out --launcher --json --quiet --verbose --help" ;;
    suite) echo "--ranks --steps --seed --backend --device --timeout --out --launcher --json --quiet --verbose --help" ;;
    analyze) echo "--json --quiet --help" ;;
    compare) echo "--out --json --quiet --help" ;;
    report) echo "--format --quiet --verbose --help" ;;
    watch) echo "--nproc --interval --timeout --out --json --quiet --mpi --no-mpi --strict --buffered-sends --help --" ;;
  esac
}

# Whether option $2 of command $1 takes a value (the next word).
_vqcheck_takes_value() {
  case "$1:$2" in
    smoke:--ranks | smoke:--steps | smoke:--seed | smoke:--timeout | \
      smoke:--backend | smoke:--fault) return 0 ;;
    conformance:--kind) return 0 ;;
    run:--ranks | run:--steps | run:--seed | run:--timeout | run:--backend | \
      run:--device | run:--out | run:--launcher) return 0 ;;
    suite:--ranks | suite:--steps | suite:--seed | suite:--timeout | \
      suite:--backend | suite:--device | suite:--out | suite:--launcher) return 0 ;;
    compare:--out | report:--format) return 0 ;;
    watch:--nproc | watch:--interval | watch:--timeout | watch:--out) return 0 ;;
  esac
  return 1
}

# Completes the value of option $2 of command $1, the word being $3.
# Returns 1 when the option has no value to complete.
_vqcheck_value() {
  local cmd=$1 opt=$2 cur=$3 values=''
  case "$cmd:$opt" in
    smoke:--backend) values="threads mpi" ;;
    run:--backend | suite:--backend) values="threads mpi nccl" ;;
    *:--device) values="cpu cuda" ;;
    smoke:--fault) values="skip_weight_sync none" ;;
    report:--format) values="html md json junit" ;;
    conformance:--kind)
      values="fsq vq_eval vq_ema vq_dead_code vq_kmeans_init rvq_eval rvq_dropout_train" ;;
    *:--out) _vqcheck_dirs "$cur"; return 0 ;;
    *:--launcher) mapfile -t COMPREPLY < <(compgen -c -- "$cur"); return 0 ;;
    *) COMPREPLY=(); return 0 ;; # a number: nothing to offer
  esac
  mapfile -t COMPREPLY < <(compgen -W "$values" -- "$cur")
}

_vqcheck() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local commands="smoke conformance list run suite analyze compare report watch"
  COMPREPLY=()

  # The command: the first word after vqcheck that is not a global option.
  local i cmd='' cmd_at=0
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      -*) ;;
      *) cmd=${COMP_WORDS[i]}; cmd_at=$i; break ;;
    esac
  done
  if [[ -z $cmd ]]; then
    if [[ $cur == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "--help --version" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
    fi
    return 0
  fi

  # Walk the command's words before the cursor: whether the cursor is on an
  # option's value, and (watch) whether the job's command line has begun.
  local prev='' positional=0 job_at=0 w
  for ((i = cmd_at + 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    if [[ -n $prev ]]; then
      prev=''
      continue
    fi
    # --format=F: bash splits it at '=' (COMP_WORDBREAKS) into 3 words.
    if [[ $w == --format && ${COMP_WORDS[i + 1]} == = && $cmd == report ]]; then
      if ((i + 2 == COMP_CWORD)); then
        _vqcheck_value report --format "$cur"
        return 0
      fi
      ((i += 2))
      continue
    fi
    if [[ $cmd == watch && $w == -- ]]; then
      job_at=$((i + 1))
      break
    fi
    if [[ $w == -* ]]; then
      _vqcheck_takes_value "$cmd" "$w" && prev=$w
    else
      if [[ $cmd == watch ]]; then
        job_at=$i # the job's command starts at its first non-option word
        break
      fi
      positional=$((positional + 1))
    fi
  done
  if [[ $cmd == report && $cur == = && ${COMP_WORDS[COMP_CWORD - 1]} == --format ]]; then
    _vqcheck_value report --format ""
    return 0
  fi

  if ((job_at > 0)); then
    # After `watch [options] --`: a command, then its arguments (files).
    if ((COMP_CWORD == job_at)); then
      mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
      compopt -o filenames 2>/dev/null
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
    return 0
  fi
  if [[ -n $prev ]]; then
    _vqcheck_value "$cmd" "$prev" "$cur"
    return 0
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_vqcheck_options "$cmd")" -- "$cur")
    return 0
  fi

  # The command's one positional argument.
  ((positional > 0)) && return 0
  case $cmd in
    run) _vqcheck_scenarios "$cur" ;;
    conformance | list | suite | analyze | compare | report) _vqcheck_dirs "$cur" ;;
    watch) mapfile -t COMPREPLY < <(compgen -c -- "$cur") ;;
  esac
  return 0
}

complete -F _vqcheck vqcheck
