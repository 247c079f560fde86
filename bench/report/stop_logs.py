"""The training logs a stop audit reads (bench/report/stop_audit.py): every cell's train_log.csv of its two results
folders, the rule's run and the long run, finished or still training, and what each run has done in a few words."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from bench import files, store

GROUP = ["dataset", "raters", "noise", "method"]
CELL = [*GROUP, "seed"]  # a cell of both folders
SPANS = (0, 0.1, 0.4, 1, 2, math.inf)  # the long run's stretches of steps, in multiples of the rule's stop: (0, 0.1×], …


def both_hold(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of a and of b whose cell (CELL) both frames hold: a seed trained under one budget only is left out of both."""
    common = a[CELL].drop_duplicates().merge(b[CELL].drop_duplicates())
    return a.merge(common, on=CELL), b.merge(common, on=CELL)


def run_logs(rule: Path, long: Path) -> dict[str, pd.DataFrame]:
    """{"rule": …, "long": …}: each folder's training logs of the cells both have finished (`paired`)."""
    return paired(both_logs(rule, long))


def both_logs(rule: Path, long: Path) -> dict[str, pd.DataFrame]:
    """{"rule": …, "long": …}: every cell's training log in each folder (`cell_logs`), finished or still training."""
    return {"rule": cell_logs(rule), "long": cell_logs(long)}


def paired(every: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The rows of both folders' `cell_logs` of the cells both have finished: what the stage table and the figure read."""
    a, b = both_hold(*(frame[frame["done"]] for frame in (every["rule"], every["long"])))
    return {"rule": a, "long": b}


def gt_evals(log: pd.DataFrame) -> pd.DataFrame:
    """A log's evaluation rows with `diagnostic_gt_dsc`, NaN where the dataset has no GT (it then logs no diagnostic)."""
    evals = log[log["event"] == "eval"]
    return evals if "diagnostic_gt_dsc" in evals else evals.assign(diagnostic_gt_dsc=math.nan)


def spans(logs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """What each stretch of a long run bought: per cell and stage of `paired` logs and each stretch (a, b] of SPANS × the
    step where the rule's run stopped that stage, the evaluations in it (`n`), the lowest validation loss (`val_loss`) at
    its `step`, and the mean validation DSC against GT logged there (`gt_dsc`; NaN where the dataset has none). A stretch
    without evaluations has no row."""
    rule = logs["rule"]
    stopped = rule[rule["event"] == "stop"].groupby([*CELL, "stage"])["step"].last()
    evals = gt_evals(logs["long"]).dropna(subset=["val_loss"])
    out = []
    for key, part in evals.groupby([*CELL, "stage"], sort=False):
        stop = stopped.get(key, math.nan)
        for a, b in zip(SPANS, SPANS[1:]):
            inside = part[(part["step"] > a * stop) & (part["step"] <= b * stop)]
            if len(inside):
                low = inside.loc[inside["val_loss"].idxmin()]
                out.append(
                    {
                        **dict(zip([*CELL, "stage"], key)),
                        "rule_stop": stop,
                        "span": span_label(a, b),
                        "n": len(inside),
                        "val_loss": low["val_loss"],
                        "step": low["step"],
                        "gt_dsc": inside["diagnostic_gt_dsc"].mean(),
                    }
                )
    return pd.DataFrame(out, columns=[*CELL, "stage", "rule_stop", "span", "n", "val_loss", "step", "gt_dsc"])


def spread(logs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """How far one checkpoint's DSC against GT sits from its neighbours' (shown, not judged): per GROUP of `paired` logs,
    over the long run's stage that logs the GT diagnostic (the one that decides the consensus) from the step the rule's
    run restored there to its end, the sd of the logged validation DSC's change from one evaluation to the next ÷ √2
    (one evaluation's spread, free of a slow trend), mean over the seeds that have one: NaN where the dataset logs no GT
    diagnostic or it is one constant (a stage that never moves the consensus, as D-Persona's heads logged before
    `Method.consensus_stage`). The audit compares one restored checkpoint of each run, so a DSC move within about twice
    this can be which checkpoint each run restored, not how long it trained."""
    evals, stopped = gt_evals(logs["long"]), logs["rule"][logs["rule"]["event"] == "stop"]
    restored = stopped.groupby([*CELL, "stage"])["restored_step"].last() if "restored_step" in stopped else pd.Series(dtype=float)
    out = []
    for key, part in evals.groupby(CELL, sort=False):
        logged = part[part["diagnostic_gt_dsc"].notna()]
        stage = logged["stage"].iloc[-1] if len(logged) else None
        start = restored.get((*key, stage), math.nan)
        start = 0 if pd.isna(start) else start
        dsc = logged[(logged["stage"] == stage) & (logged["step"] >= start)].sort_values("step")["diagnostic_gt_dsc"]
        varies = len(dsc) > 2 and dsc.nunique() > 1
        out.append({**dict(zip(CELL, key)), "spread": dsc.diff().std() / math.sqrt(2) if varies else math.nan})
    frame = pd.DataFrame(out, columns=[*CELL, "spread"])
    return frame.groupby(GROUP, sort=False)["spread"].mean().reset_index()


def span_label(a: float, b: float) -> str:
    """A stretch (a, b] of SPANS in words: "0.1–0.4×", "2×–end"."""
    return f"{a:g}–{b:g}×" if b < math.inf else f"{a:g}×–end"


def cell_logs(results: Path) -> pd.DataFrame:
    """Every cell folder's train_log.csv, finished or not, with CELL keys, `done` (the cell finished), `planned` (its
    config's steps for the row's stage) and `setup` (how it trains): a run still training has logged what it has done so
    far. A cell that logged nothing yet is one row with no stage; one whose log, config or manifest cannot be read now is
    one row saying why (`unreadable`)."""
    finished = {folder for folder, _, _ in store.finished(results, strict=False)}
    frames = []
    for folder in store.cell_folders(results):
        try:
            log = store.read_cell_file(folder, store.TRAIN_LOG) if (folder / store.TRAIN_LOG).is_file() else pd.DataFrame()
            schedules = store.read_config(folder).get("schedules") or {}
            how = setup(store.read_manifest(folder))
        except files.UnreadableFile as e:
            log, schedules, how = pd.DataFrame({"unreadable": [f"{e.path.name}: {e.problem}"]}), {}, "?"
        log = (log if len(log) else pd.DataFrame({"stage": [math.nan]})).assign(
            **store.cell_at(folder).record(), done=folder in finished, setup=how
        )
        log["stage"] = log.get("stage", math.nan)  # an unreadable cell's row has none
        log["planned"] = [(schedules.get(stage) or {}).get("max_steps", math.nan) for stage in log["stage"]]
        frames.append(log)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*CELL, "stage", "done", "planned"])


# The stop audit's files and rules (bench/report/stop_audit.py judges, stop_audit_text.py writes)
CSV, MARKDOWN, FIGURE = "stop_audit.csv", "stop_audit.md", "validation_curves"
# metric: (reference, floor of the tolerance in the metric's units, scale shown)
CHECKED = {"dsc": (None, 0.01, 100), "ged": ("raters", 0.01, 1), "dice_match": ("raters", 0.01, 100)}
LONG_FACTOR = 4  # the long run should be at least this many times as long as the rule's stop
TWIN_TOLERANCE = 1e-4  # the largest relative difference of two twin runs' validation losses (0 on a deterministic device)
CLOSE = (0.5, 2.0)  # a one-seed move within these multiples of its tolerance is close: its verdict wants a second seed

PRECISIONS = {"float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}  # a manifest's autocast dtype


def setup(manifest: dict) -> str:
    """How a cell trains, from its manifest, in a few words: device (on the CPU its strongest vector extension, which
    decides bf16's kernels), precision, threads on the CPU, and the engine where it is not eager ("cpu amx_bf16, bf16, 2
    threads"); a run resumed otherwise says each part's, joined by "then" (its `starts`); "?" before the manifest says.
    Two runs trained otherwise are two trajectories, each with its own stop."""
    said = [part_setup(start) for start in manifest.get("starts") or [manifest]]
    return " then ".join(dict.fromkeys(said))


def part_setup(start: dict) -> str:
    """`setup` of one start of a cell (a manifest, or one of its `starts`)."""
    if not start.get("device"):
        return "?"
    device, threads = start["device"], start.get("threads")
    isa = (start.get("cpu") or "?").split()  # "x86_64 amx_bf16 avx512_bf16 avx512f avx2": the strongest first
    parts = [f"cpu {isa[1] if len(isa) > 1 else isa[0]}" if device == "cpu" else device]
    parts.append(PRECISIONS.get(start.get("precision"), str(start.get("precision"))))
    if device == "cpu":
        parts.append(f"{threads} thread{'' if threads == 1 else 's'}")
    if start.get("engine", "eager") != "eager":
        parts.append(start["engine"])
    return ", ".join(parts)


def run_state(log: pd.DataFrame) -> str:
    """One cell's run in a few words: each finished stage's stop, restored step and loss; the stage it is training and
    the step it reached, of the steps its config plans; "not started" where it has no folder or logged nothing."""
    if "unreadable" in log and log["unreadable"].notna().any():
        return f"cannot be read now ({log['unreadable'].dropna().iloc[0]})"
    if log.empty or log["stage"].isna().all():
        return "not started"
    parts = []
    for stage, part in log.dropna(subset=["stage"]).groupby("stage", sort=False):
        stop = part[part["event"] == "stop"]
        if len(stop):
            r = stop.iloc[-1]
            how = store.stop_kind({"stop": r.get("stop", ""), "reason": r.get("reason", "")})
            parts.append(f"{stage}: {r['step']:.0f} ({how}), restored {r['restored_step']:.0f}, {r['best_val_loss']:.4g}")
        else:
            evals = part[part["event"] == "eval"].dropna(subset=["val_loss"])
            low = evals.loc[evals["val_loss"].idxmin()] if len(evals) else None
            lowest = f", lowest so far {low['val_loss']:.4g} at {low['step']:.0f}" if low is not None else ""
            parts.append(f"{stage}: at step {part['step'].max():.0f} of {part['planned'].iloc[-1]:.0f}{lowest}")
    return "; ".join(parts)
