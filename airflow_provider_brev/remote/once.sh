# shellcheck shell=bash
# Run a command at most once per call (mkdir of __B_GUARD is the atomic guard; a re-run only reports) and report
# its real exit code on stderr as <__B_MARKER>=<code> (or =started); always exits 0, so the released CLI never
# re-runs it (core/jobs/shell.py build_once_command; the hook reads the code with parse_once_marker).
# Header: __B_RUNS, __B_GUARD, __B_MARKER, __B_CMD (the user's command, run with bash -c), __B_CWD (or empty),
# __B_SECRET (the secret env file to source and delete first, or empty), __B_ENV_NAMES (plain variables, each in
# __B_ENV_<name>), __B_SECRET_NAMES and __BREV_REDACT_AWK (redaction, core/jobs/shell.py), __B_STALE_MINUTES.
# A re-run reports "started" when an earlier attempt started the command (STARTED_ELSEWHERE of core/jobs/shell.py).
# shellcheck disable=SC2154,SC2153  # the header (core/protocol/remote_scripts.py) sets the __B_* inputs

# Run the command with its output in private files that tail --pid streams until it exits: brev exec (ssh) ends
# only when every holder of the session's stdout/stderr has closed them, so a background child of the command
# must not hold them. The command runs in its own session (setsid) whose id goes to the guard's pid file, for
# foreground_kill.sh.
__b_detached() {
  local -a __b_env=() __b_names=()
  local __b_n __b_v
  read -r -a __b_names <<< "$__B_ENV_NAMES"
  for __b_n in "${__b_names[@]}"; do __b_v="__B_ENV_$__b_n"; __b_env+=("$__b_n=${!__b_v}"); done
  [ "${#__b_env[@]}" -eq 0 ] || __b_env=(env "${__b_env[@]}")
  __brev_o=$(mktemp) && __brev_e=$(mktemp) && __brev_ss=() && {
    command -v setsid >/dev/null 2>&1 && __brev_ss=(setsid)
    "${__brev_ss[@]}" "${__b_env[@]}" bash -c "$__B_CMD" </dev/null >"$__brev_o" 2>"$__brev_e" & __brev_p=$!
    printf '%s' "$__brev_p" > "$__B_GUARD"/pid
    if [ -n "$__B_SECRET_NAMES" ]; then
      tail -s 0.02 -n +1 --pid=$__brev_p -f "$__brev_o" | LC_ALL=C awk -v N="$__B_SECRET_NAMES" "$__BREV_REDACT_AWK" &
      __brev_t1=$!
      tail -s 0.02 -n +1 --pid=$__brev_p -f "$__brev_e" | LC_ALL=C awk -v N="$__B_SECRET_NAMES" "$__BREV_REDACT_AWK" >&2 &
      __brev_t2=$!
    else
      tail -s 0.02 -n +1 --pid=$__brev_p -f "$__brev_o" & __brev_t1=$!
      tail -s 0.02 -n +1 --pid=$__brev_p -f "$__brev_e" >&2 & __brev_t2=$!
    fi
    wait $__brev_p; __brev_x=$?; wait $__brev_t1 $__brev_t2; rm -f -- "$__brev_o" "$__brev_e"
    ( exit $__brev_x )
  }
}
__b_in_cwd() { if [ -n "$__B_CWD" ]; then cd "$__B_CWD" && __b_detached; else __b_detached; fi; }

__brev_sweep_secrets "" "$__B_STALE_MINUTES"
mkdir -p "$__B_RUNS"
if mkdir "$__B_GUARD" 2>/dev/null; then
  if [ -n "$__B_SECRET" ]; then
    # source and delete first: nothing that can fail (a bad cwd) runs before the delete
    # shellcheck disable=SC1090  # the secret file is the hook's, shipped with brev copy
    ( set -a; . "$__B_SECRET"; __brev_src=$?; rm -f -- "$__B_SECRET"; set +a; [ $__brev_src -eq 0 ] && __b_in_cwd )
  else
    __b_in_cwd
  fi
  __brev_rc=$?; printf '%s' "$__brev_rc" > "$__B_GUARD"/rc.tmp && mv -f "$__B_GUARD"/rc.tmp "$__B_GUARD"/rc
else
  __brev_rc=$(cat "$__B_GUARD"/rc 2>/dev/null || echo started)
  [ -z "$__B_SECRET" ] || rm -f -- "$__B_SECRET"
fi
# A newline on stdout guarantees the CLI's trailing instance-name line starts on its own line.
printf '\n'
printf '%s=%s\n' "$__B_MARKER" "$__brev_rc" >&2
exit 0
