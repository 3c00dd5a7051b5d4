# shellcheck shell=bash
# Report several detached jobs of one instance in one call: for each job k < __BJ_COUNT (its directory __bj_dir_k, id
# __BJ_ID_k), its state and its log bytes from __BJ_OFFSET_k (at most __BJ_MAX_k), as job_poll.sh does for one
# (core/jobs/scripts.py build_poll_many_command; each block is parsed by core/jobs/remote.py parse_poll_output). While
# every job runs, first wait up to __BJ_WAIT tenths of a second for one of them to end, so that an end is seen within
# a tenth of a second whichever job it is.
# shellcheck disable=SC2154  # the header (core/protocol/remote_scripts.py) sets __BJ_COUNT, __BJ_WAIT and the jobs'
__bj_all_running() {
  __bj_k=0
  while [ "$__bj_k" -lt "$__BJ_COUNT" ]; do
    __bj_v="__bj_dir_$__bj_k"; __bj_dir=${!__bj_v}
    [ -d "$__bj_dir" ] && [ ! -f "$__bj_dir/exit_code" ] || return 1
    __bj_read_pid
    { [ "$__bj_pid" != - ] && __bj_alive "$__bj_pid"; } || return 1
    __bj_k=$((__bj_k + 1))
  done
}
__bj_w=$__BJ_WAIT
while [ "$__bj_w" -gt 0 ] && __bj_all_running; do
  __bj_still_read || exit 0
  sleep 0.1; __bj_w=$((__bj_w - 1))
done
__bj_j=0
while [ "$__bj_j" -lt "$__BJ_COUNT" ]; do
  __bj_v="__bj_dir_$__bj_j"; __bj_dir=${!__bj_v}
  __bj_v="__BJ_ID_$__bj_j"; __BJ_ID=${!__bj_v}
  __bj_v="__BJ_OFFSET_$__bj_j"; __bj_o=${!__bj_v}
  __bj_v="__BJ_MAX_$__bj_j"; __bj_m=${!__bj_v}
  __bj_status "$__bj_o" "$__bj_m"
  __bj_j=$((__bj_j + 1))
done
exit 0
