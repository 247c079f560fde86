#!/usr/bin/env bash
# The stop audit's two runs and its table, per method (docs/decisions.md, "The stopping rule revised after its audit"):
#
#   scripts/stop_audit.sh RULE LONG METHODS [SEEDS]    # e.g. scripts/stop_audit.sh audit/rule audit/long mh-unet,cm-unet 0
#
# For each method and seed: the rule's run (`--budget plateau`) into RULE; then the long run (`--budget long`) into LONG at
# L = 4 x the latest stage stop of that rule run, rounded up to 20 steps, at least MIN_LONG (2,400) (L is set from the rule run's
# stop, never from a test metric); then `bench audit-stops RULE LONG`. Both runs resume from their checkpoints when the
# script is run again, so an audit longer than one sitting goes on where it stopped.
# RUN_ARGS is added to every `bench run` (e.g. "--device cuda --engine graphed", "--threads 2" for one cell at a time on two
# cores, or "--dataset lidc"; the long run's --max-steps is always L); JOBS methods run at once (default 1: one method's two
# runs after another; on a card, JOBS=8). One line a run goes to RULE/stop_audit_runs.txt, and each run's output to
# RULE/stop_audit_logs/.
# LONG_STEPS=L (e.g. 20000, 4 x the rule's 5,000-step cap) starts each long run at that fixed length beside its rule run
# instead of after it: on a card, where cells run side by side, a method's audit then takes its long run's time, not the
# sum of both. It is still at least 4 x any stop the rule can make; a stop above L / 4 is noted, and the audit shows it.
set -u
RULE=${1:?usage: scripts/stop_audit.sh RULE LONG METHODS [SEEDS]}
LONG=${2:?usage: scripts/stop_audit.sh RULE LONG METHODS [SEEDS]}
METHODS=${3:?usage: scripts/stop_audit.sh RULE LONG METHODS [SEEDS]}
SEEDS=${4:-0}
RUN_ARGS=${RUN_ARGS:-}
JOBS=${JOBS:-1}
MIN_LONG=${MIN_LONG:-2400}  # the declared floor; a smaller one only for a smoke test of this script
LONG_STEPS=${LONG_STEPS:-}
mkdir -p "$RULE/stop_audit_logs" "$LONG"
NOTE=$RULE/stop_audit_runs.txt

note() { echo "$(date -u +%FT%TZ) $*" | tee -a "$NOTE"; }

long_run() {  # long_run METHOD SEED STEPS
    python3 -m bench run --methods "$1" --seeds "$2" --budget long --no-progress $RUN_ARGS --max-steps "$3" \
        --results "$LONG" >"$RULE/stop_audit_logs/long_${1}_s$2.log" 2>&1
    note "$1 seed $2: long run rc $?"
}

audit_method() {  # audit_method METHOD SEED: the rule run, then the long run it sizes (or beside it: LONG_STEPS)
    local m=$1 s=$2 stop steps rc
    if [[ -n $LONG_STEPS ]]; then
        note "$m seed $s: long run $LONG_STEPS steps, beside the rule run"
        long_run "$m" "$s" "$LONG_STEPS" &
    fi
    python3 -m bench run --methods "$m" --seeds "$s" --budget plateau --no-progress $RUN_ARGS --results "$RULE" \
        >"$RULE/stop_audit_logs/rule_${m}_s$s.log" 2>&1
    rc=$?
    stop=$(python3 scripts/stop_audit_length.py "$RULE" "$m" "$s") || { note "$m seed $s: rule run rc $rc, no stop to size the long run"; wait; return 1; }
    if [[ -n $LONG_STEPS ]]; then
        note "$m seed $s: rule stopped at $stop" $( ((4 * stop > LONG_STEPS)) && echo "(above a quarter of the long run's $LONG_STEPS steps)")
        wait
        return
    fi
    steps=$(( (4 * stop + 19) / 20 * 20 ))
    ((steps < MIN_LONG)) && steps=$MIN_LONG
    note "$m seed $s: rule stopped at $stop -> long run $steps steps"
    long_run "$m" "$s" "$steps"
}

for s in ${SEEDS//,/ }; do
    for m in ${METHODS//,/ }; do
        while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
        audit_method "$m" "$s" &
    done
done
wait
python3 -m bench audit-stops "$RULE" "$LONG"
