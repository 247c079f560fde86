#!/usr/bin/env bash
# Start a stop audit again, on a machine that lost its folders, from what scripts/stop_audit_keep.sh kept:
#
#   scripts/stop_audit_restore.sh KEPT NEW    # e.g. scripts/stop_audit_restore.sh docs/audit/mnist-5k /work/audit5
#
# copies KEPT's finished cells (those with their test metrics) into NEW/rule and NEW/long, and KEPT/rule's
# stop_audit_runs.txt into NEW/rule, so that `scripts/stop_audit.sh NEW/rule NEW/long METHODS` skips the runs that
# finished and keeping NEW again keeps them all. A kept cell that had not finished is left out: its checkpoints were
# never kept, so its run starts again. A cell NEW already holds, and NEW's own log, are left as they are.
set -euo pipefail
KEPT=${1:?usage: scripts/stop_audit_restore.sh KEPT NEW}
NEW=${2:?usage: scripts/stop_audit_restore.sh KEPT NEW}
for n in rule long; do
    [[ -d $KEPT/$n/runs ]] || { echo "error: $KEPT/$n holds no runs/ folder; give the folder scripts/stop_audit_keep.sh wrote (e.g. docs/audit/mnist-5k)" >&2; exit 2; }
done
restored=0 left=0
for n in rule long; do
    while IFS= read -r -d '' cell; do
        if [[ ! -e $KEPT/$n/$cell/metrics.parquet ]]; then
            left=$((left + 1))  # still training when it was kept
        elif [[ ! -e $NEW/$n/$cell ]]; then
            mkdir -p "$NEW/$n/$cell" && cp -p "$KEPT/$n/$cell"/* "$NEW/$n/$cell"/ && restored=$((restored + 1))
        fi
    done < <(cd "$KEPT/$n" && find runs -mindepth 5 -maxdepth 5 -type d -name 'seed-*' -printf '%p\0')
done
if [[ -f $KEPT/rule/stop_audit_runs.txt && ! -f $NEW/rule/stop_audit_runs.txt ]]; then
    cp "$KEPT/rule/stop_audit_runs.txt" "$NEW/rule/"
fi
echo "restored $restored finished cells into $NEW/rule and $NEW/long; $left unfinished left out (they train again):"
echo "  scripts/stop_audit.sh $NEW/rule $NEW/long METHODS [SEEDS]"
