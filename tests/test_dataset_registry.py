"""The dataset registry is collected from the adapters (datasets/__init__.py `collect`): a dataset registers itself with
its module's ``SPECS``, and every simulated pool goes level -> knob -> simulate -> pool through one function
(datasets/raters/levels.py `simulate_level`)."""

from __future__ import annotations

import importlib
import sys
import textwrap

import numpy as np
import pytest

import datasets
from bench.cli import main
from datasets import DATASETS, adapters, collect, get_dataset
from datasets.adapters import folder
from datasets.contract import DataError
from datasets.raters.levels import simulate_level
from datasets.raters.morpho import simulate_raters
from datasets.raters.ms import passes_at
from labels.overlap import average_dsc

#: A whole dataset in one module, as a user would add it to datasets/adapters/: discs of random radius and the five
#: morpho raters simulated from them, at any noise level, registered by its SPECS and nowhere else.
TINY = '''
    """tiny-discs: 40 discs of random radius and five morpho raters simulated from them (a dataset added in a test)."""

    import functools

    import numpy as np

    from datasets.contract import DatasetCard, RaterData, Splits
    from datasets.raters import RATER_NAMES
    from datasets.raters.levels import simulate_level
    from datasets.raters.morpho import simulate_raters
    from datasets.settings import STYLE_NOTES, DatasetSpec

    CARD = DatasetCard(name="tiny-discs", title="discs, five simulated raters (style morpho)", source="written by a test",
                       licence="none", citation="", counts="24 train / 8 val / 8 test discs, 28x28", raters=STYLE_NOTES["morpho"])
    SIZES = {"train": 24, "val": 8, "test": 8}


    def discs(n, seed):
        radii = np.random.default_rng(seed).uniform(5, 10, n)
        return (np.hypot(*np.mgrid[-14:14, -14:14])[None] < radii[:, None, None]).astype(np.uint8)


    def simulate(gt, keys, strength):
        return simulate_raters(gt, seed=0, noise=strength, keys=keys)


    def load_tiny(data_root, setting, level, cache):
        gt = {part: discs(n, seed) for seed, (part, n) in enumerate(SIZES.items())}
        keys = {part: 1000 * k + np.arange(len(gt[part])) for k, part in enumerate(gt)}
        simulators = {part: functools.partial(simulate, gt[part], keys[part]) for part in gt}
        raters, info = simulate_level(CARD.name, setting.style, level, gt["train"], simulators)
        parts = [RaterData(images=gt[p][:, None] + np.float32(0.25) * np.cos(keys[p])[:, None, None, None].astype(np.float32),
                           raters=raters[p], rater_valid=np.ones((len(gt[p]), len(RATER_NAMES)), bool), gt=gt[p],
                           case_ids=keys[p].astype(str), groups=keys[p].astype(str), rater_names=RATER_NAMES,
                           raters_simulated=True) for p in gt]
        return Splits(*parts, "three seeds", raters_info=info)


    SPECS = (DatasetSpec(CARD, load_tiny, 128, 32, None, rater_styles=("morpho",)),)
'''


@pytest.fixture
def extra_adapters(tmp_path, monkeypatch):
    """A folder that counts as part of datasets/adapters/ for this test: write an adapter module into it."""
    monkeypatch.setattr(adapters, "__path__", [*adapters.__path__, str(tmp_path)])
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("datasets.adapters."):
            del sys.modules[name]
            vars(adapters).pop(name.rsplit(".", 1)[1], None)


def write_adapter(folder, name: str, text: str) -> None:
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    importlib.invalidate_caches()


def built_in() -> dict:
    """The registry less the folders registered at run time (folder:PATH, by other tests of this session)."""
    return {name: spec for name, spec in DATASETS.items() if not name.startswith(datasets.FOLDER)}


def test_the_registry_is_every_adapters_specs_in_order():
    assert collect() == built_in() and next(iter(DATASETS)) == "mnist-5k"  # the default --dataset first
    for name, spec in built_in().items():
        module = sys.modules[spec.load.__wrapped__.__module__]
        assert spec in module.SPECS and spec.card.name == name  # declared by the module whose loader it is
    assert not hasattr(folder, "SPECS")  # your own folder is registered when named (register_folder)
    assert get_dataset("mnist-5k") is DATASETS["mnist-5k"]


def test_a_new_dataset_is_one_module_that_registers_itself(extra_adapters, monkeypatch, tmp_path, capsys):
    write_adapter(extra_adapters, "tiny_discs", TINY)
    found = collect()
    assert list(found) == [*built_in(), "tiny-discs"]  # after the project's datasets (DatasetSpec.order 100)
    monkeypatch.setitem(DATASETS, "tiny-discs", found["tiny-discs"])
    spec = get_dataset("tiny-discs")
    assert spec.load.checked and spec.setting().label == "morpho"

    protocol = spec.load(tmp_path)  # the checked loader, as every caller gets it
    info = protocol.raters_info
    assert (info["style"], info["level"], info["target"], info["strength"]) == ("morpho", "protocol", None, 1.0)
    for part in (protocol.train, protocol.val, protocol.test):
        keys = part.case_ids.astype(int)
        np.testing.assert_array_equal(part.raters, simulate_raters(part.gt, seed=0, noise=1.0, keys=keys))

    target = spec.load(tmp_path, None, "0.600")  # a target Average DSC: the knob is bisected on the training discs
    info = target.raters_info
    assert (info["level"], info["target"]) == ("0.6", 0.6) and abs(info["realised_average"] - 0.6) <= 0.01 and info["strength"] != 1
    assert info["realised_average"] == pytest.approx(average_dsc(target.train.raters, target.train.gt))
    np.testing.assert_array_equal(
        target.test.raters, simulate_raters(target.test.gt, seed=0, noise=info["strength"], keys=target.test.case_ids.astype(int))
    )
    np.testing.assert_array_equal(target.train.images, protocol.train.images)
    with pytest.raises(DataError, match=r"^tiny-discs: noise level 0\.95 \(morpho raters, measured on the training split\): target"):
        spec.load(tmp_path, None, "0.95")
    with pytest.raises(DataError, match=r"^tiny-discs: unknown rater style 'cm'; this dataset has morpho$"):
        spec.load(tmp_path, "cm")

    for name in set(DATASETS) - set(found):  # folders other tests registered: `bench list` cannot find their layout
        monkeypatch.delitem(DATASETS, name)
    assert main(["list", "datasets", "--data-root", str(tmp_path)]) == 0  # the CLI lists it, last
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    assert names == [*DATASETS] and names[-1] == "tiny-discs"


def test_a_name_two_adapters_register_is_refused(extra_adapters):
    write_adapter(extra_adapters, "tiny_discs", TINY)
    write_adapter(extra_adapters, "tiny_again", "from datasets.adapters.tiny_discs import SPECS  # noqa: F401\n")
    with pytest.raises(ValueError, match="dataset 'tiny-discs' is registered twice"):
        collect()
    assert "tiny-discs" not in datasets.DATASETS


# --- simulate_level ---------------------------------------------------------------------------


def discs(n: int, seed: int) -> np.ndarray:
    radii = np.random.default_rng(seed).uniform(5, 10, n)
    return (np.hypot(*np.mgrid[-14:14, -14:14])[None] < radii[:, None, None]).astype(np.uint8)


class Counted:
    """A split's simulator (morpho raters of `gt`) that records each knob value it is called with."""

    def __init__(self, gt: np.ndarray, offset: int) -> None:
        self.gt, self.keys, self.calls = gt, offset + np.arange(len(gt)), []

    def __call__(self, strength: float) -> np.ndarray:
        self.calls.append(strength)
        return simulate_raters(self.gt, seed=0, noise=strength, keys=self.keys)


def splits_of(n_train: int = 20) -> tuple[np.ndarray, dict[str, Counted]]:
    gt = discs(n_train, 0)
    return gt, {"train": Counted(gt, 0), "val": Counted(discs(6, 1), 100), "test": Counted(discs(6, 2), 200)}


def test_the_protocol_is_knob_one_without_a_search():
    gt, sims = splits_of()
    raters, info = simulate_level("toy", "morpho", "protocol", gt, sims)
    assert list(raters) == ["train", "val", "test"] and all(s.calls == [1.0] for s in sims.values())
    assert (info["level"], info["target"], info["strength"]) == ("protocol", None, 1.0)
    assert info["realised_average"] == average_dsc(raters["train"], gt)
    np.testing.assert_array_equal(raters["val"], simulate_raters(sims["val"].gt, seed=0, keys=sims["val"].keys))


def test_a_target_reuses_the_last_pool_of_a_search_over_the_whole_training_split():
    gt, sims = splits_of()
    raters, info = simulate_level("toy", "morpho", "0.6", gt, sims, hi=4.0)
    train_calls = sims["train"].calls
    assert train_calls[:2] == [0.0, 4.0] and train_calls[-1] == info["strength"] and len(set(train_calls)) == len(train_calls)
    assert sims["val"].calls == sims["test"].calls == [info["strength"]]  # every other split once, at the knob found
    assert abs(info["realised_average"] - 0.6) <= 0.01
    np.testing.assert_array_equal(raters["train"], simulate_raters(gt, seed=0, noise=info["strength"], keys=sims["train"].keys))


def test_a_search_subset_is_named_in_a_refusal_and_its_pool_is_not_reused():
    gt, sims = splits_of()
    subset = Counted(gt[:8], 0)
    raters, info = simulate_level("toy", "morpho", "0.6", gt, sims, subset=(subset, gt[:8]), unit="discs")
    assert sims["train"].calls == [info["strength"]] and subset.calls[-1] == info["strength"]  # searched on the 8, then all 20
    assert info["realised_average"] == average_dsc(raters["train"], gt)
    with pytest.raises(DataError, match=r"^toy: noise level 0\.95 \(morpho raters, measured on the first 8 training discs\)"):
        simulate_level("toy", "morpho", "0.95", gt, sims, subset=(subset, gt[:8]), unit="discs")
    with pytest.raises(DataError, match=r"^toy: noise level 0\.95 \(morpho raters, measured on the training slices\)"):
        simulate_level("toy", "morpho", "0.95", gt, sims, searched_on="the training slices")


def test_knob_values_that_make_one_pool_are_measured_once():
    """`same_pool`: a knob that moves in whole passes (the MS rules) is measured once per pass count, so a target that
    falls between two counts costs one simulation per count while the bracket halves down to `XTOL`."""
    gt, sims = splits_of()
    passes = Counted(gt, 0)  # morpho raters at noise = the total pass count / 5 (1 at knob 1): a step function of the knob
    sims = {**sims, "train": lambda knob: passes(sum(passes_at(knob)) / 5)}
    five, seven = (average_dsc(sims["train"](knob), gt) for knob in (1.0, 1.25))  # 1 + 2 + 2 passes, then 1 + 3 + 3
    passes.calls.clear()
    with pytest.raises(DataError, match=r"it jumps from \d\.\d+ to \d\.\d+ between strengths 1\.24\d* and 1\.25$"):
        simulate_level("toy", "morpho", f"{(five + seven) / 2:.3f}", gt, sims, hi=4.0, same_pool=passes_at)
    assert len(passes.calls) == len(set(passes.calls)) <= 6  # the bisection measured 14 knob values
    passes.calls.clear()
    _, info = simulate_level("toy", "morpho", f"{five:.3f}", gt, sims, hi=4.0, same_pool=passes_at)  # on a step: found
    assert passes.calls[-1] == sum(passes_at(info["strength"])) / 5 == 1.0 and abs(info["realised_average"] - five) <= 0.01
