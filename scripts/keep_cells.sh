#!/usr/bin/env bash
# Keep a results folder's finished cells where they outlive the machine that trains them:
#
#   scripts/keep_cells.sh RESULTS DEST    # e.g. scripts/keep_cells.sh /work/rerun/R docs/rerun/mnist-5k
#
# copies each finished cell of RESULTS (one with its test metrics) into DEST/runs with every file but its checkpoints
# (config, manifest, training log, per-case metrics, calibration bins and test probabilities): about 0.9 MB a cell
# (docs/rerun's first 22: 19 MB; a sampler's 1.3-1.6 MB) against 60-400 MB. DEST is then a results folder of finished
# cells: `bench report --results` reads a copy of it, and a run goes on from it on a fresh machine, skipping what it
# holds:
#
#   mkdir -p R && cp -rn DEST/runs R/ && python -m bench run ... --results R
#
#   scripts/keep_cells.sh RESULTS DEST SINCE    # only the cells that finished after the file SINCE was touched
#
# A cell DEST holds is replaced by RESULTS' copy; a cell RESULTS lacks or has not finished stays as DEST holds it. Each
# cell is written beside its old copy and moved in place, so a failed copy leaves the old one whole.
set -euo pipefail
RESULTS=${1:?usage: scripts/keep_cells.sh RESULTS DEST}
DEST=${2:?usage: scripts/keep_cells.sh RESULTS DEST}
SINCE=${3:-}
[[ -d $RESULTS/runs ]] || { echo "error: $RESULTS holds no runs/ folder; give the folder a bench run wrote (its --results)" >&2; exit 2; }
mkdir -p "$DEST"
kept=0 new=0 left=0
while IFS= read -r -d '' cell; do  # runs/<dataset>/<raters>/<noise>/<method>/seed-<s>
    if [[ ! -f $RESULTS/$cell/metrics.parquet ]]; then
        left=$((left + 1))  # still training (or failed): its checkpoints are what it needs, and they are not kept
        continue
    fi
    [[ -z $SINCE || $RESULTS/$cell/metrics.parquet -nt $SINCE ]] || continue  # finished before SINCE: not asked for
    [[ -d $DEST/$cell ]] || new=$((new + 1))
    rm -rf "$DEST/$cell.new" && mkdir -p "$DEST/$cell.new"
    find "$RESULTS/$cell" -maxdepth 1 -type f ! -name '*.lock' -exec cp -p {} "$DEST/$cell.new"/ \;
    rm -rf "$DEST/$cell" && mv "$DEST/$cell.new" "$DEST/$cell"
    kept=$((kept + 1))
done < <(cd "$RESULTS" && find runs -mindepth 5 -maxdepth 5 -type d -name 'seed-*' -printf '%p\0' | sort -z)
total=$(find "$DEST" -path '*/runs/*' -mindepth 6 -maxdepth 6 -type d -name 'seed-[0-9]*' ! -name '*.new' | wc -l)
echo "kept $kept finished cells ($new new) in $DEST ($(du -sh "$DEST" | cut -f1), $total cells); $left unfinished left out"
