# shellcheck shell=bash
# Start a detached job (own session and process group, survives ssh), at most once per job id: mkdir of the job
# directory is the guard (core/jobs/scripts.py build_launch_command; parsed by core/jobs/remote.py).
# Header: __bj_base (the jobs' directory), __BJ_SCRIPT (the job's own script, job_run.sh rendered), __BJ_SECRET
# (its secret env file, or empty), __BJ_STALE_SECRETS (secret files of earlier tries, space-separated),
# __BJ_STALE_MINUTES, __BJ_STALE_DAYS. Prints JOB_LAUNCHED <id> <pid>, JOB_EXISTS <id> and a status block, or
# JOB_LAUNCH_FAILED <id> <reason>. Always exits 0.
# shellcheck disable=SC2154  # the header (core/protocol/remote_scripts.py) sets the __BJ_* inputs
set +m
__brev_sweep_secrets "$__BJ_STALE_SECRETS" "$__BJ_STALE_MINUTES"
trap '' HUP  # an ssh drop half-way must not leave a guard without a job
__bj_failed() { [ -z "$__BJ_SECRET" ] || rm -f -- "$__BJ_SECRET"; __brev_mark BREV_JOB_LAUNCH_FAILED "$__BJ_ID" "$1"; }
# Remove the directories of jobs that finished more than __BJ_STALE_DAYS days ago (exit_code is written when a job
# ends; a running job has none).
__bj_sweep() {
  # shellcheck disable=SC2016  # the $1 belongs to the inner sh
  find "$__bj_base" -mindepth 2 -maxdepth 2 -name exit_code -mtime +"$__BJ_STALE_DAYS" \
    -exec sh -c 'rm -rf -- "${1%/exit_code}"' _ {} \; 2>/dev/null
}
if ! command -v setsid >/dev/null 2>&1 || ! command -v nohup >/dev/null 2>&1; then
  __bj_failed missing-setsid
elif ! mkdir -p -- "$__bj_base" 2>/dev/null; then
  __bj_failed base-dir
elif __bj_sweep; mkdir -m 700 -- "$__bj_dir" 2>/dev/null; then
  if printf '%s' "$__BJ_SCRIPT" > "$__bj_dir/job.sh" && : > "$__bj_dir/log"; then
    setsid nohup bash "$__bj_dir/job.sh" > "$__bj_dir/log" 2>&1 < /dev/null &
    __bj_pid=$!
    printf '%s\n' "$__bj_pid" > "$__bj_dir/pid.tmp" && mv -f -- "$__bj_dir/pid.tmp" "$__bj_dir/pid"
    __bj_boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null) || __bj_boot=-
    printf '%s %s\n' "${__bj_boot:--}" "$(date +%s)" > "$__bj_dir/launched"
    __brev_mark BREV_JOB_LAUNCHED "$__BJ_ID" "$__bj_pid"
  else
    rm -rf -- "$__bj_dir"
    __bj_failed write-script
  fi
elif [ ! -d "$__bj_dir" ]; then
  __bj_failed job-dir
else
  [ -z "$__BJ_SECRET" ] || rm -f -- "$__BJ_SECRET"
  __brev_mark BREV_JOB_EXISTS "$__BJ_ID"
  __bj_status 0 0
fi
exit 0
