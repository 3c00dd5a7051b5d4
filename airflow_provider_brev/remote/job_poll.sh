# shellcheck shell=bash
# Report a detached job's state and its log bytes from __BJ_OFFSET (at most __BJ_MAX), in one call
# (core/jobs/scripts.py build_poll_command; parsed by core/jobs/remote.py parse_poll_output). While the job runs,
# first wait up to __BJ_WAIT tenths of a second for it to end, so that its end is seen within a tenth of a second
# rather than at the next poll.
# shellcheck disable=SC2154  # the header (core/protocol/remote_scripts.py) sets __BJ_OFFSET, __BJ_MAX and __BJ_WAIT
__bj_w=$__BJ_WAIT
while [ "$__bj_w" -gt 0 ] && [ -d "$__bj_dir" ] && [ ! -f "$__bj_dir/exit_code" ]; do
  __bj_read_pid
  { [ "$__bj_pid" != - ] && __bj_alive "$__bj_pid"; } || break
  __bj_still_read || exit 0
  sleep 0.1; __bj_w=$((__bj_w - 1))
done
__bj_status "$__BJ_OFFSET" "$__BJ_MAX"
exit 0
