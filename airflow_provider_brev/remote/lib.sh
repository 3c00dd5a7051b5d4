# shellcheck shell=bash
# Shared helpers of every remote script (prepended by core/protocol/remote_scripts.py, after the header).
# __brev_mark BREV_KIND [FIELD...] [TEXT]: print one marker line "BREV_KIND FIELD... TEXT" (the grammar of
# core/protocol/markers.py: fields hold no blank, only a kind's last value, its text, may hold spaces). The word is
# spelt out in full, so a script's text names the markers it prints.
__brev_mark() { local IFS=' '; printf '%s\n' "$*"; }
# __brev_sweep_secrets "FILE..." MINUTES: remove the named secret env files (below $HOME; earlier tries of the
# same call) and any secret env file older than MINUTES: a worker that died between brev copy and the
# launch never leaves one behind for good (core/jobs/shell.py).
__brev_sweep_secrets() {
  local __s
  local -a __files=()
  read -r -a __files <<< "$1"
  for __s in "${__files[@]}"; do rm -f -- "$HOME/$__s" 2>/dev/null; done
  find "$HOME" -maxdepth 1 -name '.airflow-brev-secret-*.env' -mmin +"$2" -delete 2>/dev/null
}
