#!/usr/bin/env bash
# The GPU checks of issue 39 in one run, for a lent card (docs/decisions.md#engines):
#
#   scripts/gpu_check.sh OUT        # figures and log into OUT; about 8 minutes at most
#
# Phases, in order of what matters most, each under `timeout` and all under one deadline
# (DEADLINE seconds, default 470), so a phase that runs long costs the later ones, never the log:
#   1. the card and the software;
#   2. the CUDA-only tests (graphed vs eager in deterministic fp32, no host syncs in a step, planning);
#   3. `bench perf --device cuda` (eager, graphed and bare loops; kernels and syncs per step) -> OUT/perf.json;
#   4. the default run (`python3 -m bench run`) with --engine eager, then --engine graphed, wall time
#      of each, and the two tables compared cell by cell (scripts/cells.py) and by `bench compare`; then eager
#      again, the same comparison measuring how far eager reproduces itself on the card;
#   5. the paper recipe's cells still to run (issue 78; docs/paper/README.md), eager, concurrent cells (`--backend auto`):
#      docs/paper/mnist-5k's kept cells are copied in first, so only the missing ones train, and each cell this call
#      finishes comes back without its checkpoints in OUT/paper; `scripts/keep_cells.sh OUT/paper docs/paper/mnist-5k`
#      then keeps them. A cell the deadline cuts goes on from its checkpoint in a later call while the machine is warm.
#   6. with MNIST_ROOT set (a folder holding mnist/ with the four IDX files, scripts/mnist_idx.py writes them; the device
#      tool's `carry` brings an ignored folder along), the full MNIST's declared rows (lf-net, lf-net-no-tv-sl and the
#      Oracle at seed 0), returned in OUT/paper-mnist.
# A second call runs only the paper cells, with the time the first call's checks took:
#   SKIP="cuda-tests perf default-eager default-graphed default-cells default-eager-again default-eager-cells default-compare" \
#       DEADLINE=540 scripts/gpu_check.sh OUT
# Needs the project and its dependencies importable (pip install -e ., or PYTHONPATH=.).
# Everything goes to OUT/gpu_check.log; one line per phase (rc, seconds) to OUT/summary.txt.
# RUN_ARGS is appended to every `bench run`, PERF_ARGS to `bench perf` (a CPU smoke test of this script:
# DEVICE=cpu RUN_ARGS="--max-steps 20 --train-size 200 --test-size 20 --seeds 0" PERF_ARGS=--quick GRAPHED=eager).
set -u
OUT=${1:?usage: scripts/gpu_check.sh OUT}
DEVICE=${DEVICE:-cuda}
DEADLINE=${DEADLINE:-470}
RUN_ARGS=${RUN_ARGS:-}
PERF_ARGS=${PERF_ARGS:-}
GRAPHED=${GRAPHED:-graphed}  # the second engine; eager in a CPU smoke test
WORK=${WORK:-/tmp/gpu_check}
SKIP=${SKIP:-}  # phases not to run, by name (e.g. SKIP="default-eager-again default-eager-cells")
mkdir -p "$OUT" "$WORK"
LOG=$OUT/gpu_check.log
START=$(date +%s)
export PYTHONUNBUFFERED=1

phase() {  # phase NAME CAP_SECONDS COMMAND...: run COMMAND under min(CAP, time to the deadline)
    local name=$1 cap=$2 left t0 rc
    shift 2
    if [[ " $SKIP " == *" $name "* ]]; then
        echo "$name: skipped (SKIP)" | tee -a "$LOG" "$OUT/summary.txt"
        return
    fi
    left=$((DEADLINE - ($(date +%s) - START)))
    ((left < cap)) && cap=$left
    if ((cap < 15)); then
        echo "$name: skipped, $left s to the deadline" | tee -a "$LOG" "$OUT/summary.txt"
        return
    fi
    echo "=== $name (limit $cap s): $*" >>"$LOG"
    t0=$(date +%s)
    timeout "$cap" "$@" >>"$LOG" 2>&1
    rc=$?
    echo "$name: rc $rc, $(($(date +%s) - t0)) s" | tee -a "$LOG" "$OUT/summary.txt"
}

RUN="python3 -m bench run --device $DEVICE --no-progress $RUN_ARGS --results $WORK"  # + /FOLDER and the run's options

phase card 30 sh -c 'nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc;
    python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name())"'
phase decode 60 python3 -m bench check mnist-5k  # the decoded-data cache, so that neither engine's run pays for it
phase cuda-tests 120 python3 -m pytest -p no:cacheprovider -n 4 -q -rfEsP tests/test_engines.py tests/test_step_inputs.py tests/test_gpu_planning.py
phase perf 120 python3 -m bench perf --device "$DEVICE" --out "$OUT/perf.json" $PERF_ARGS
phase default-eager 100 $RUN/default-eager --engine eager
phase default-graphed 100 $RUN/default-graphed --engine $GRAPHED
phase default-cells 30 python3 scripts/cells.py "$WORK/default-eager" "$WORK/default-graphed"
phase default-eager-again 100 $RUN/default-eager-again --engine eager  # eager's own run-to-run spread on this card
phase default-eager-cells 30 python3 scripts/cells.py "$WORK/default-eager" "$WORK/default-eager-again"
phase default-compare 40 python3 -m bench compare "$WORK/default-eager" "$WORK/default-graphed" --out "$WORK/compare-default"
cp "$WORK/compare-default/compare.md" "$OUT/compare_default.md" 2>/dev/null
keep_new() {  # keep_new NAME: each cell of $WORK/NAME finished by this call, without its checkpoints, into $OUT/NAME
    scripts/keep_cells.sh "$WORK/$1" "$OUT/$1" "$WORK/$1.start" 2>&1 | sed "s/^/$1: /" | tee -a "$LOG" "$OUT/summary.txt"
}

# The declared rows still short of 3 seeds (Table I's baselines, then Table IV's; PAPER_ARGS replaces them in a smoke test)
PAPER_ARGS=${PAPER_ARGS:-"--methods mv-unet,cm-unet,mh-unet,mean-unet,ls-unet,mr-net,lf-net-s,lf-net-s-tv,lf-net-s-sls,lf-net-s-rcls,lf-net-s-tv-sls,lf-net-no-ce --seeds 0,1,2"}
mkdir -p "$WORK/paper" && cp -rn docs/paper/mnist-5k/runs "$WORK/paper"/ && touch "$WORK/paper.start"
phase paper 600 $RUN/paper --engine eager --budget paper $PAPER_ARGS
keep_new paper
if [[ -n ${MNIST_ROOT:-} ]]; then  # the full MNIST's declared rows
    mkdir -p "$WORK/paper-mnist" && touch "$WORK/paper-mnist.start"
    phase paper-mnist 600 $RUN/paper-mnist --engine eager --budget paper --dataset mnist --data-root "$MNIST_ROOT" \
        --methods lf-net,lf-net-no-tv-sl,oracle --seeds 0
    keep_new paper-mnist
fi
echo "total: $(($(date +%s) - START)) s" | tee -a "$LOG" "$OUT/summary.txt"
