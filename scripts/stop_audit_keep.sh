#!/usr/bin/env bash
# Keep a stop audit's evidence where it outlives the machine that trained it:
#
#   scripts/stop_audit_keep.sh RULE LONG DEST    # e.g. scripts/stop_audit_keep.sh audit/rule audit/long docs/audit/mnist-5k
#
# copies every cell of both folders (finished or still training) into DEST/rule and DEST/long with only the four
# files the audit reads (config, manifest, training log, per-case test metrics): about 0.3 MB a finished cell against
# 100 MB; and remakes the audit there, so that `python -m bench audit-stops DEST/rule DEST/long` gives the same tables
# from the copy. Run it again at any time: a long run's log as it stands is kept too, and a second copy replaces the
# first, cell by cell: a cell DEST holds that RULE or LONG lacks (one kept from an earlier machine, such as a long run
# that scripts/stop_audit_restore.sh left out because it had not finished) stays, until a run of it replaces it; the
# script's log (stop_audit_runs.txt) keeps the earlier copy's lines beside the new ones.
set -euo pipefail
RULE=${1:?usage: scripts/stop_audit_keep.sh RULE LONG DEST}
LONG=${2:?usage: scripts/stop_audit_keep.sh RULE LONG DEST}
DEST=${3:?usage: scripts/stop_audit_keep.sh RULE LONG DEST}
for src in "$RULE" "$LONG"; do  # both checked before either copy is replaced
    [[ -d $src/runs ]] || { echo "error: $src holds no runs/ folder; give the folders scripts/stop_audit.sh trained" >&2; exit 2; }
done
carried=0
for pair in "rule:$RULE" "long:$LONG"; do
    name=${pair%%:*} src=${pair#*:}
    rm -rf "$DEST/$name.new" && mkdir -p "$DEST/$name.new"
    # bench/store.py's CONFIG, MANIFEST, TRAIN_LOG and a cell's metrics.parquet
    (cd "$src" && find runs -type f \( -name config.json -o -name manifest.json -o -name train_log.csv -o -name metrics.parquet \) \
        -print0 | tar --null -T - -cf -) | tar -C "$DEST/$name.new" -xf -
    # the script's log: the earlier copy's lines and the new ones, in time order (each starts with its UTC time)
    logs=()
    for f in "$DEST/$name/stop_audit_runs.txt" "$src/stop_audit_runs.txt"; do [[ -f $f ]] && logs+=("$f"); done
    ((${#logs[@]})) && sort -u "${logs[@]}" >"$DEST/$name.new/stop_audit_runs.txt"
    if [[ -d $DEST/$name/runs ]]; then
        while IFS= read -r -d '' cell; do
            [[ -e $DEST/$name.new/$cell ]] && continue
            mkdir -p "$DEST/$name.new/$cell" && cp -p "$DEST/$name/$cell"/* "$DEST/$name.new/$cell"/ && carried=$((carried + 1))
        done < <(cd "$DEST/$name" && find runs -mindepth 5 -maxdepth 5 -type d -name 'seed-*' -printf '%p\0')
    fi
    rm -rf "$DEST/$name" && mv "$DEST/$name.new" "$DEST/$name"
done
python3 -m bench audit-stops "$DEST/rule" "$DEST/long" >/dev/null
# the collected tables (bench/store.py names them) are remade from the cells by any verb that reads the folder: a
# copy keeps only runs/, the script's log and the audit
find "$DEST"/rule "$DEST"/long -maxdepth 1 -type f ! -name stop_audit_runs.txt -delete
rm -f "$DEST"/rule/stop_audit/*.pdf
((carried)) && echo "carried over $carried cells of the earlier copy that $RULE and $LONG do not hold"
echo "kept: $DEST/rule, $DEST/long ($(du -sh "$DEST" | cut -f1)); the audit: $DEST/rule/stop_audit/stop_audit.md"
