"""`python -m bench audit-stops RULE LONG`: does training longer change what the stopping rule's run scores?
(bench/report/stop_audit.py); `python -m bench audit-stops FOLDER`: the same question from one run read along its
trajectory (bench/report/trajectory_audit.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.cli.options import UsageError
from bench.study import Study


def add_parser(verbs) -> None:
    p = verbs.add_parser(
        "audit-stops",
        allow_abbrev=False,
        help="the stopping rule beside a fixed long run, or read along one trajectory: steps, test metrics, verdicts",
        description="Put a results folder trained under the stopping rule (--budget plateau) beside one of the same cells "
        "trained under --budget long (every stage a fixed length, the lowest validation loss restored): per method and stage, "
        "where each stopped and the validation loss restored; per method, DSC, GED and Dice_match of each, their difference "
        "and whether it is within the larger of the seed sd and 1 DSC point / 0.01 GED / 1 Dice_match point. Writes "
        "RULE/stop_audit/ (stop_audit.md, stop_audit.csv, validation_curves.png: both runs' validation curves); `bench report` of RULE then flags every method that fails. "
        "A cell whose long run is still training (or not started) is listed with where both runs stand. "
        "With one folder of `--budget trajectory` cells: the audit from one run, each method's test metrics at each reading, a signed "
        "verdict from the rule's stop to the horizon and its cause, the rankings under each reading (FOLDER/stop_audit/trajectory_audit.md).",
    )
    p.add_argument(
        "rule", metavar="RULE", help="results folder of the stopping rule's run (e.g. --budget plateau), or of one trajectory run"
    )
    p.add_argument(
        "long",
        metavar="LONG",
        nargs="?",
        help="results folder of the same cells under --budget long (finished or still training); none: RULE is one trajectory run",
    )
    p.add_argument(
        "--replay",
        metavar="BUDGET",
        help="the budget whose stopping rule is replayed on LONG's validation curves (default: the rule RULE's cells trained under)",
    )
    p.set_defaults(func=cmd_audit)


def cmd_audit(args: argparse.Namespace) -> int:
    from bench import files, store
    from bench.report import stop_audit

    if args.long is None:
        return one_run(args.study, Path(args.rule))
    rule, long = Path(args.rule), Path(args.long)
    if rule.resolve() == long.resolve():
        raise UsageError(f"RULE and LONG are the same folder {rule}; give the rule's run and the long run")
    if not store.finished(rule):
        raise UsageError(f"no finished cell in {rule}; give a folder a `python -m bench run --results …` wrote")
    cells = [{store.cell_at(f) for f in store.cell_folders(folder)} for folder in (rule, long)]
    if not cells[1]:  # its runs may still be training: the audit then says where they stand
        raise UsageError(f"no cell in {long}; give a folder a `python -m bench run --budget long --results …` writes")
    if not cells[0] & cells[1]:
        raise UsageError(f"{rule} and {long} share no cell (dataset, rater setting, noise level, method, seed); run the same cells in both")
    problem = files.unwritable(rule)
    if problem:
        raise UsageError(f"cannot write the audit into {rule}: {problem}")
    from bench.train.budget import BUDGETS

    if args.replay is None:
        try:
            replay = stop_audit.recorded_rule(rule)
        except ValueError as e:
            raise UsageError(str(e)) from None
    else:
        if args.replay not in BUDGETS or not BUDGETS[args.replay].early_stopping:
            rules = sorted(n for n, b in BUDGETS.items() if b.early_stopping)
            raise UsageError(f"--replay {args.replay!r} is not a budget with a stopping rule; choose one of {rules}")
        replay = BUDGETS[args.replay].record()
    command = f"python -m bench audit-stops {rule} {long}" + (f" --replay {args.replay}" if args.replay else "")
    out = stop_audit.write(args.study, rule, long, command, replay)
    print((out / stop_audit.MARKDOWN).read_text())
    print(f"written: {out / stop_audit.MARKDOWN}, {out / stop_audit.CSV}", file=sys.stderr)
    return 0


def one_run(paper: Study, folder: Path) -> int:
    """The audit from one folder of trajectories (bench/report/trajectory_audit.py), methods named as the study `paper` names them."""
    from bench import files, store
    from bench.report import trajectory_audit

    records = store.records(folder) if folder.is_dir() else []
    if not any((r.folder / store.READINGS).is_file() for r in records):
        raise UsageError(
            f"{folder} holds no finished cell read along its trajectory; train one with `python -m bench run --budget trajectory "
            f"--results {folder}`, or give two folders (RULE LONG) for the two-run audit"
        )
    budgets = [r.config.get("budget") or {} for r in records]
    stopped = sorted({b.get("name", "an unrecorded budget") for b in budgets if not b.get("fixed_length")})
    if stopped:  # a cell that stops on the rule ends where the rule stops: it has no horizon to move to
        raise UsageError(
            f"{folder} holds cells trained under {', '.join(stopped)}, which stop on the rule, so their last weights are the "
            "rule's own stop and one run cannot say what training longer does; audit a folder of `--budget trajectory` "
            "cells, or give two folders (RULE LONG) for the two-run audit"
        )
    problem = files.unwritable(folder)
    if problem:
        raise UsageError(f"cannot write the audit into {folder}: {problem}")
    written = trajectory_audit.write(paper, folder, f"python -m bench audit-stops {folder}")
    print(written[0].read_text())
    print("written: " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0
