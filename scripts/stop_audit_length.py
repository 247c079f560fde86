"""Print the latest stage stop of one finished cell of a results folder (`scripts/stop_audit.sh` sizes its long run by it).

    python scripts/stop_audit_length.py RESULTS METHOD SEED

Exits 1 with one line on stderr when the folder holds no finished cell of that method and seed (or it has no stop).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing it

from bench import store  # noqa: E402


def latest_stop(results: Path, method: str, seed: int) -> int:
    """The largest `step` of the stop rows in the training log of `results`' finished cell (method, seed)."""
    cells = [r for r in store.records(results) if r.keys["method"] == method and int(r.keys["seed"]) == seed]
    if not cells:
        raise LookupError(f"{results} holds no finished cell of {method} seed {seed}; its rule run did not finish")
    logs = store.training_logs(cells)
    stops = logs.loc[logs["event"] == "stop", "step"]
    if stops.empty:
        raise LookupError(f"{cells[0].folder / store.TRAIN_LOG} has no stage stop")
    return int(stops.max())


def main(argv: list[str]) -> int:
    if len(argv) != 3 or not argv[2].isdigit():
        print("usage: python scripts/stop_audit_length.py RESULTS METHOD SEED", file=sys.stderr)
        return 2
    try:
        print(latest_stop(Path(argv[0]), argv[1], int(argv[2])))
    except LookupError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
