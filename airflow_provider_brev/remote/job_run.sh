# shellcheck shell=bash
# A detached job's own script (job.sh in its directory), written by airflow-provider-brev. Runs once; never
# re-launched (core/jobs/scripts.py). Header: __bj_dir, __BJ_COMMAND (the user's command, run with bash -c),
# __BJ_SECRET (the secret env file to source and delete, or empty), __BJ_CWD (or empty), __BJ_SETUP_FAILED (the exit
# code of a failed set-up), __BJ_ENV_NAMES (plain variables, each in __BJ_ENV_<name>), __BJ_SECRET_NAMES (their
# values are redacted from the log, by the awk program __BREV_REDACT_AWK of core/jobs/shell.py).
# shellcheck disable=SC2154  # the header (core/protocol/remote_scripts.py) sets the __BJ_* inputs
__bj_finish() {
  printf '%s\n' "$1" > "$__bj_dir/exit_code.tmp" &&
    mv -f -- "$__bj_dir/exit_code.tmp" "$__bj_dir/exit_code"
  exit "$1"
}
if [ -n "$__BJ_SECRET" ]; then
  # shellcheck disable=SC1090  # the secret file is the hook's, shipped with brev copy
  if . "$__BJ_SECRET"; then __bj_ok=1; else __bj_ok=0; fi
  rm -f -- "$__BJ_SECRET"
  if [ "$__bj_ok" != 1 ]; then
    echo 'brev-job: could not load the secret environment file; the command was not run' >&2
    __bj_finish "$__BJ_SETUP_FAILED"
  fi
fi
if [ -n "$__BJ_CWD" ]; then
  if ! cd -- "$__BJ_CWD"; then
    printf 'brev-job: cannot change directory to %s; the command was not run\n' "$__BJ_CWD" >&2
    __bj_finish "$__BJ_SETUP_FAILED"
  fi
fi
read -r -a __bj_names <<< "$__BJ_ENV_NAMES"
for __bj_n in "${__bj_names[@]}"; do __bj_v="__BJ_ENV_$__bj_n"; export "$__bj_n=${!__bj_v}"; done
if [ -n "$__BJ_SECRET_NAMES" ]; then  # the values leave the instance redacted
  bash -c "$__BJ_COMMAND" </dev/null 2>&1 | LC_ALL=C awk -v N="$__BJ_SECRET_NAMES" "$__BREV_REDACT_AWK"
  __bj_finish "${PIPESTATUS[0]}"
else
  bash -c "$__BJ_COMMAND" </dev/null
  __bj_finish "$?"
fi
