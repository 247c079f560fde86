"""The dataset registry: every dataset's card, adapter and settings (`DATASETS`), collected from the adapters.

datasets/ has two wings under this registry: the adapters (datasets/adapters/, one module or sub-package per dataset
with its file readers), which turn files a user already has into `RaterData` splits
(docs/datasets.md#the-data-contract), and the rater simulators (datasets/raters/), which make the simulated raters; both
stand on the data contract (datasets/contract.py) and the rater settings, noise levels and the spec every dataset
registers with (datasets/settings.py: `DatasetSpec`, and `checked_loader`, the checks every load goes through).

Adding a dataset is one module (or sub-package) in datasets/adapters/ that declares its registration,
``SPECS = (DatasetSpec(...),)``: `collect` finds every adapter module and reads its SPECS, so nothing else names it
(docs/datasets.md#adding-a-dataset). A user's own folder (folder:PATH) is registered when named (`register_folder`).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from datasets import adapters
from datasets.adapters import folder
from datasets.contract import DataError, DatasetCard, RaterData, RaterSetting, Splits, oracle_view
from datasets.settings import DatasetSpec, Loader, checked_loader


def collect(package: ModuleType = adapters) -> dict[str, DatasetSpec]:
    """Every dataset the modules of `package` (datasets/adapters/) register -> {name: spec}, in `DatasetSpec.order`.

    A module or sub-package registers its datasets with a module-level ``SPECS`` (a tuple of `DatasetSpec`); one without
    (folder.py: registered when named) registers none. Ties in `order` keep the modules' name order, then SPECS' order.
    Raises ValueError for a name two specs claim.
    """
    specs: list[DatasetSpec] = []
    for module in sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")):
        specs += getattr(importlib.import_module(f"{package.__name__}.{module}"), "SPECS", ())
    found: dict[str, DatasetSpec] = {}
    for spec in sorted(specs, key=lambda s: s.order):
        if spec.card.name in found:
            raise ValueError(f"dataset {spec.card.name!r} is registered twice (two adapters' SPECS name it)")
        found[spec.card.name] = spec
    return found


DATASETS: dict[str, DatasetSpec] = collect()


def get_dataset(name: str, data_root: Path | None = None) -> DatasetSpec:
    """The registered dataset `name`; "folder:PATH" registers your own folder first (`register_folder`), as does a
    "folder-<name>" with the `data_root` it was registered from (a worker process's cell)."""
    if name.startswith(folder.PREFIX):
        return register_folder(Path(name[len(folder.PREFIX) :]))
    if name not in DATASETS and name.startswith(FOLDER) and data_root is not None and (Path(data_root) / "dataset.json").is_file():
        register_folder(Path(data_root))
    if name not in DATASETS:
        hint = "; give your own folder as folder:PATH" if name.startswith(FOLDER) else ""
        raise DataError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}, folder:PATH{hint}")
    return DATASETS[name]


FOLDER = "folder-"  # the registered name of a folder:PATH dataset: folder-<its dataset.json name>
SMALL = 64 * 64  # images up to this many pixels train in MNIST's batches (128 paper, 32 quick), larger ones in 2s


def register_folder(path: Path) -> DatasetSpec:
    """Register the multi-rater folder at `path` (datasets/adapters/folder.py) as "folder-<name>" and return its spec.

    Its card, rater styles and reference come from its dataset.json and folders: ground truth (labelsTr/gt/, and
    labelsTs/gt/ where imagesTs/ exists) makes it scored against GT and offers simulated morpho raters on a binary task;
    without it the reference is the raters' majority. Its data root is `path` itself.
    """
    layout = folder.read_layout(Path(path).absolute())
    first = next(iter(sorted((layout.root / "imagesTr").glob(f"*_0000{layout.ending}"))), None)
    size = folder.slices(folder.read_file(first)[0], layout.axis, first, image=True).shape[1:3] if first else (0, 0)
    batches = (128, 32) if size[0] * size[1] <= SMALL else (2, 2)
    test_gt = layout.has_gt and (not (layout.root / "imagesTs").is_dir() or (layout.root / "labelsTs" / folder.GT).is_dir())
    styles = folder.styles(layout)
    spec = DatasetSpec(
        folder.card(layout),
        folder.load_folder,
        *batches,
        None,
        32,
        reference="gt" if test_gt else "majority",
        structures=tuple(layout.structures),
        rater_styles=styles,
        fixed_raters="" if len(styles) > 1 else "reads its raters from files",
    )
    DATASETS[spec.card.name] = spec  # the folder last given under this name (a results folder records each cell's root)
    return spec


__all__ = ["DATASETS", "DataError", "DatasetCard", "DatasetSpec", "Loader", "RaterData", "RaterSetting", "Splits", "checked_loader"]
__all__ += ["collect", "get_dataset", "oracle_view", "register_folder"]
