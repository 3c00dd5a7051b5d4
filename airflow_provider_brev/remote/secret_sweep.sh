# shellcheck shell=bash
# Remove the secret env files of earlier tries (__B_FILES, names below $HOME, space-separated) and any older than
# __B_STALE_MINUTES (core/jobs/shell.py stale_secret_cleanup).
# shellcheck disable=SC2154  # the header (core/protocol/remote_scripts.py) sets __B_FILES and __B_STALE_MINUTES
__brev_sweep_secrets "$__B_FILES" "$__B_STALE_MINUTES"
