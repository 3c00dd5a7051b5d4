# shellcheck shell=bash
# The listing of a remote directory (core/staging/listing.py builds its header; core/staging/reports.py parses it).
# Header: __L_D (the directory), __L_INC/__L_EXC (bash regexes), __L_MD5 (1: checksums), __L_MAN (1: print the
# manifest), __L_MN (its name), __L_C (md5 cache file or empty), __L_DROP (1: delete the cache), __L_SETTLE
# (seconds), __L_SF (signature format).
# shellcheck disable=SC2154,SC2153  # the header (core/protocol/remote_scripts.py) sets the __L_* inputs
exec 2>/dev/null
export LC_ALL=C  # patterns match bytes: a name that is not UTF-8 can never break the listing
if [ ! -d "$__L_D" ]; then [ -n "$__L_C" ] && rm -f -- "$__L_C" "$__L_C".*; __brev_mark BREV_XFER_NODIR; exit 0; fi
if [ "$__L_MAN" = 1 ] && [ -f "$__L_D/$__L_MN" ]; then sed 's/^/BREV_XFER_MANIFEST /' -- "$__L_D/$__L_MN"; fi
declare -A __l_cm=()
__l_cw=; __l_cok=1
if [ -n "$__L_C" ]; then
  if [ -f "$__L_C" ]; then
    while IFS= read -r -d '' __l_k && IFS= read -r -d '' __l_v; do __l_cm["$__l_k"]=$__l_v; done < "$__L_C"
  fi
  if [ "$__L_DROP" = 1 ]; then
    rm -f -- "$__L_C" "$__L_C".*  # with the temp files of listings killed part-way
  elif mkdir -p -- "${__L_C%/*}" && : > "$__L_C.$$"; then
    __l_cw="$__L_C.$$"; exec 3> "$__l_cw"
    trap 'rm -f -- "$__l_cw"' EXIT
    trap 'rm -f -- "$__l_cw"; exit 0' HUP INT TERM PIPE
  fi
fi
printf -v __l_now '%(%s)T' -1
__l_n=0; __l_bad=0
while IFS= read -r -d '' __l_e; do
  __l_st=${__l_e%%//*}; __l_r=${__l_e#*//}; __l_s=${__l_st%%/*}
  [ "$__l_r" = "$__L_MN" ] && continue
  case $__l_r in *$'\n'*|*$'\r'*|*$'\t'*) __l_bad=$((__l_bad + 1)); continue ;; esac
  if [ -n "$__L_INC" ] && ! [[ $__l_r =~ $__L_INC ]]; then continue; fi
  if [ -n "$__L_EXC" ] && [[ $__l_r =~ $__L_EXC ]]; then continue; fi
  if [ "$__L_MD5" = 1 ]; then
    __l_c=${__l_cm["$__l_r"]-}
    if [ -n "$__l_c" ] && [ "${__l_c% *}" = "$__l_st" ]; then
      __l_m=${__l_c##* }
    else
      if ! __l_m=$(md5sum < "$__L_D/$__l_r"); then __brev_mark BREV_XFER_UNREADABLE "$__l_r"; continue; fi
      __l_m=${__l_m%% *}
    fi
    __l_ct=${__l_st#*/*/}; __l_ct=${__l_ct%%[./]*}
    if [ -n "$__l_cw" ] && [ $((__l_now - __l_ct)) -ge "$__L_SETTLE" ]; then
      printf '%s\0%s %s\0' "$__l_r" "$__l_st" "$__l_m" >&3 || __l_cok=0  # disk full: keep no partial cache
    fi
  else
    __l_m=-
  fi
  __brev_mark BREV_XFER_FILE "$__l_s" "$__l_m" "$__l_st" "$__l_r"
  __l_n=$((__l_n + 1))
done < <(find -H "$__L_D" -mindepth 1 \( -name .airflow-brev -o -name '.airflow-brev-*' \) -prune \
  -o -type f -printf "$__L_SF//%P\0")
if [ -n "$__l_cw" ]; then
  exec 3>&-
  if [ "$__l_cok" = 1 ]; then mv -f -- "$__l_cw" "$__L_C" || rm -f -- "$__l_cw"; else rm -f -- "$__l_cw"; fi
fi
__brev_mark BREV_XFER_LISTED "$__l_n" "$__l_bad"
exit 0
