# shellcheck shell=bash
# Stop the foreground command of one exactly-once call (once.sh): SIGTERM to its whole session, SIGKILL after
# __B_GRACE seconds (core/jobs/shell.py build_foreground_kill_command). Prints FG_KILLED or FG_NONE; exits 0.
# shellcheck disable=SC2154  # the header (core/protocol/remote_scripts.py) sets __B_GUARD and __B_GRACE
__p=$(cat "$__B_GUARD"/pid 2>/dev/null)
case "$__p" in ""|*[!0-9]*) __brev_mark BREV_FG_NONE; exit 0 ;; esac
kill -TERM -- -"$__p" 2>/dev/null || kill -TERM "$__p" 2>/dev/null
sleep "$__B_GRACE"
kill -KILL -- -"$__p" 2>/dev/null
__brev_mark BREV_FG_KILLED
exit 0
