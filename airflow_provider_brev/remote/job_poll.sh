# shellcheck shell=bash
# Report a detached job's state and its log bytes from __BJ_OFFSET (at most __BJ_MAX), in one call
# (cli/jobs/scripts.py build_poll_command; parsed by cli/jobs/remote.py parse_poll_output).
# shellcheck disable=SC2154  # the header (cli/protocol/remote_scripts.py) sets __BJ_OFFSET and __BJ_MAX
__bj_status "$__BJ_OFFSET" "$__BJ_MAX"
exit 0
