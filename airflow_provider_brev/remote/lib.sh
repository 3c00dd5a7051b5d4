# shellcheck shell=bash
# Shared helpers of every remote script (prepended by cli/protocol/remote_scripts.py, after the header).
# __brev_mark KIND [FIELD...] [TEXT]: print one marker line "BREV_KIND FIELD... TEXT" (the grammar of
# cli/protocol/markers.py: fields hold no blank, only a kind's last value, its text, may hold spaces).
__brev_mark() { local IFS=' '; printf 'BREV_%s\n' "$*"; }
