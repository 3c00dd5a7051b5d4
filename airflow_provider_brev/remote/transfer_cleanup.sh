# shellcheck shell=bash
# Remove a transfer round's plan file and temp directory after an exec that failed part-way (core/staging/scripts.py).
# shellcheck disable=SC2154  # the header (core/protocol/remote_scripts.py) sets __X_F and __X_T
rm -f -- "$__X_F" 2>/dev/null
rm -rf -- "$__X_T" 2>/dev/null
__brev_mark BREV_XFER_CLEANED
exit 0
