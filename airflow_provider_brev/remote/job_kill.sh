# shellcheck shell=bash
# SIGTERM a detached job's process group, SIGKILL it after the grace period (core/jobs/scripts.py
# build_kill_command). Header: __BJ_TICKS (grace in 0.1 s ticks), __BJ_GRACE (whole seconds), __BJ_KILLED_CODE and
# __BJ_TERMINATED_CODE (the exit codes it records). Prints JOB_KILLED <job_id> <result>.
# shellcheck disable=SC2154  # the header (core/protocol/remote_scripts.py) sets the __BJ_* inputs
__bj_result=missing
if [ -d "$__bj_dir" ]; then
  __bj_read_pid
  if [ -f "$__bj_dir/exit_code" ]; then __bj_result=already-finished
  else
    __bj_code=$__BJ_KILLED_CODE; __bj_result=not-running
    if [ "$__bj_pid" != - ] && __bj_same_boot && __bj_group_alive "$__bj_pid"; then
      kill -TERM -- "-$__bj_pid" 2>/dev/null
      __bj_i=0; __bj_end=$((${SECONDS:-0} + __BJ_GRACE))
      while [ "$__bj_i" -lt "$__BJ_TICKS" ] && [ "${SECONDS:-0}" -le "$__bj_end" ] && __bj_group_alive "$__bj_pid"; do
        sleep 0.1; __bj_i=$((__bj_i + 1))
      done
      if __bj_group_alive "$__bj_pid"; then
        kill -KILL -- "-$__bj_pid" 2>/dev/null; __bj_result=killed
        __bj_i=0
        while [ "$__bj_i" -lt 5 ] && __bj_group_alive "$__bj_pid"; do
          sleep 0.1; __bj_i=$((__bj_i + 1))
        done
      else __bj_code=$__BJ_TERMINATED_CODE; __bj_result=terminated; fi
    fi
    printf '%s\n' "$__bj_result" > "$__bj_dir/killed"
    if [ ! -f "$__bj_dir/exit_code" ]; then
      # no clobber: a job that ended meanwhile keeps its own exit code
      printf '%s\n' "$__bj_code" > "$__bj_dir/exit_code.kill" &&
        { ln -- "$__bj_dir/exit_code.kill" "$__bj_dir/exit_code" 2>/dev/null;
          rm -f -- "$__bj_dir/exit_code.kill"; }
    fi
  fi
fi
__brev_mark BREV_JOB_KILLED "$__BJ_ID" "$__bj_result"
exit 0
