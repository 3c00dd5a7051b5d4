# shellcheck shell=bash
# What one TAO action left on the instance (core/tao/report.py builds the header and parses the markers).
# Header: __T_DIR (the action's results directory), __T_STARTED (the start marker's file name), __T_FILES (result
# file names, space-separated), __T_MAX (bytes read of each), __T_LOG (the job's log, or empty), __T_FAULTS (the
# extended regex of known fault signatures).
# shellcheck disable=SC2154,SC2153  # the header (core/protocol/remote_scripts.py) sets the __T_* inputs
__d=$__T_DIR
if [ -f "$__d/status.json" ]; then
  __brev_mark BREV_TAO_STATUS "$(tail -n 1 "$__d/status.json" | base64 -w 0)"
else
  __brev_mark BREV_TAO_STATUS -
fi
if [ -e "$__d/$__T_STARTED" ]; then __brev_mark BREV_TAO_STARTED "$(stat -c %Y "$__d/$__T_STARTED")"; fi
find "$__d" -maxdepth 2 -type f \( -name "model_epoch_*.pth" -o -name "*.onnx" -o -name "*.engine" \) \
  -printf "BREV_TAO_CKPT %T@ %s %P\n" 2>/dev/null
read -r -a __t_files <<< "$__T_FILES"
for __t_f in "${__t_files[@]}"; do
  if [ -f "$__d/$__t_f" ]; then __brev_mark BREV_TAO_FILE "$__t_f" "$(head -c "$__T_MAX" "$__d/$__t_f" | base64 -w 0)"; fi
done
if [ -n "$__T_LOG" ]; then
  tail -c 262144 "$__T_LOG" 2>/dev/null | grep -E -m 5 "$__T_FAULTS" \
    | while IFS= read -r __l; do __brev_mark BREV_TAO_FAULT "$(printf %s "$__l" | base64 -w 0)"; done
fi
__brev_mark BREV_TAO_END
exit 0
