# shellcheck shell=bash
# The functions the job scripts share (core/jobs/scripts.py puts this before job_launch/poll/kill/cleanup.sh).
# Header: __bj_dir (the job's directory), __BJ_ID (the job id).
# shellcheck disable=SC2154  # the header (core/protocol/remote_scripts.py) sets __bj_dir and __BJ_ID

# The job's pid (== pgid == sid) may be reused after a reboot: ``launched`` records the boot id.
__bj_same_boot() {
  [ -r "$__bj_dir/launched" ] && [ -r /proc/sys/kernel/random/boot_id ] || return 0
  read -r __bj_b __bj_t < "$__bj_dir/launched"
  read -r __bj_nb < /proc/sys/kernel/random/boot_id
  [ "$__bj_b" = "$__bj_nb" ] || [ "$__bj_b" = - ] || [ -z "$__bj_b" ]
}

# True when the leader $1 is alive: not a zombie (an unreaped orphan still answers ``kill -0``), still leading
# its own process group, and started in this boot.
__bj_alive() {
  __bj_p=$1
  kill -0 "$__bj_p" 2>/dev/null || return 1
  if [ -r "/proc/$__bj_p/stat" ]; then
    { read -r __bj_l < "/proc/$__bj_p/stat"; } 2>/dev/null || return 1
    # shellcheck disable=SC2086  # split on purpose: the fields of /proc/<pid>/stat after the command name
    set -- ${__bj_l##*") "}
    case "$1" in Z|X) return 1 ;; esac
    [ "$3" = "$__bj_p" ] || return 1
  fi
  __bj_same_boot
}

# True while a live (non-zombie) process is in process group $1.
__bj_group_alive() {
  __bj_g=$1
  kill -0 -- "-$__bj_g" 2>/dev/null || return 1
  [ -r /proc/self/stat ] || return 0
  for __bj_f in /proc/[0-9]*/stat; do
    { read -r __bj_l < "$__bj_f"; } 2>/dev/null || continue
    # shellcheck disable=SC2086  # split on purpose: the fields of /proc/<pid>/stat after the command name
    set -- ${__bj_l##*") "}
    if [ "$3" = "$__bj_g" ] && [ "$1" != Z ] && [ "$1" != X ]; then return 0; fi
  done
  return 1
}

# One empty line while a poll waits on its jobs (the parser skips empty lines). Without a pty, sshd does not end a
# command whose client went away: a poll nobody reads any more ends at this write (SIGPIPE, or the failed write)
# instead of running out its wait.
__bj_still_read() {
  { printf '\n'; } 2>/dev/null
}

# Reads the pid file into $__bj_pid ("-" when absent); waits up to 2 s for a launcher that is half-way.
__bj_read_pid() {
  __bj_i=0
  while [ "$__bj_i" -lt 20 ] && [ ! -f "$__bj_dir/pid" ] && [ ! -f "$__bj_dir/exit_code" ]; do
    sleep 0.1; __bj_i=$((__bj_i + 1))
  done
  __bj_pid=-
  [ -f "$__bj_dir/pid" ] && read -r __bj_pid < "$__bj_dir/pid"
  case "$__bj_pid" in ''|*[!0-9]*) __bj_pid=- ;; esac
}

# Print the status marker, then log bytes [$1, min(size, $1 + $2)) in base64 between the log markers.
# Liveness is sampled before the exit file is checked, and the size after: a dead leader wrote its exit file (if
# ever) before dying, and ``finished`` means the log is complete up to the printed size.
__bj_status() {
  __bj_state=missing; __bj_rc=-; __bj_pid=-; __bj_size=0
  if [ -d "$__bj_dir" ]; then
    __bj_read_pid
    __bj_live=0; [ "$__bj_pid" != - ] && __bj_alive "$__bj_pid" && __bj_live=1
    if [ -f "$__bj_dir/exit_code" ]; then
      __bj_state=finished; read -r __bj_rc < "$__bj_dir/exit_code"
      case "$__bj_rc" in ''|*[!0-9]*) __bj_rc=- ;; esac
    elif [ "$__bj_live" = 1 ]; then __bj_state=running
    else __bj_state=lost; fi
    __bj_size=$(stat -c %s -- "$__bj_dir/log" 2>/dev/null) || __bj_size=0
    case "$__bj_size" in ''|*[!0-9]*) __bj_size=0 ;; esac
  fi
  __brev_mark BREV_JOB_STATUS "$__BJ_ID" "$__bj_state" "$__bj_rc" "$__bj_size" "$__bj_pid"
  __brev_mark BREV_JOB_LOG_BEGIN
  __bj_n=$((__bj_size - $1)); [ "$__bj_n" -gt "$2" ] && __bj_n=$2
  if [ "$__bj_n" -gt 0 ]; then
    tail -c +$(($1 + 1)) -- "$__bj_dir/log" | head -c "$__bj_n" | base64 -w 0
  fi
  printf '\n'
  __brev_mark BREV_JOB_LOG_END
}
