#!/usr/bin/env bash
# The seed's recipe for one Brev lifecycle, step by step (skill text: "Brev" section of the seed), unmodified
# except that the released CLI (v0.6.327) has no --gpu flag, so `--gpu L40S:1` becomes `--gpu-name L40S`.
#
#   usage: seed_recipe.sh <instance-name> <work-command>
#   env:   BREV_API_TOKEN   token for the headless login the seed requires before any other brev call
#          SEED_POLL_SECONDS sleep between readiness probes (default 5, as in the seed)
#          SEED_STEP_LOG    optional file that receives "<step> <unix-time>" lines (diagnostics only)
#
# Faithful on purpose: the readiness probe is the seed's `brev exec <inst> -- true` (cobra drops `--`, so the
# CLI sees instance <inst> and command `true`), its output is discarded as in the seed, and no step is "fixed".
set -u
NAME="$1"
WORK="$2"
POLL="${SEED_POLL_SECONDS:-5}"
step() { [ -n "${SEED_STEP_LOG:-}" ] && echo "$1 $(date +%s.%N)" >> "$SEED_STEP_LOG"; return 0; }

# CI shells / agent sessions without a TTY: log in headlessly before any other brev call.
brev login --token "$BREV_API_TOKEN" >/dev/null 2>&1 || { echo "brev login failed"; exit 1; }

step create
brev create "$NAME" --gpu-name L40S || { echo "brev create failed"; exit 1; }
step created

# Wait up to 5 minutes for shell readiness — covers the SSH bring-up window.
for i in $(seq 1 60); do
  brev exec "$NAME" -- true >/dev/null 2>&1 && break
  sleep "$POLL"
done
brev exec "$NAME" -- true >/dev/null 2>&1 || {
  echo "instance $NAME never became exec-ready"; step delete; brev delete "$NAME"; exit 1;
}
step ready

brev exec "$NAME" "$WORK"
rc=$?
step work_done
brev delete "$NAME"
step deleted
exit $rc
