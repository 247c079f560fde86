"""The reproduction report (bench/reproduction.py, bench/reproduction_page.py) on results folders the test writes with known values."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from bench import reproduction, reproduction_page, store, study
from bench.evaluate.long_table import COLUMNS
from bench.verdicts import ClaimReport, Entry

PAPER = study.current()
LABELS = {"average": 0.465, "majority": 0.63, "majority_area_ratio": 0.54, "mean_05": 0.63, "mean_05_area_ratio": 0.54,
          "staple": 0.95, "staple_area_ratio": 1.1, "tv_gt_share": 0.12, "tv_empty_share": 0.2, "gt_area": 104.0, "raters": {}}  # fmt: skip


def write_cell(results, method: str, seed: int, dsc: np.ndarray, budget: str = "plateau", dataset: str = "mnist-5k", raters: str = "lfnet",
               reference: str = "gt"):  # fmt: skip
    """One finished cell as bench/cell.py leaves it (manifest, config, metrics), scored against one reference only."""
    keys = {"dataset": dataset, "raters": raters, "noise": "protocol", "method": method, "seed": seed}
    folder = store.cell_dir(results, store.Cell(**keys))
    folder.mkdir(parents=True)
    stages = {"train": {"reason": "plateau: no fall of more than 1 % in 3 evaluations"}}
    store.write_json(folder / "manifest.json", {"cell": keys, "status": "done", "stages": stages,
                                                 "rater_setting": {"labels": LABELS, "input": "clean"}})  # fmt: skip
    store.write_json(folder / "config.json", {"budget": {"name": budget}})
    rows = []
    for case, value in enumerate(dsc):
        tp = int(round(100 * value))
        for metric, v in (("dsc", value), ("bahd", 5 * (1 - value))):
            rows.append({**keys, "reference": reference, "case": f"c{case:02d}", "structure": "foreground", "metric": metric, "value": v,
                         "tp": tp, "fp": 100 - tp, "fn": 100 - tp, "n_gt": 100, "n_pred": 100, "gt_to_pred_sum": np.nan,
                         "pred_to_gt_sum": np.nan})  # fmt: skip
    store.write_table(folder / "metrics.parquet", pd.DataFrame(rows, columns=COLUMNS))


def make_results(results, means: dict[str, float], budget: str = "plateau", n_cases: int = 20) -> None:
    """Three seeds per method; case values spread around the method's mean, the same spread for every method."""
    spread = np.linspace(-0.004, 0.004, n_cases)
    for method, mean in means.items():
        for seed in range(3):
            write_cell(results, method, seed, np.clip(mean + spread + 0.001 * (seed - 1), 0, 1), budget)
    store.collect(results)


def entries(assessment, table_id: str = "table1", column: int = 0) -> dict[str, Entry]:
    report = next(t for t in assessment.tables if t.table.id == table_id)
    group = next(g for g in report.groups if column in g.entries)
    return {e.method: e for e in group.entries[column]}


def claim(assessment, claim_id: str) -> ClaimReport:
    return next(c for c in assessment.claims if c.claim.id == claim_id)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """mnist-5k under lfnet at the plateau: MV-UNet and CM-UNet near the paper, STAPLE-UNet far below it, LF-Net best."""
    results = tmp_path_factory.mktemp("repro") / "results"
    make_results(results, {"mv-unet": 0.5762, "staple-unet": 0.70, "cm-unet": 0.93, "lf-net": 0.99})
    return results, reproduction.assess(results, results.parent / "data")


def test_values_get_the_verdict_of_the_stated_rule(verdicts):
    _, a = verdicts
    rows = entries(a)
    assert rows["mv-unet"].verdict == "reproduced" and rows["cm-unet"].verdict == "reproduced" and rows["lf-net"].verdict == "reproduced"
    assert rows["staple-unet"].verdict == "not reproduced"  # 70.0 against 90.49 ± 0.45
    assert rows["mv-unet"].measured.n == 3 and rows["mv-unet"].measured.mean == pytest.approx(57.62, abs=0.01)
    assert rows["average"].measured.mean == pytest.approx(46.5) and rows["average"].verdict == "reproduced"  # 46.5 vs 47.10
    assert rows["oracle"].verdict == "not run" and rows["mean-unet"].measured is None
    bahd = entries(a, column=1)
    assert bahd["lf-net"].measured.mean == pytest.approx(5 * (1 - 0.99), abs=1e-6)
    group = next(g for g in a.tables[0].groups)
    assert group.kind == "verdict" and "a sample of mnist" in group.note and "identified as the paper's" in group.note
    assert group.ranking[0]["winner"] == "lf-net" and group.ranking[0]["paper_winner"] == "lf-net" and group.ranking[0]["tau"] == 1.0


def test_claims_hold_only_with_their_order_and_a_significant_test(verdicts):
    _, a = verdicts
    assert claim(a, "best-everywhere").verdict == "holds"  # MNIST's two columns: the only ones measured
    assert claim(a, "mv-label-under-segments").verdict == "holds" and claim(a, "staple-label-beats-averaging").verdict == "holds"
    assert claim(a, "ms-lesion-7-points").verdict == "not run" and claim(a, "parameters-insensitive").verdict == "not checkable"
    lidc = next(t for t in a.tables if t.table.id == "table2")
    assert lidc.groups == [] and re.match(r"lidc: not run: lidc not found under .*data \(put .* in <data-root>/lidc/", lidc.not_run[0])


def test_a_ranking_claim_fails_when_another_method_is_ahead(tmp_path):
    make_results(tmp_path, {"mv-unet": 0.5762, "staple-unet": 0.995, "lf-net": 0.99})
    a = reproduction.assess(tmp_path, tmp_path / "data")
    best = claim(a, "best-everywhere")
    assert best.verdict == "does not hold" and any("does not hold" in line for line in best.evidence)
    ranking = a.tables[0].groups[0].ranking[0]
    assert ranking["winner"] == "staple-unet" and ranking["test"]["method"] == "staple-unet" and ranking["test"]["p"] < 0.05


def test_the_quick_budget_is_never_a_verdict(tmp_path):
    make_results(tmp_path, {"mv-unet": 0.5762, "staple-unet": 0.70, "lf-net": 0.99}, budget="quick")
    a = reproduction.assess(tmp_path, tmp_path / "data")
    rows = entries(a)
    assert {rows[m].verdict for m in ("mv-unet", "staple-unet", "lf-net")} == {"pipeline check"}
    assert rows["mv-unet"].measured.mean == pytest.approx(57.62, abs=0.01)  # the value is shown all the same
    assert claim(a, "best-everywhere").verdict == "pipeline check"
    group = next(g for g in next(t for t in a.tables if t.table.id == "table1").groups if g.entries)
    line = reproduction_page.group_line(group)
    assert "budget quick (a pipeline check)" in line and line.count("budget") == 1, line
    ablation = next(t for t in a.tables if t.table.id == "table4")  # mnist-5k stands in for Choledoch there
    assert all(g.kind == "pipeline check" and "stands in for choledoch" in g.note for g in ablation.groups)


def test_the_page_states_the_rule_first_and_embeds_its_figures(verdicts, tmp_path):
    results, a = verdicts
    written = reproduction_page.write(a, tmp_path / "paper", results.parent / "data")
    md, page = (p.read_text() for p in written[:2])
    assert md.index("How verdicts are given") < md.index("Headline") < md.index("| MV-UNet | 57.62 ± 0.44 |")
    assert (
        "Paper values measured under the setting identified as the paper's: 3 reproduced, 5 not reproduced" in md
        and "Claims that hold: `best-everywhere`" in md
    )
    assert "![boxplot" in md and (tmp_path / "paper" / "figures").is_dir()
    assert "data:image/png;base64," in page and 'src="figures/' not in page and "<table>" in page
    assert page.count("<h2>") == md.count("\n## ") + md.startswith("## ")


def test_an_order_needs_its_effect_in_the_claimed_direction(tmp_path):
    """LF-Net ahead in the mean by a few large wins while it loses most cases: significant, but the other way: no claim holds."""
    other = np.full(40, 0.90)
    ours = np.concatenate([other[:35] - 0.01, other[35:] + 0.09])  # mean +0.00375, median −0.01
    for seed in range(3):
        write_cell(tmp_path, "lf-net", seed, ours)
        write_cell(tmp_path, "mv-unet", seed, other)
    store.collect(tmp_path)
    a = reproduction.assess(tmp_path, tmp_path / "data")
    best = claim(a, "best-everywhere")
    assert best.verdict == "does not hold", best.evidence
    assert any("effect size -" in line for line in best.evidence)


def test_no_effect_means_no_effect_either_way_and_a_partial_ablation_is_incomplete(tmp_path):
    worse = np.linspace(0.60, 0.70, 30)
    for seed in range(3):  # LIDC: LF-Net 5 points below its variant without the rater net: an effect, the wrong way
        write_cell(tmp_path, "lf-net", seed, worse, dataset="lidc", raters="real", reference="majority")
        write_cell(tmp_path, "lf-net-s-tv-sls", seed, worse + 0.05, dataset="lidc", raters="real", reference="majority")
        for method in ("lf-net-s", "lf-net-s-tv"):  # Choledoch: two of the ablation's rows only
            write_cell(tmp_path, method, seed, worse + (0.1 if method == "lf-net-s-tv" else 0), dataset="choledoch", raters="choledoch")
    store.collect(tmp_path)
    a = reproduction.assess(tmp_path, tmp_path / "data")
    tie = claim(a, "lidc-rcn-no-help")
    assert tie.verdict == "does not hold" and "an effect" in tie.evidence[0], tie.evidence
    modules = claim(a, "each-module-helps")
    assert modules.verdict == "incomplete" and any("not run: S+TV+SLS vs S+TV" in line for line in modules.evidence), modules.evidence


def test_a_claim_measured_only_on_a_stand_in_is_a_pipeline_check(tmp_path):
    """Table IV's rows on mnist-5k (its declared stand-in for Choledoch): the ablation claim is checked there, never graded."""
    means = {"lf-net-s": 0.60, "lf-net-s-tv": 0.90, "lf-net-s-tv-sls": 0.89, "lf-net": 0.895, "lf-net-no-ce": 0.88}
    make_results(tmp_path, means)
    modules = claim(reproduction.assess(tmp_path, tmp_path / "data"), "each-module-helps")
    assert modules.verdict == "pipeline check", modules.evidence
    assert any(line.startswith("mnist-5k/lfnet") and "S+TV+SLS 89.00 vs S+TV 90.00" in line and "does not hold" in line
               for line in modules.evidence), modules.evidence  # fmt: skip


def test_the_declared_readings_are_compared_with_the_first(tmp_path):
    make_results(tmp_path, {"lf-net": 0.89, "lf-net-no-tv-sl": 0.92, "lf-net-rcn-image": 0.89})
    a = reproduction.assess(tmp_path, tmp_path / "data")
    rows = {r["method"]: r for r in a.readings}
    assert set(rows) == {"lf-net", "lf-net-no-tv-sl", "lf-net-rcn-image"}  # lf-net-rcn-shared was not run
    assert rows["lf-net"]["test"] is None and rows["lf-net-no-tv-sl"]["measured"].mean == pytest.approx(92.0, abs=0.01)
    assert (
        -rows["lf-net-no-tv-sl"]["test"]["median_diff"] == pytest.approx(0.03, abs=1e-9)
        and rows["lf-net-no-tv-sl"]["test"]["p_holm"] < 0.05
    )
    assert rows["lf-net-rcn-image"]["teacher_cells"] == 0  # the test's manifests carry no teacher
    md = reproduction_page.write(a, tmp_path / "paper", tmp_path / "data")[0].read_text()
    assert "| mnist-5k `lfnet` | `lf-net-no-tv-sl` | 92.00 ± 0.10 (3) | +3.00, Holm p" in md
