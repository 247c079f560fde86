"""The dataset adapters: each turns files a user already has into `RaterData` splits (docs/datasets.md#the-data-contract).

One module per dataset, or one sub-package where a dataset has file readers of its own (choledoch/files.py,
ms_lesion/files.py, riga/masks.py). Every adapter has the signature `load(data_root, setting, level, cache) -> Splits`
(`datasets.Loader`) and is called only through the registry's checked loader (datasets/__init__.py), which checked the
rater setting and the level before; an adapter reads them and never checks them again, and keeps a per-file cache only
in the `cache` folder it is given. No adapter imports another (`tests/test_imports.py`).
"""
