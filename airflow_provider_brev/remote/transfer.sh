# shellcheck shell=bash
# One S3 transfer round (core/staging/scripts.py builds its header and plan; core/staging/reports.py parses its
# markers). Presigned URLs come from the plan file only, reach curl on a pipe and are on no command line.
# Header: __X_D (the directory), __X_F (the plan), __X_BASE and __X_T (temp dirs), __X_PS (part suffix), __X_P
# (concurrency), __X_SF (signature format), __X_BATCH (1: one curl --parallel), __X_RETRIES, __X_CONNECT_TIMEOUT,
# __X_STALL (curl's --retry, --connect-timeout, --speed-time).
# shellcheck disable=SC2154,SC2153  # the header (core/protocol/remote_scripts.py) sets the __X_* inputs
exec 2>/dev/null  # curl messages may quote URLs: nothing reaches the brev CLI's stderr
set +m
__X_CURL=(curl --globoff --fail --silent --retry "$__X_RETRIES" --connect-timeout "$__X_CONNECT_TIMEOUT"
          --speed-limit 1024 --speed-time "$__X_STALL")
__x_fail() { __brev_mark BREV_XFER_FAIL "$1" "$2"; }
__x_size() { local s; s=$(wc -c < "$1") || return 1; printf '%s' "${s//[!0-9]/}"; }
__x_etag() {
  local line v=
  while IFS= read -r line; do
    line=${line%$'\r'}
    case ${line,,} in etag:*) v=${line#*:} ;; esac
  done < "$1"
  v=${v//\"/}; v=${v//[[:space:]]/}
  printf '%s' "$v"
}
__x_curl() {  # task-key, then extra curl args; prints the HTTP status; the URL travels on a pipe
  local k=$1; shift
  "${__X_CURL[@]}" -K <(printf 'url = "%s"\n' "${__X_U[$k]}") -w '%{http_code}' "$@"
}
__x_get() {
  local k=$1 dest="$__X_D/${__X_R[$1]}" part code rc size got
  part="$dest$__X_PS"
  if ! mkdir -p -- "${dest%/*}"; then __x_fail "$k" "mkdir cannot create the directory"; return; fi
  rm -f -- "$part"
  code=$(__x_curl "$k" -o "$part"); rc=$?
  if [ "$rc" -ne 0 ]; then rm -f -- "$part"; __x_fail "$k" "curl exit $rc (HTTP ${code:-000})"; return; fi
  [ -e "$part" ] || : > "$part"
  size=$(__x_size "$part")
  if [ "$size" != "${__X_FS[$k]}" ]; then
    rm -f -- "$part"; __x_fail "$k" "size got $size bytes, expected ${__X_FS[$k]}"; return
  fi
  got=$(md5sum < "$part"); got=${got%% *}
  if [ "${__X_M[$k]}" != - ] && [ "$got" != "${__X_M[$k]}" ]; then
    rm -f -- "$part"; __x_fail "$k" "md5 got $got, expected ${__X_M[$k]}"; return
  fi
  if ! mv -f -- "$part" "$dest"; then rm -f -- "$part"; __x_fail "$k" "move cannot move into place"; return; fi
  __brev_mark BREV_XFER_OK "$k" "$size" "$got" -
}
__x_changed() {  # key, file: true when the file is no longer what the listing saw (size, times, inode)
  local now
  [ "${__X_SIG[$1]}" != - ] || return 1
  now=$(find "$2" -maxdepth 0 -printf "$__X_SF") || return 0
  [ "$now" != "${__X_SIG[$1]}" ]
}
__x_upload() {  # key, file to send, Content-MD5 (base64 or -), bytes, md5 (or -), [listed file read by curl]
  local k=$1 src=$2 cmd5=$3 size=$4 md5=$5 h="$__X_T/h.$1" code rc etag
  local -a hdr=(-H 'Expect:')
  [ "$cmd5" != - ] && hdr+=(-H "Content-MD5: $cmd5")
  code=$(__x_curl "$k" -T "$src" "${hdr[@]}" -D "$h" -o /dev/null); rc=$?
  if [ -n "$6" ] && __x_changed "$k" "$6"; then __x_fail "$k" "changed while it was uploaded"; return; fi
  if [ "$rc" -ne 0 ]; then __x_fail "$k" "curl exit $rc (HTTP ${code:-000})"; return; fi
  etag=$(__x_etag "$h")
  if [ -z "$etag" ]; then __x_fail "$k" "etag missing in the response"; return; fi
  __brev_mark BREV_XFER_OK "$k" "$size" "$md5" "$etag"
}
__x_listed() {  # key, file: the file is readable and still what the listing saw (else reports why not)
  local size
  if ! size=$(__x_size "$2"); then __x_fail "$1" "read cannot read the file"; return 1; fi
  if [ "$size" != "${__X_FS[$1]}" ]; then
    __x_fail "$1" "changed size is now $size bytes, listed ${__X_FS[$1]}"; return 1
  fi
  if __x_changed "$1" "$2"; then __x_fail "$1" "changed rewritten since it was listed"; return 1; fi
}
__x_put() {
  local k=$1 src="$__X_D/${__X_R[$1]}"
  __x_listed "$k" "$src" || return
  __x_upload "$k" "$src" "${__X_M[$k]}" "${__X_FS[$k]}" - "$src"
}
__x_part() {
  local k=$1 src="$__X_D/${__X_R[$1]}" p="$__X_T/p.$1" size md5 b64
  __x_listed "$k" "$src" || return
  tail -c +$((__X_O[$k] + 1)) -- "$src" | head -c "${__X_L[$k]}" > "$p"
  size=$(__x_size "$p")
  if __x_changed "$k" "$src"; then rm -f -- "$p"; __x_fail "$k" "changed while the part was read"; return; fi
  if [ "$size" != "${__X_L[$k]}" ]; then
    rm -f -- "$p"; __x_fail "$k" "read got $size bytes of the part, expected ${__X_L[$k]}"; return
  fi
  md5=$(md5sum < "$p"); md5=${md5%% *}
  b64=-
  # shellcheck disable=SC2059  # the format is the md5 as \xHH escapes: printf turns them into its 16 bytes
  if [ "${__X_M[$k]}" = + ]; then b64=$(printf "$(printf '%s' "$md5" | sed 's/../\\x&/g')" | base64); fi
  __x_upload "$k" "$p" "$b64" "$size" "$md5"
  rm -f -- "$p"
}
__x_parallel_ok() {  # curl >= 7.75: --parallel and the %{urlnum} / %{exitcode} write-out variables
  local v maj min
  read -r _ v _ < <(curl --version) || return 1
  IFS=. read -r maj min _ <<< "$v"
  [[ $maj =~ ^[0-9]+$ && $min =~ ^[0-9]+$ ]] || return 1
  [ "$maj" -gt 7 ] || { [ "$maj" -eq 7 ] && [ "$min" -ge 75 ]; }
}
__x_cfg() {  # the curl config of a batch: one url/output pair per download (goes to curl on a pipe)
  local k p
  for k in "${__X_G[@]}"; do
    p=${__X_SP[$k]}; p=${p//\\/\\\\}; p=${p//\"/\\\"}
    printf 'url = "%s"\noutput = "%s"\n' "${__X_U[$k]}" "$p"
  done
}
__x_batch() {  # every download through one `curl --parallel`, then one find, one md5sum, one mv per directory
  local k n rc code p dest stage line size got
  local -A ok=() sizes=() sums=() moves=() md=()
  for k in "${__X_K[@]}"; do
    if [ -z "${__X_U[$k]}" ]; then __x_fail "$k" "nourl no URL for this task"; continue; fi
    dest="$__X_D/${__X_R[$k]}"; stage="${dest%/*}/$__X_PS"
    __X_G+=("$k"); __X_SP[$k]="$stage/${dest##*/}"; __X_SD[$stage]=1
  done
  [ "${#__X_G[@]}" -gt 0 ] || return 0
  while read -r n rc code; do
    [[ $n =~ ^[0-9]+$ ]] && [ -n "${__X_G[$n]}" ] || continue
    k=${__X_G[$n]}
    if [ "$rc" = 0 ]; then ok[$k]=1; else rm -f -- "${__X_SP[$k]}"; __x_fail "$k" "curl exit $rc (HTTP ${code:-000})"; fi
  done < <("${__X_CURL[@]}" --parallel --parallel-max "$((__X_P > 300 ? 300 : __X_P))" --create-dirs \
             -w '%{urlnum} %{exitcode} %{http_code}\n' -K <(__x_cfg))
  for k in "${!ok[@]}"; do  # curl creates no file for an empty body
    p=${__X_SP[$k]}; [ -e "$p" ] || { mkdir -p -- "${p%/*}"; : > "$p"; }
  done
  while IFS= read -r line; do sizes[${line#* }]=${line%% *}; done \
    < <(find "${!__X_SD[@]}" -maxdepth 1 -type f -printf '%s %p\n')
  while IFS= read -r line; do sums[${line#*  }]=${line%% *}; done < <(
    for k in "${!ok[@]}"; do p=${__X_SP[$k]}; [[ $p == *\\* ]] || printf '%s\0' "$p"; done | xargs -0 -r md5sum --)
  for k in "${__X_G[@]}"; do
    [ -n "${ok[$k]}" ] || continue
    p=${__X_SP[$k]}; size=${sizes[$p]:-0}; unset 'ok[$k]'
    if [ "$size" != "${__X_FS[$k]}" ]; then
      rm -f -- "$p"; __x_fail "$k" "size got $size bytes, expected ${__X_FS[$k]}"; continue
    fi
    got=${sums[$p]}
    if [ -z "$got" ]; then got=$(md5sum < "$p"); got=${got%% *}; fi
    if [ "${__X_M[$k]}" != - ] && [ "$got" != "${__X_M[$k]}" ]; then
      rm -f -- "$p"; __x_fail "$k" "md5 got $got, expected ${__X_M[$k]}"; continue
    fi
    ok[$k]=1; md[$k]=$got; moves[${p%/*}]+="$p"$'\n'
  done
  for stage in "${!moves[@]}"; do printf '%s' "${moves[$stage]}" | xargs -d '\n' -r mv -f -t "${stage%/*}" --; done
  for k in "${__X_G[@]}"; do
    [ -n "${ok[$k]}" ] || continue
    if [ -e "${__X_SP[$k]}" ]; then
      rm -f -- "${__X_SP[$k]}"; __x_fail "$k" "move cannot move into place"
    else
      __brev_mark BREV_XFER_OK "$k" "${__X_FS[$k]}" "${md[$k]}" -
    fi
  done
  rm -rf -- "${!__X_SD[@]}"
}
__x_task() {
  if [ -z "${__X_U[$1]}" ]; then __x_fail "$1" "nourl no URL for this task"; return; fi
  case ${__X_OP[$1]} in
    G) __x_get "$1" ;;
    S) __x_put "$1" ;;
    P) __x_part "$1" ;;
  esac
}
# shellcheck disable=SC2329  # run by the traps below
__x_clean() {
  rm -f -- "$__X_F"; rm -rf -- "$__X_T"
  if [ "${#__X_SD[@]}" -gt 0 ]; then rm -rf -- "${!__X_SD[@]}"; fi
  if [ "$__X_GET" = 1 ] && [ -d "$__X_D" ]; then find "$__X_D" -name "*$__X_PS" -prune -exec rm -rf -- {} +; fi
}
__X_GET=0; __X_G=()
declare -A __X_SP __X_SD
trap __x_clean EXIT
trap '__x_clean; exit 0' HUP INT TERM PIPE
if ! mkdir -p -- "$__X_BASE" || ! mkdir -m 700 -- "$__X_T"; then
  rm -f -- "$__X_F"; __brev_mark BREV_XFER_ERROR 'cannot create a private temp directory'; exit 0
fi
if [ ! -f "$__X_F" ]; then __brev_mark BREV_XFER_ERROR 'the plan file is missing'; exit 0; fi
chmod 600 -- "$__X_F"
declare -A __X_U __X_OP __X_FS __X_O __X_L __X_M __X_SIG __X_R
__X_K=(); __X_N=-1
while IFS=$'\t' read -r tag k op fs off len md sig rp; do
  case $tag in
    U) __X_U[$k]=$op ;;
    T) __X_K+=("$k"); __X_OP[$k]=$op; __X_FS[$k]=$fs; __X_O[$k]=$off; __X_L[$k]=$len; __X_M[$k]=$md
       __X_SIG[$k]=$sig; __X_R[$k]=$rp ;;
    N) __X_N=$k ;;
  esac
done < "$__X_F"
rm -f -- "$__X_F"
if [ "$__X_N" != "${#__X_K[@]}" ]; then __brev_mark BREV_XFER_ERROR 'the plan file is truncated'; exit 0; fi
if ! command -v curl >/dev/null; then __brev_mark BREV_XFER_ERROR 'curl is not installed on the instance'; exit 0; fi
if curl --help all 2>/dev/null | grep -q -e --retry-all-errors; then __X_CURL+=(--retry-all-errors); fi
if [ "${#__X_K[@]}" -gt 0 ] && [ "${__X_OP[${__X_K[0]}]}" = G ]; then __X_GET=1; mkdir -p -- "$__X_D"; fi
__x_n=0
if [ "$__X_GET" = 1 ] && [ "$__X_BATCH" = 1 ] && __x_parallel_ok; then __x_batch; __X_K=(); fi
for __x_k in "${__X_K[@]}"; do
  if [ "$__x_n" -ge "$__X_P" ]; then wait -n; __x_n=$((__x_n - 1)); fi
  __x_task "$__x_k" &
  __x_n=$((__x_n + 1))
done
wait
__brev_mark BREV_XFER_DONE "$__X_N"
exit 0
