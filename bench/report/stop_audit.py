"""The stop audit (docs/decisions.md#the-stopping-rule-judged-by-an-audit-declared-before-it-was-measured-2026-11-27):
does training longer change what a method's stopped run scores?

Two results folders of the same cells: one trained under the stopping rule (`--budget plateau`), one under `--budget
long` (every stage a fixed length, the lowest validation loss restored, as the rule does). Per method, stage by stage:
where each stopped and the validation loss it restored; then the test metrics of each (DSC against the dataset's
reference, GED, Dice_match), their difference and the tolerance, and beside DSC how far one checkpoint's sits from its
neighbours' (`spread`, shown, not judged). A method **passes** when no metric moves by more than the larger of its
seed-to-seed sd (the rule's folder) and the floor (1 DSC point, 0.01 GED, 1 Dice_match point).
The audit also replays the rule on each long run's own validation curves (`replays`): up to its stop a rule run is its
long twin (same seed, same batches), so the replay says where the rule stops and what it restores without training,
exactly for a first stage and for every later stage whose earlier stages restored what the long run restored.
`python -m bench audit-stops RULE LONG` writes `<RULE>/stop_audit/` (stop_audit.md, .csv, and validation_curves.png/.pdf: each
method's validation curves under both, where the rule stopped and what each restored); the report flags, in every table
of a folder trained under a stopping rule, each method its audit does not pass ("fails" or "not audited", `failures`).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from bench import files, store
from bench.evaluate.long_table import pooled_areas, summarise
from bench.report.plots import fill, save
from bench.report.rows import display
from bench.report.stop_audit_text import to_markdown
from bench.report.stop_logs import (
    CELL,
    CHECKED,
    CLOSE,
    CSV,
    FIGURE,
    GROUP,
    LONG_FACTOR,
    MARKDOWN,
    TWIN_TOLERANCE,
    both_hold,
    both_logs,
    paired,
    run_state,
    spans,
    spread,
)
from bench.results_folder import ResultsFolder
from bench.study import Study
from bench.train.stopping import replay_stage


def stops(logs: pd.DataFrame) -> pd.DataFrame:
    """Per GROUP × stage of one folder's training logs: mean over seeds of where the stage stopped, the step it restored
    and that validation loss, and how it stopped ("plateau", "cap", "fixed"; joined when seeds differ)."""
    rows = logs[logs["event"] == "stop"].copy()
    if rows.empty:
        return pd.DataFrame(columns=[*GROUP, "stage", "step", "restored_step", "val_loss", "how", "seeds"])
    rows["how"] = [store.stop_kind(r) for r in rows.filter(["stop", "reason"]).fillna("").to_dict("records")]
    agg = rows.groupby([*GROUP, "stage"], sort=False).agg(
        step=("step", "mean"),
        restored_step=("restored_step", "mean"),
        val_loss=("best_val_loss", "mean"),
        how=("how", lambda v: "/".join(sorted(set(v.dropna())))),
        seeds=("seed", "nunique"),
    )
    return agg.reset_index()


def replays(long_logs: pd.DataFrame, rule: dict) -> pd.DataFrame:
    """Per cell and stage of the long runs: the rule replayed on its validation curve (`replay_stage`), beside the step
    the long run restored (`long_restored`)."""
    out = []
    for key, part in long_logs.groupby([*CELL, "stage"], sort=False):
        evals = part[part["event"] == "eval"].sort_values("step")
        stop = part[part["event"] == "stop"]
        replay = replay_stage(evals["step"].tolist(), evals["val_loss"].tolist(), rule)
        long_restored = stop["restored_step"].iloc[-1] if len(stop) else math.nan
        out.append({**dict(zip([*CELL, "stage"], key)), **replay, "long_restored": long_restored})
    return pd.DataFrame(out, columns=[*CELL, "stage", "step", "restored_step", "val_loss", "how", "long_restored"])


def twins(logs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per GROUP × stage: the evaluations both runs logged (`shared`, the fewest over seeds) and the largest relative
    difference of their validation losses there (`twin_diff`, over seeds). Up to the rule's stop a first stage's two runs
    are one run only when they were trained by the same code on the same device and precision; then the difference is 0
    on a deterministic device and the replay is exact. A larger one (above TWIN_TOLERANCE) says they were not (code
    changed between them, another device, non-deterministic kernels): the audit still compares their test metrics, but
    no longer claims both hold the same weights. A later stage starts from its first stage's restored weights, which
    differ between the runs wherever the rule restored an earlier step, so its difference is shown, never judged."""
    keys = [*CELL, "stage", "step"]
    a, b = (logs[run].loc[logs[run]["event"] == "eval", [*keys, "val_loss"]] for run in ("rule", "long"))
    both = a.merge(b, on=keys, suffixes=("_rule", "_long"))
    scale = both[["val_loss_rule", "val_loss_long"]].abs().max(axis=1).clip(lower=1e-12)
    both["twin_diff"] = (both["val_loss_rule"] - both["val_loss_long"]).abs() / scale
    per_seed = both.groupby([*CELL, "stage"], sort=False).agg(shared=("step", "size"), twin_diff=("twin_diff", "max"))
    out = per_seed.reset_index().groupby([*GROUP, "stage"], sort=False).agg(shared=("shared", "min"), twin_diff=("twin_diff", "max"))
    return out.reset_index()


def pending(rule: Path, long: Path) -> pd.DataFrame:
    """The audit's "not yet audited" table of two folders (`unpaired`), each read once."""
    return unpaired(both_logs(rule, long), store.read_collected(rule, store.METRICS))


def unpaired(logs: dict[str, pd.DataFrame], rule_metrics: pd.DataFrame) -> pd.DataFrame:
    """Per cell either folder holds that is not a finished pair: what each run has done (`run_state`), whether their
    first stages are twins so far (`twins` over the evaluations both logged) and, where the rule's run finished, its
    checked test metrics (`checked_metrics`) and `areas`, for the audit's "not yet audited" table. logs: both folders'
    `cell_logs`; rule_metrics: the rule folder's collected metric rows."""
    done = pd.concat({run: frame.groupby(CELL, sort=False)["done"].first() for run, frame in logs.items()}, axis=1)
    waiting = done.index[~done.fillna(False).astype(bool).all(axis=1)]
    out = []
    for key in waiting:
        cell = dict(zip(CELL, key))
        mine = {run: frame.merge(pd.DataFrame([cell]), on=CELL) for run, frame in logs.items()}
        logged = all("val_loss" in frame and (frame["event"] == "eval").any() for frame in mine.values())
        shared = twins(mine) if logged else pd.DataFrame()
        first = shared.iloc[0] if len(shared) else None  # none where the two runs have no evaluated step in common yet
        how = trained(mine)
        row = {
            **cell,
            "rule_run": run_state(mine["rule"]),
            "long_run": run_state(mine["long"]),
            "trained": how["trained"].iloc[0] if len(how) else "?",
            "shared": 0 if first is None else int(first["shared"]),
            "twin_diff": math.nan if first is None else first["twin_diff"],
        }
        metrics = rule_metrics.merge(pd.DataFrame([cell]), on=CELL) if len(rule_metrics) else rule_metrics
        if len(metrics):
            row.update({r.metric: r.mean for r in checked_metrics(summarise(metrics)).itertuples()})
            row.update(areas(metrics).iloc[0][["precision", "recall", "area"]].to_dict())
        out.append(row)
    return pd.DataFrame(out)


def trained(logs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per GROUP of both runs' logs: how they trained (`setup`, over seeds), one text where both runs agree, else each
    run's in bold: runs trained otherwise are two trajectories, not one run up to the rule's stop."""
    said = {
        run: frame.groupby(GROUP, sort=False)["setup"].agg(lambda v: " / ".join(dict.fromkeys(v)))
        for run, frame in logs.items()
        if len(frame)
    }
    if len(said) < 2:
        return pd.DataFrame(columns=[*GROUP, "trained"])
    both = pd.concat(said, axis=1).fillna("not started")
    text = [r if r == lg else f"**rule: {r}; long: {lg}**" for r, lg in zip(both["rule"], both["long"])]
    return both.assign(trained=text)["trained"].rename_axis(GROUP).reset_index()


def areas(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per GROUP: precision, recall and predicted ÷ reference area of the consensus, pooled over cases and seeds
    (`pooled_areas`), on the rows `checked_metrics` reads DSC from (against gt where the dataset has it, else the
    majority; the first structure): what a move in DSC is made of. Shown beside the verdict, never judged."""
    rows = [
        part[
            (part["reference"] == ("gt" if "gt" in set(part["reference"]) else "majority"))
            & (part["structure"] == part["structure"].iloc[0])
        ]
        for _, part in metrics[metrics["metric"] == "dsc"].groupby(GROUP, sort=False)
    ]
    if not rows:
        return pd.DataFrame(columns=[*GROUP, "precision", "recall", "area"])
    return pooled_areas(pd.concat(rows), GROUP).reset_index()


HEADS = ("dice_personal", "dice_between", "dice_between_raters")  # per-rater outputs: each against its rater; their spread; the raters'


def heads(summary: pd.DataFrame) -> pd.DataFrame:
    """Per GROUP of a summary: the means of HEADS (against the raters, first structure), NaN where a method has no
    per-rater outputs: what training longer does to the heads (Dice_personal, and their spread beside the raters' own).
    Shown beside the verdict, never judged."""
    rows = summary[summary["metric"].isin(HEADS) & (summary["reference"] == "raters")]
    if rows.empty:
        return pd.DataFrame(columns=[*GROUP, *HEADS])
    rows = rows[rows["structure"] == rows.groupby(GROUP)["structure"].transform("first")]
    wide = rows.pivot_table(index=GROUP, columns="metric", values="mean", dropna=False).reindex(columns=list(HEADS))
    return wide.reset_index().rename_axis(columns=None)


def recorded_rule(results: Path) -> dict:
    """The stopping rule a results folder's cells trained under: the first early-stopping stage schedule its first
    finished cell's config records (with `--max-steps` applied), named by its budget."""
    for r in ResultsFolder.of(results).records:
        config = r.config
        for schedule in (config.get("schedules") or {}).values():
            if schedule.get("early_stopping"):
                return {**schedule, "name": (config.get("budget") or {}).get("name", "?")}
    raise ValueError(f"no cell of {results} trained under a stopping rule; give a folder of `--budget plateau` (or quick)")


def rule_name(rule: dict) -> str:
    """A budget record's stopping rule in a few words (a folder may record a rule under a name that now means another)."""
    grows = f", patience ≥ {rule.get('patience_ratio', 0):g} × the evaluations to the last one" if rule.get("patience_ratio") else ""
    return (
        f"{rule['name']}: mean of {rule['smooth']} evaluations, an improvement a fall of more than {rule['min_delta']:g} × the "
        f"level, patience {rule['patience']}{grows}, at least {rule['min_evals']} evaluations, cap {rule['max_steps']}"
    )


def curves(paper: Study, logs: dict[str, pd.DataFrame], methods: list[str]) -> Figure:
    """One panel per method: the validation loss of each stage against its step, the long run solid and the rule's
    dashed (mean over seeds, log scale where positive); a grey line where the rule stopped each stage and a dot at the
    step each run restored. Up to the rule's stop a single-stage method's two curves are one (same seed, same batches),
    so the figure shows what the steps after the stop bought. logs: `run_logs`."""
    cols = min(4, len(methods))
    rows = -(-len(methods) // cols)
    fig = Figure(figsize=(3.2 * cols, 2.6 * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, method in zip(axes.flat, methods):
        ax.set_title(display(paper, method), fontsize=9)
        lowest = math.inf
        for i, (stage, _) in enumerate(logs["long"][logs["long"]["method"] == method].groupby("stage", sort=False)):
            colour = f"C{i}"
            for run, style in (("long", "-"), ("rule", "--")):
                part = logs[run][(logs[run]["method"] == method) & (logs[run]["stage"] == stage)]
                evals = part[part["event"] == "eval"].groupby("step")["val_loss"].mean()
                ax.plot(evals.index, evals.values, style, color=colour, linewidth=1, label=f"{stage}, {run}")
                lowest = min(lowest, evals.min()) if len(evals) else lowest
                for stop in part[part["event"] == "stop"].itertuples():
                    if run == "rule":
                        ax.axvline(stop.step, color="0.5", linestyle=":", linewidth=1)
                    if stop.restored_step in evals.index:
                        ax.plot([stop.restored_step], [evals[stop.restored_step]], "o", color=colour, markersize=4)
        if 0 < lowest < math.inf:
            ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
        ax.set_xlabel("step (per stage)")
        ax.set_ylabel("validation loss")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, frameon=False)
    for ax in list(axes.flat)[len(methods) :]:
        ax.set_visible(False)
    fig.suptitle(
        fill(
            "Stop audit: the long run (solid) and the rule's run (dashed); grey: where the rule stopped; dots: the restored steps",
            3.2 * cols,
        ),
        fontsize=9,
    )
    return fig


def checked_metrics(summary: pd.DataFrame) -> pd.DataFrame:
    """The checked metrics of a summary: per GROUP × metric, mean and seed sd (DSC against gt where the dataset has
    it, else the majority; the first structure)."""
    out = []
    for (dataset, raters, noise, method), part in summary.groupby(GROUP, sort=False):
        structure = part["structure"].iloc[0]
        for metric, (reference, _, _) in CHECKED.items():
            refs = [reference] if reference else [r for r in ("gt", "majority") if r in set(part["reference"])][:1]
            row = part[(part["metric"] == metric) & part["reference"].isin(refs) & (part["structure"] == structure)]
            if len(row):
                r = row.iloc[0]
                out.append(
                    {
                        "dataset": dataset,
                        "raters": raters,
                        "noise": noise,
                        "method": method,
                        "metric": metric,
                        "mean": r["mean"],
                        "sd": r["std"],
                        "n_seeds": r["n_seeds"],
                    }
                )
    return pd.DataFrame(out, columns=[*GROUP, "metric", "mean", "sd", "n_seeds"])


def audit(
    rows: tuple[pd.DataFrame, pd.DataFrame], logs: dict[str, pd.DataFrame], replay_rule: dict
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(metrics, stages, evidence): per method and checked metric the rule's and the long run's means, difference,
    tolerance, whether it is within and, for DSC, the checkpoints' `spread` (not judged); per method and stage, where
    each run stopped, and where `replay_rule` stops on the long run's curves (`replay_step`, `replay_restored`;
    `replay_same`: in every seed it restores what the long run restored); per method both runs' `areas` and `heads`
    (suffixes _rule, _long). Only the cells (method, seed) both folders hold, so both means and the rule's sd are over
    the same seeds. No "average" row: it is the raters', not a method's.
    rows: both folders' metric rows of the cells both hold (`both_hold`); logs: `paired`."""
    sa, sb = (summarise(frame) for frame in rows)
    evidence = areas(rows[0]).merge(areas(rows[1]), on=GROUP, suffixes=("_rule", "_long"))
    evidence = evidence.merge(heads(sa).merge(heads(sb), on=GROUP, suffixes=("_rule", "_long")), on=GROUP, how="left")
    a, b = checked_metrics(sa), checked_metrics(sb)
    metrics = a.merge(b, on=[*GROUP, "metric"], suffixes=("_rule", "_long"))
    floors = metrics["metric"].map(lambda m: CHECKED[m][1])
    metrics["diff"] = metrics["mean_long"] - metrics["mean_rule"]
    metrics["tolerance"] = [max(f, 0 if math.isnan(sd) else sd) for f, sd in zip(floors, metrics["sd_rule"])]
    metrics["within"] = metrics["diff"].abs() <= metrics["tolerance"]
    metrics = metrics.merge(spread(logs), on=GROUP, how="left")
    metrics["spread"] = (metrics["spread"] / 100).where(metrics["metric"] == "dsc")  # DSC's own units; the other metrics have none
    st = stops(logs["rule"]).merge(stops(logs["long"]), on=[*GROUP, "stage"], suffixes=("_rule", "_long"))
    st["factor"] = st["step_long"] / st["step_rule"]
    rp = replays(logs["long"], replay_rule)
    rp["same"] = (rp["restored_step"] == rp["long_restored"]) & (rp["how"] != "beyond")  # a rule still going holds other weights
    rp = rp.groupby([*GROUP, "stage"], sort=False).agg(
        replay_step=("step", "mean"),
        replay_restored=("restored_step", "mean"),
        replay_how=("how", lambda v: "/".join(sorted(set(v)))),
        replay_same=("same", "all"),
    )
    return metrics, mark_twins(st.merge(rp.reset_index(), on=[*GROUP, "stage"], how="left"), twins(logs)), evidence


def mark_twins(st: pd.DataFrame, tw: pd.DataFrame) -> pd.DataFrame:
    """The stage table `st` (stages in training order per GROUP) with `twins`' columns and `twin`: the first stage's runs
    are twins. `replay_same` (the replay restores the long run's weights) then needs the first stage to be twins and
    every earlier stage to be the same as well: runs that are not one run up to the stop, or a stage that starts from
    other weights, do not hold the same weights whatever steps they restore."""
    st = st.merge(tw, on=[*GROUP, "stage"], how="left")
    st["shared"] = st["shared"].fillna(0)
    first = st.groupby(GROUP, sort=False)["stage"].transform("first") == st["stage"]
    st["twin"] = first & (st["shared"] > 0) & (st["twin_diff"] <= TWIN_TOLERANCE)
    same = st["replay_same"].fillna(False).astype(bool) & st.groupby(GROUP, sort=False)["twin"].transform("first")
    st["replay_same"] = same.astype(int).groupby([st[k] for k in GROUP], sort=False).cummin().astype(bool)  # and every earlier stage
    return st


def verdicts(metrics: pd.DataFrame, st: pd.DataFrame) -> pd.DataFrame:
    """Per GROUP: "passes" or "fails" (a metric moved beyond its tolerance), the metrics whose move is `close` to it on
    one seed (more than CLOSE[0] and at most CLOSE[1] times the tolerance: the verdict wants a second seed), those that
    moved `clear`ly (beyond it and not close: a fail no second seed is due for), whether the
    long run was at least LONG_FACTOR times the rule's stop in every stage, whether the two runs' first stages are twins
    (`twins`) and whether the replayed rule restores the long run's weights."""
    out = []
    for key, part in metrics.groupby(GROUP, sort=False):
        stages = st[(st[GROUP] == pd.Series(dict(zip(GROUP, key)))).all(axis=1)]
        moved = part.loc[~part["within"], "metric"].tolist()
        ratio = part["diff"].abs() / part["tolerance"]
        close = part.loc[(part["n_seeds_rule"] < 2) & (ratio > CLOSE[0]) & (ratio <= CLOSE[1]), "metric"].tolist()
        clear = [m for m in moved if m not in close]
        out.append(
            {
                **dict(zip(GROUP, key)),
                "verdict": "fails" if moved else "passes",
                "moved": ", ".join(moved),
                "close": ", ".join(close),
                "clear": ", ".join(clear),
                "long_enough": bool(len(stages)) and bool((stages["factor"] >= LONG_FACTOR).all()),
                "min_factor": stages["factor"].min() if len(stages) else math.nan,
                "twins": bool(len(stages)) and bool(stages["twin"].iloc[0]),
                "twin_diff": stages["twin_diff"].iloc[0] if len(stages) else math.nan,
                "replay_same": bool(len(stages)) and bool(stages["replay_same"].all()),
            }
        )
    return pd.DataFrame(
        out, columns=[*GROUP, "verdict", "moved", "close", "clear", "long_enough", "min_factor", "twins", "twin_diff", "replay_same"]
    )


def write(paper: Study, rule: Path, long: Path, command: str, replay_rule: dict) -> Path:
    """Run the audit and write `<rule>/stop_audit/` (csv of verdicts and metrics, Markdown with the cells not yet audited,
    `pending`, methods named as `paper` names them); returns the folder.
    `replay_rule`: the rule replayed on the long runs (a schedule's or budget's record: `recorded_rule`, `Budget.record`)."""
    every = both_logs(rule, long)  # each training log read once
    logs = paired(every)
    collected = {run: store.read_collected(folder, store.METRICS) for run, folder in (("rule", rule), ("long", long))}
    if logs["rule"].empty:  # no cell has finished both runs yet: the audit lists where they stand (`pending`)
        metrics, st, evidence, stretches = (pd.DataFrame(columns=GROUP) for _ in range(4))
    else:
        metrics, st, evidence = audit(both_hold(collected["rule"], collected["long"]), logs, replay_rule)
        stretches = spans(logs)
    verdict = verdicts(metrics, st).merge(trained(logs), on=GROUP, how="left")
    waiting = unpaired(every, collected["rule"])
    out = rule / store.STOP_AUDIT
    out.mkdir(exist_ok=True)
    files.write_text(out / CSV, verdict.merge(metrics, on=GROUP, how="left").to_csv(index=False))
    text = to_markdown(paper, metrics, st, verdict, command, rule_name(replay_rule), evidence, waiting, stretches)
    files.write_text(out / MARKDOWN, text)
    if len(verdict):
        save(curves(paper, logs, list(dict.fromkeys(verdict["method"]))), out / FIGURE)
    return out


AUDITED_BUDGETS = ("plateau", "plateau-1127")  # the stopping rules a comparison rests on (quick's stops are its 80-step cap)


def failures(results: Path, audit: Path | None = None) -> dict[tuple[str, str, str], dict[str, str]]:
    """The flags the report puts on the methods of a results folder trained under a stopping rule (AUDITED_BUDGETS) that
    its stop audit does not pass: {(dataset, raters, noise): {method: "stop audit: fails" or "stop not audited"}}. A
    method passes only through `<audit>/stop_audit/` (`bench audit-stops`); other budgets get no flag.
    `audit`: the rule's results folder whose audit gives the verdicts (default: `results` itself), so that a rerun under
    the same rule takes the verdicts of the audited run; a method whose cells there trained under another budget record
    (another rule, cap or evaluation interval) than here is not audited."""
    audit = results if audit is None else audit
    path = audit / store.STOP_AUDIT / CSV
    verdict: dict = {}
    if path.is_file():
        table = files.read_table(path, dtype={"noise": str})  # a damaged file: one line naming it (files.UnreadableFile)
        verdict = {(r.dataset, r.raters, r.noise, r.method): r.verdict for r in table.drop_duplicates(GROUP).itertuples()}
    audited = None if Path(audit) == Path(results) else {key(r): r.config.get("budget") for r in ResultsFolder.of(audit).records}
    out: dict = {}
    for r in ResultsFolder.of(results).records:
        budget = r.config.get("budget") or {}
        if budget.get("name") in AUDITED_BUDGETS:
            said = verdict.get(key(r)) if audited is None or audited.get(key(r)) == budget else None
            if said != "passes":
                flag = "stop audit: fails" if said == "fails" else "stop not audited"
                out.setdefault(key(r)[:3], {})[key(r)[3]] = flag
    return out


def key(record: store.CellRecord) -> tuple[str, str, str, str]:
    """A cell record's (dataset, raters, noise, method): what a verdict is kept under."""
    k = record.keys
    return k["dataset"], k["raters"], k["noise"], k["method"]
