"""The repository explains itself: every citation of a document resolves to a heading inside the repository."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from bench import cli

CITATION = re.compile(r"\b((?:docs/)?[A-Za-z_]+\.md)#([A-Za-z0-9_-]+)")
OUTSIDE = re.compile(r"DESIGN(?:\.md)? §|methods\.md §|datasets\.md §|reference/(?:methods|datasets)\.md")


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    out, seen = set(), {}
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not re.match(r"#{1,6} ", line):
            continue
        anchor = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        n = seen.get(anchor, 0)
        seen[anchor] = n + 1
        out.add(anchor if n == 0 else f"{anchor}-{n}")
    return out


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True, text=True)
    names = listed.stdout.split() if listed.returncode == 0 else [str(p.relative_to(REPO)) for p in REPO.rglob("*")]
    return [REPO / n for n in names if n.endswith((".py", ".md", ".toml")) and (REPO / n).is_file()]


def test_every_citation_resolves_to_a_heading_in_the_repository():
    broken = []
    for path in tracked_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for name, anchor in CITATION.findall(line):
                target = REPO / name if name.startswith("docs/") or name == "README.md" else path.parent / name
                if not target.is_file() or anchor not in anchors(target):
                    broken.append(f"{path.relative_to(REPO)}:{number}: {name}#{anchor}")
    assert broken == []


def test_markdown_links_within_a_page_resolve():
    broken = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        own = anchors(path)
        for anchor in re.findall(r"\]\(#([A-Za-z0-9_-]+)\)", path.read_text()):
            if anchor not in own:
                broken.append(f"{path.relative_to(REPO)}: #{anchor}")
    assert broken == []


def test_nothing_cites_notes_outside_the_repository():
    found = [
        f"{p.relative_to(REPO)}:{i}"
        for p in tracked_files()
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == []


@pytest.mark.parametrize(
    "heading, anchor",
    [
        ("## CM-UNet's released MNIST examples", "cm-unets-released-mnist-examples"),
        ("### LF-Net: loss normalisation", "lf-net-loss-normalisation"),
        ("## 3.13 Decide and document", "313-decide-and-document"),
    ],
)
def test_the_anchor_rule_is_githubs(tmp_path, heading, anchor):
    page = tmp_path / "page.md"
    page.write_text(f"{heading}\n\ntext\n")
    assert anchors(page) == {anchor}


@pytest.mark.parametrize(("kept", "rows"), [("rerun/mnist-5k", 10), ("paper/mnist-5k", 10), ("audit/mnist-5k/trajectory", 1)])
def test_every_kept_cell_is_still_done_for_the_budget_it_ran_under(kept, rows, capsys):
    """docs/rerun, docs/paper and docs/audit say a run goes on from them, skipping what is kept: a dry run of each method's kept seeds
    under the budget its cells recorded must find them all done, never refuse them as run under other options (a
    Schedule field added since, `rule_cap`, once did) nor plan to retrain them. A dry run writes nothing."""
    folder = REPO / "docs" / kept
    seeds: dict[tuple[str, str], list[str]] = {}
    for config in sorted(folder.glob("runs/*/*/*/*/seed-*/config.json")):
        budget = json.loads(config.read_text())["options"]["budget"]
        seeds.setdefault((config.parent.parent.name, budget), []).append(config.parent.name.removeprefix("seed-"))
    assert len(seeds) >= rows, seeds
    for (method, budget), kept_seeds in seeds.items():
        args = ["run", "--dry-run", "--budget", budget, "--methods", method, "--seeds", ",".join(kept_seeds), "--results", str(folder)]
        assert cli.main(args) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert f"0 of {len(kept_seeds)} cells would run" in out, (method, out)
