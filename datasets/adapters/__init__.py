"""The dataset adapters: each turns files a user already has into `RaterData` splits (docs/datasets.md#the-data-contract).

One module per dataset, or one sub-package where a dataset has file readers of its own (choledoch/files.py,
ms_lesion/files.py, riga/masks.py). Each registers its datasets itself: a module-level ``SPECS = (DatasetSpec(...),)``
(datasets/settings.py), which the registry (datasets/__init__.py `collect`) finds in every module here, so adding a
dataset is adding its module (docs/datasets.md#adding-a-dataset). Every adapter has the signature
`load(data_root, setting, level, cache) -> Splits` (`datasets.Loader`) and is called only through the checked loader
(`checked_loader`, which `DatasetSpec` wraps it in), which checked the rater setting and the level before; an adapter
reads them and never checks them again, and keeps a per-file cache only in the `cache` folder it is given. An adapter
with simulated raters goes from the level to its raters through `datasets.raters.levels.simulate_level`. No adapter
imports another (`tests/test_imports.py`).
"""
