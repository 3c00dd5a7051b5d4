# shellcheck shell=bash
# Remove a detached job's directory (only <base_dir>/<job_id>); a job still running is left alone
# (core/jobs/scripts.py build_cleanup_command). Prints JOB_CLEANED <job_id> <removed|missing|running|failed>.
__bj_result=missing
case "$__bj_dir" in */"$__BJ_ID") ;; *) __bj_dir="" ;; esac
if [ -n "$__bj_dir" ] && [ -d "$__bj_dir" ]; then
  __bj_pid=-; [ -f "$__bj_dir/pid" ] && read -r __bj_pid < "$__bj_dir/pid"
  case "$__bj_pid" in ''|*[!0-9]*) __bj_pid=- ;; esac
  if [ ! -f "$__bj_dir/exit_code" ] && [ "$__bj_pid" != - ] && __bj_alive "$__bj_pid"; then
    __bj_result=running
  elif rm -rf -- "$__bj_dir"; then __bj_result=removed
  else __bj_result=failed; fi
fi
__brev_mark BREV_JOB_CLEANED "$__BJ_ID" "$__bj_result"
exit 0
