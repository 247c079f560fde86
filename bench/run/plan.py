"""The plan of a sweep: its cells as data (`SweepSpec`: dataset × rater setting × noise × method × seed), the checks
that run before anything trains, and `execute`, which runs the plan and collects the results.

The command line (`bench run`) and the paper's recipes (`bench paper`) both build a `SweepSpec` from
values, never from each other's strings. Every check fails in one line (`PlanError`, exit 2 at the
command line) before a cell is claimed: unknown names, values of the wrong type, a dataset or
input the setting does not have, a results folder that cannot be written, finished cells that ran
with other options or on other data, a method that cannot run on the data.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import sys
import types
import typing
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

import methods
from bench import store
from bench.files import UnreadableFile, unwritable
from bench.results_folder import ResultsFolder
from bench.run import sweep
from bench.run.resolve import RunOptions, cell_method, dataset_overrides, is_oracle, option_record, stage_schedules, trained
from bench.run.split_cache import DataKey, data_fingerprint, load_splits
from bench.store import Cell
from bench.study import Study
from bench.train import hardware, steps
from bench.train.budget import Schedule
from datasets import DATASETS, DataError, DatasetSpec, RaterSetting, get_dataset
from datasets.contract import Note
from datasets.settings import parse_level, refuse_noise_level


class PlanError(ValueError):
    """A sweep that cannot run as planned; the message says what to change, in one line."""


@dataclass(frozen=True)
class SweepSpec:
    """The cells of one sweep, from `run`'s flags or a recipe's setting: checked, expanded and without duplicates.

    `refs` holds the expanded methods, each resolved once into a `MethodRef` (a `--set` value becomes its own cell,
    `lf-net@beta=3`), `methods` their labels;
    `raters` is the dataset's checked rater setting: its style (the default when none is given), with
    the network input `--input` names, labelled `<style>+<input>` where it is not the style's own (`cm+clean`);
    `noise_levels` are canonical labels ("protocol", or a target Average DSC such as "0.45").
    """

    dataset: str
    raters: RaterSetting
    noise_levels: tuple[str, ...]
    refs: tuple[methods.MethodRef, ...]
    seeds: tuple[int, ...]

    @classmethod
    def build(
        cls,
        dataset: str,
        methods: str | list[str],
        seeds: list[int],
        noise_levels: list[str],
        grid: dict | None = None,
        raters: str | None = None,
        network_input: str | None = None,
        data_root: Path | None = None,
        *,
        paper: Study,
    ) -> SweepSpec:
        """methods: a group name (`resolve_methods`) or names; grid: method -> {parameter: values} (`--set`, a recipe's `set`);
        data_root: where the data is, so that a grid's values are checked and resolved on its shape (`expand_params`);
        paper: the study rerun (its Oracle, its groups, its settings for the dataset)."""
        spec = get_dataset(dataset)
        try:
            setting = spec.setting(raters, network_input)  # the one check of a rater setting (datasets.DatasetSpec.setting)
        except DataError as e:
            given = " ".join(f"{flag} {value}" for flag, value in (("--raters", raters), ("--input", network_input)) if value is not None)
            hint = (
                ""
                if spec.inputs or network_input is None
                else f"; --input applies to {', '.join(n for n, d in DATASETS.items() if d.inputs)}"
            )
            raise PlanError(f"{given}: {e}{hint}") from None
        try:
            levels = [parse_level(str(n)) for n in noise_levels]
        except ValueError as e:
            raise PlanError(f"--noise-levels: {e}") from None
        if spec.fixed_raters:  # one line before any data is read (the loaders refuse too)
            for level in levels:
                refuse_noise_level(dataset, level, spec.fixed_raters)
        if any(s < 0 for s in seeds):
            raise PlanError(f"--seeds must be ≥ 0, got {_text(seeds)}")
        refuse_twice("--seeds", _text(seeds), list(seeds))
        refuse_twice("--noise-levels", _text(noise_levels), levels)
        names = resolve_methods(methods, paper, has_gt=spec.reference == "gt") if isinstance(methods, str) else list(methods)
        for method in grid or {}:
            if method not in names:
                raise PlanError(f"--set {method}.…: method {method!r} is not in --methods ({', '.join(names)})")
        refs = expand_params(names, grid or {}, spec, paper, data_spec(dataset, data_root, setting, levels) if grid else None)
        if spec.reference != "gt" and any(is_oracle(r, paper) for r in refs):
            raise PlanError(
                f"the oracle trains on ground truth and {dataset} has none (reference: {spec.reference}); drop oracle from --methods"
            )
        return cls(dataset, setting, tuple(levels), tuple(refs), tuple(seeds))

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(ref.label for ref in self.refs)

    def cells(self) -> list[Cell]:
        return plan_cells(list(self.refs), self.dataset, self.raters, list(self.noise_levels), list(self.seeds))


def resolve_methods(text: str, paper: Study, has_gt: bool = True) -> list[str]:
    """A comma list of method names and groups, in order, each method once: `all` = the paper's methods plus the oracle
    (where the dataset has ground truth to train it); `ablation` = LF-Net's ablation rows; `readings` = LF-Net under each
    declared reading of the paper's open points; `field` = the field's sampling methods (Prob. U-Net, Pionono, D-Persona)."""
    groups = {
        "all": [*methods.method_names("main"), *([paper.oracle] if has_gt else [])],
        "field": methods.method_names("field"),
        "ablation": [paper.reference_method, *methods.method_names("ablation")],  # Table IV: the full model and its variants
        "readings": [r["method"] for r in paper.readings],  # the one reported as the method first
    }
    items = [n.strip() for n in text.split(",") if n.strip()]
    if not items:
        raise PlanError("--methods is empty; give all, field, ablation, readings or a comma list, e.g. --methods mv-unet,lf-net")
    refuse_twice("--methods", text, items)
    known = [*methods.method_names(), paper.oracle]
    # The name every table prints (`MV-UNet`) and any case of a registered name are taken for that name.
    spelled = {n.lower(): n for n in known} | {methods.get_entry(n).display.lower(): n for n in methods.method_names()}
    names = []
    for item in items:
        item = item if item in known or item in groups else spelled.get(item.lower(), item)
        if item not in known and item not in groups:
            candidates = spelled | {g: g for g in groups}  # a group's name mistyped gets the hint too
            close = difflib.get_close_matches(item.lower(), list(candidates), n=1)
            hint = f"did you mean {candidates[close[0]]}? " if close else ""
            raise PlanError(f"unknown method {item!r}; {hint}known: {', '.join(known)} (groups: {', '.join(groups)})")
        names += groups.get(item, [item])
    return list(dict.fromkeys(names))  # groups may share a method (lf-net is in all three): each runs once


def refuse_twice(flag: str, text: str, values: list) -> None:
    twice = sorted({str(v) for v in values if values.count(v) > 1})
    if twice:  # each would plan the same cell twice
        raise PlanError(f"{flag} {text}: {', '.join(twice)} given more than once; list each value once")


def _text(values) -> str:
    return ",".join(map(str, values))


def plan_cells(refs: list[methods.MethodRef], dataset: str, raters: RaterSetting, noise_levels: list[str], seeds: list[int]) -> list[Cell]:
    return [Cell(dataset, raters, noise, m, s) for noise in noise_levels for m in refs for s in seeds]


def data_spec(dataset: str, root: Path | None, raters: RaterSetting, levels: list[str]) -> methods.DataSpec | None:
    """The shape of the dataset's training split (channels, classes, raters), read from the decoded-data cache; None
    without a data root. The run reads the same split next, from the same cache."""
    if root is None:
        return None
    with warnings.catch_warnings():  # a sparse pool's note is the run's to print, once
        warnings.simplefilter("ignore")
        train = load_splits(DataKey.of(dataset, root, raters, levels[0], store.cache_dir())).train
    return methods.DataSpec(train.in_channels, train.n_classes, train.n_raters, train.rater_ids_consistent)


def expand_params(
    names: list[str], grid: dict[str, dict[str, list]], dataset: DatasetSpec, paper: Study, data: methods.DataSpec | None = None
) -> list[methods.MethodRef]:
    """One method per combination of the values in `grid` (method -> {parameter: values}), as a `MethodRef`.

    A value equal to what the method gets anyway on this dataset (its registered default, the dataset's paper setting,
    e.g. λ = 0.01 on MNIST, or, with `data`, a default the method resolves on the data's shape, e.g. LF-Net's β = R − 1)
    is dropped from the name, so the default point of a parameter sweep is the plain method's cell and is trained once.
    Unknown parameters, values of the wrong type and values outside a field's declared domain (`check_domain`) raise
    UnknownMethodError.
    """
    out = []
    for name in names:
        effective = effective_config(name, dataset, paper)
        config = methods.get_entry(trained(methods.MethodRef(name), paper).name).cls.Config
        hints, fields = typing.get_type_hints(config), {f.name: f for f in dataclasses.fields(config)}
        keys = sorted(grid.get(name, {}))
        for key in keys:
            if key.endswith(("epochs", "steps")) and key not in effective:
                raise methods.UnknownMethodError(
                    f"{name}.{key}: how long a method trains is the budget's business, not a method parameter; "
                    "use --budget quick|plateau|paper or --max-steps N"
                )
            if key not in effective:
                raise methods.UnknownMethodError(f"{name} has no parameter {key!r}; it has: {', '.join(effective)}")
            for value in grid[name][key]:
                check_type(name, key, value, effective[key], hints.get(key))
                check_domain(name, key, value, fields[key], data)
        resolved = resolved_config(name, dataset, data, paper) if data is not None and keys else effective
        for combo in itertools.product(*(grid[name][k] for k in keys)):
            out.append(methods.MethodRef.of(name, {k: v for k, v in zip(keys, combo) if v not in (effective[k], resolved[k])}))
    return list(dict.fromkeys(out))  # one cell a label (`MethodRef` equality)


def effective_config(name: str, dataset: DatasetSpec, paper: Study) -> dict:
    """The config fields the (unparametrised) method `name` trains with on `dataset`: registry defaults, then the dataset's paper settings."""
    trains = trained(methods.MethodRef(name), paper).name
    return dataclasses.asdict(methods.resolve_config(trains, dataset_overrides(dataset, trains, paper)))


def resolved_config(name: str, dataset: DatasetSpec, data: methods.DataSpec, paper: Study) -> dict:
    """`effective_config` with each field left None resolved as the method resolves it on data of this shape: the built
    method's attribute of the field's name (LF-Net's `beta`, R − 1), where it has a plain value."""
    effective = effective_config(name, dataset, paper)
    trains = trained(methods.MethodRef(name), paper).name
    try:
        with torch.random.fork_rng(devices=[]):  # building initialises weights: the caller's random state stays as it was
            method = methods.build_method(trains, data, dataset_overrides(dataset, trains, paper))
    except (ValueError, TypeError):
        return effective  # it cannot run on this data: `check_compatible` says so in one line before anything trains
    plain = (bool, int, float, str)
    return {k: getattr(method, k) if v is None and isinstance(getattr(method, k, None), plain) else v for k, v in effective.items()}


def check_domain(name: str, key: str, value, field: dataclasses.Field, data: methods.DataSpec | None) -> None:
    """Refuse a value outside the range a Config field declares, `field(metadata={"domain": (low, high)})`, where a bound
    may be "raters", the number of raters of the data (LF-Net's β counts raters: 1..R); unchecked without `data` then."""
    domain = field.metadata.get("domain")
    if domain is None or value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if "raters" in domain and data is None:
        return
    low, high = (data.n_raters if bound == "raters" else bound for bound in domain)
    if not low <= value <= high:
        counts = f" (it counts raters: {data.n_raters} here)" if "raters" in domain else ""
        raise methods.UnknownMethodError(f"{name}.{key}={value!r}: outside its range {low}..{high}{counts}")


def check_type(name: str, key: str, value, default, hint=None) -> None:
    """Refuse a value of the wrong type before any cell runs: the type of the default, or (default None) of the field's annotation."""
    if value is None:
        return
    if default is not None:
        kinds = (int, float) if isinstance(default, float) else (type(default),)
        expected = f"a {type(default).__name__} like its default {default!r}"
    else:
        allowed = hint_types(hint)
        if allowed is None:
            return
        kinds = (*allowed, int) if float in allowed else allowed
        expected = " or ".join("None" if k is type(None) else k.__name__ for k in allowed) + " (its default is None)"
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        raise methods.UnknownMethodError(f"{name}.{key}={value!r}: expected {expected}")


def hint_types(hint) -> tuple[type, ...] | None:
    """The classes a config field's annotation allows (`int | None` -> (int, NoneType)); None when it is not a plain class or union of them."""
    if hint is None:
        return None
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    if not all(isinstance(a, type) and typing.get_origin(a) is None for a in args):
        return None  # e.g. Literal[...] or list[int]: left to the method's own checks
    return args


def mismatched(cells: list[Cell], opts: RunOptions) -> list[tuple[Cell, str]]:
    """Finished cells that ran under other options than `opts`, or whose stages trained under other schedules than their
    budget gives now (its definition changed since), each with what differs: they would be silently reused otherwise."""
    want = option_record(opts)
    out = []
    for cell in cells:
        if store.is_done(opts.results, cell) and not opts.force:
            config = store.read_config(store.cell_dir(opts.results, cell))
            diff = option_change(config.get("options") or {}, want) or schedule_change(cell, opts, config)
            if diff:
                out.append((cell, diff))
    return out


def option_change(had: dict, want: dict) -> str:
    """The run options a finished cell recorded that differ from `want`, with both values ("" if none). An option it did
    not record is a difference too: a config.json emptied or cut by hand would otherwise pass as any run's cell (every
    cell kept in docs/ records them all)."""
    return ", ".join(f"{k} {had[k] if k in had else 'not recorded'} (now {want[k]})" for k in want if k not in had or had[k] != want[k])


def schedule_change(cell: Cell, opts: RunOptions, config: dict) -> str:
    """How the schedules a finished cell recorded differ from those its budget gives the same stages now ("" if not);
    the wording of a schedule's `source` is not a difference. A field the cell did not record reads as its default: a
    Schedule field is added with the default that keeps the old behaviour (`rule_cap` 0 replays no rule), so cells kept
    from before it (docs/paper's) still match."""
    had = config.get("schedules")
    if not had or "train_images" not in config:
        return ""  # a cell from before schedules were recorded: kept, as check_data keeps cells without a fingerprint
    now = stage_schedules(list(had), trained(cell.ref, opts.study).name, get_dataset(cell.dataset), config["train_images"], opts)
    defaults = {f.name: f.default for f in dataclasses.fields(Schedule) if f.default is not dataclasses.MISSING}
    changes = []
    for stage, sched in now.items():
        was = defaults | had[stage]
        changes += [
            f"{stage} {k} {was.get(k)} (now {v})" for k, v in dataclasses.asdict(sched).items() if k != "source" and was.get(k) != v
        ]
    return f"the {opts.budget.name} budget changed since: {', '.join(changes)}" if changes else ""


def execute(
    cells: list[Cell],
    opts: RunOptions,
    backend: str = "auto",
    n_jobs: int | None = None,
    scheduler: str | None = None,
    collect: bool = True,
) -> list[dict]:
    """Run `cells` (finished ones are skipped unless `opts.force`) and collect the results folder (unless not `collect`:
    the caller collects from its own read, `bench.results_folder.ResultsFolder.collect`).

    Checks first, in one line each, before anything trains: the results folder is writable, the
    device exists, finished cells ran with the same options, the data loads and every method can
    run on it. Returns one outcome per cell (see `bench.run.sweep.run_sweep`).
    """
    results = opts.results
    damaged = preflight(cells, opts)
    if backend == "dask" and scheduler:
        try:
            sweep.check_scheduler(scheduler)
        except ConnectionError as e:
            raise PlanError(str(e)) from None
    retrain_damaged(damaged, opts)
    pending = [c for c in cells if opts.force or not store.is_done(results, c)]
    backend, n_jobs = sweep.resolve_backend(backend, n_jobs, len(pending), opts.device)
    said = data_checks(pending, opts, every=backend != "sequential")  # sequential: the others load in turn
    for message, note in said:  # shown once the checks passed, so a refusal stays one line
        print(f"{'note' if note else 'warning'}: {message}", file=sys.stderr)
    outcomes = sweep.run_sweep(cells, opts, backend, n_jobs, scheduler) if cells else []
    if cells and collect:
        store.collect(results)
    return outcomes


def data_checks(cells: list[Cell], opts: RunOptions, every: bool = True) -> list[tuple[str, bool]]:
    """Load each data setting of `cells` (only the first unless `every`) and check it as the run needs it (sizes, every
    method buildable on it): a missing dataset, data root or noise level fails here, once, as `DataError` or `PlanError`,
    and parallel workers then read the decoded splits from the cache. Returns the adapters' warnings and notes
    (message, is a note), for the caller to show once everything passed: a refusal stays one line. The run and the dry run
    both call it."""
    keys = list(dict.fromkeys(DataKey.of_cell(c, opts.data_root) for c in cells))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sparse = []
        for key in keys if every else keys[:1]:
            splits = load_splits(key)
            check_sizes(splits, key.dataset, opts)
            check_compatible({c.ref for c in cells if c.dataset == key.dataset}, key.dataset, splits.train, opts)
            sparse.append((splits.raters_info or {}).get("warning"))
    said = [(str(w.message), issubclass(w.category, Note)) for w in caught]
    said += [(m, True) for m in sparse if m and not any(m == text for text, _ in said)]  # from the cache: the loader did not warn
    return list(dict.fromkeys(said))


def check_compatible(refs: set[methods.MethodRef], dataset: str, train, opts: RunOptions) -> None:
    """Build each method once on the data's shape, so a method that cannot run on it fails here, not in every cell."""
    for ref in sorted(refs, key=str):
        try:
            cell_method(ref, 0, get_dataset(dataset), train, opts.budget, opts.study)
        except (ValueError, TypeError) as e:
            raise PlanError(f"{ref} cannot run on {dataset}: {e}") from None


def check_options(cells, opts) -> None:
    """Refuse to mix budgets in one results folder: a finished cell is reused only under the options it ran with."""
    stale = mismatched(cells, opts)
    if stale:
        cell, diff = stale[0]
        raise PlanError(
            f"{len(stale)} finished cell(s) in {opts.results} ran with other options, e.g. {cell}: {diff}; "
            "use another --results folder, the same options, or --force to retrain"
        )


def preflight(cells: list[Cell], opts: RunOptions) -> dict[Cell, UnreadableFile]:
    """The checks of the results folder and the device that every run makes before anything trains, and the dry run too:
    the folder is writable, the device and engine exist, no finished cell is damaged but the run's own (returned: the run
    trains them again), finished cells ran with the same options, schedules and data."""
    check_writable(opts.results)
    steps.check_engine(opts.engine, hardware.resolve_device(opts.device))  # --device cuda or --engine graphed without a GPU fail here
    damaged = check_damage(cells, opts.results)
    kept = [c for c in cells if c not in damaged]
    check_options(kept, opts)
    check_data(kept, opts)
    return damaged


def check_damage(cells: list[Cell], results: Path) -> dict[Cell, UnreadableFile]:
    """Finished cells of `results` with a damaged file (`store.damage`): this run's are returned, to train again; another
    one stops the run before anything trains, naming its file and repair, since collecting the table would drop it."""
    return ResultsFolder.open(results).refuse_damage(cells)


def retrain_damaged(damaged: dict[Cell, UnreadableFile], opts: RunOptions) -> None:
    """A damaged cell of the run is trained again from scratch, with a note: its folder is removed under its claim (one
    another process is training holds it, and is left to that process)."""
    for cell, found in damaged.items():
        print(f"note: {found.path}: {found.problem}; training the cell {cell} again", file=sys.stderr)
        if not opts.force:  # --force starts every cell afresh anyway
            store.discard(opts.results, cell)


def check_sizes(splits, dataset: str, opts: RunOptions) -> None:
    """--train-size and --test-size beyond a split are reported (each cell records the images it used, `train_images` and
    `test_images` in config.json), never cut silently."""
    for flag, value, part in (("--train-size", opts.train_size, splits.train), ("--test-size", opts.test_size, splits.test)):
        if value is not None and value > part.n:
            note = f"{flag} {value}: {dataset}'s {flag[2:-5]} split has {part.n:,} images; all {part.n:,} are used (each cell records the number)"
            warnings.warn(Note(note), stacklevel=2)


def estimate(cells: list[Cell], results: Path) -> tuple[float, int]:
    """Seconds the cells would take on this machine, from the finished cells of this results folder that ran the same
    method on the same dataset (their median), and how many cells had such a record; (0, 0) when none had."""
    seconds: dict[tuple[str, str], list[float]] = {}
    for _, info, found in store.finished(results):
        if found is not None or "cell" not in info:
            continue  # a damaged cell: the run trains it again
        seconds.setdefault((info["cell"]["dataset"], info["cell"]["method"]), []).append(float(info.get("seconds", 0)))
    known = [sorted(seconds[(c.dataset, c.method)]) for c in cells if (c.dataset, c.method) in seconds]
    return sum(s[len(s) // 2] for s in known), len(known)


def check_data(cells, opts) -> None:
    """Refuse to reuse finished cells that were trained on other data than their rater setting gives now.

    A setting's name can outlive its rules (a simulation made exact, an adapter fixed): each cell
    records the fingerprint of the splits it saw (manifest `data_fingerprint`), and a results
    folder never mixes two versions of one setting silently. Cells without a record are kept.
    """
    done = [c for c in cells if not opts.force and store.is_done(opts.results, c)]
    for key in dict.fromkeys(DataKey.of_cell(c, opts.data_root) for c in done):
        now = data_fingerprint(key)
        stale = [
            c
            for c in done
            if DataKey.of_cell(c, opts.data_root) == key
            and store.read_manifest(store.cell_dir(opts.results, c)).get("data_fingerprint", now) != now
        ]
        if stale:
            raise PlanError(
                f"{len(stale)} finished cell(s) in {opts.results} were trained on other data than {key} gives now, e.g. "
                f"{stale[0]} (its rater rules, inputs or files changed since); use another --results folder, or --force to retrain"
            )


def check_writable(folder: Path) -> None:
    """Fail before any training if results cannot be written, without creating anything yet."""
    why = unwritable(folder)
    if why:
        raise PlanError(f"cannot write the results folder {folder} ({why}); choose another with --results")
