"""The reproduction wing: what the verdicts rest on beyond the rules (bench/reproduce/verdicts.py) and claims (bench/reproduce/claims.py).

- `power`: the seed-aware test's error rate and power by simulation (`python -m bench power`);
- `ranking`: rank uncertainty of a table column under a two-level bootstrap (cases, then each seed level);
- `provenance`: what a results folder ran and where (the page's banner and configuration);
- `page_format`: the page's blocks written as Markdown and as one self-contained HTML file.
"""
