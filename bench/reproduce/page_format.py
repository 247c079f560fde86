"""The reproduction page as blocks, written as Markdown (figures linked) and as one self-contained HTML file (figures
embedded as base64, verdicts coloured), for bench/reproduce/page.py."""

from __future__ import annotations

import base64
import html
import re
from collections import Counter
from pathlib import Path

Block = tuple  # ("h", level, text) | ("p", text) | ("list", items) | ("table", header, rows) | ("img", path, caption) | ("toc",)

#: The HTML colour class of each verdict: green where the paper's result is found, red where it is not, amber where the
#: evidence cannot tell, grey where no verdict was given.
VERDICT_CLASS = {
    "reproduced": "good", "holds": "good",
    "not reproduced": "bad", "does not hold": "bad",
    "inconclusive": "unsure", "no material difference": "unsure",
    "pipeline check": "none", "unattainable with the paper's stated precision": "none", "incomplete": "none", "not run": "none", "not comparable": "none", "not checkable": "none",
    "no paper value": "none",
}  # fmt: skip


def anchors(blocks: list[Block]) -> list[str]:
    """Each heading's anchor, as GitHub makes them (lower case, punctuation dropped, spaces to hyphens; a repeat gets -1,
    -2, …), so that the Markdown contents' links work there and the HTML's work in any browser."""
    out, seen = [], Counter()
    for b in blocks:
        if b[0] == "h":
            base = re.sub(r"[^\w\- ]", "", b[2].lower()).replace(" ", "-")
            out.append(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return out


def contents(blocks: list[Block]) -> list[tuple[int, str, str]]:
    """(level, heading, anchor) of every section after the contents: level-2 and level-3 headings."""
    headings = [(b[1], b[2]) for b in blocks if b[0] == "h"]
    start = next((i for i, b in enumerate(blocks) if b[0] == "toc"), 0)
    after = sum(1 for b in blocks[:start] if b[0] == "h")
    return [
        (level, text, anchor) for i, ((level, text), anchor) in enumerate(zip(headings, anchors(blocks))) if i >= after and level in (2, 3)
    ]


def code_paths(text: str) -> str:
    """Paths and globs outside code spans put in code spans, so that their `*` and `<…>` are not read as Markdown or HTML
    (a dataset card's hint `MHSI/*.hdr … Mask/*.png` would otherwise turn the text between the stars italic)."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(p if p.startswith("`") else re.sub(r"[^\s`(),;]+", _code_if_path, p) for p in parts)


def _code_if_path(match: re.Match) -> str:
    """One token: a glob (`/*`, `*.ext`) or a path with a placeholder (`<data-root>/lidc/`) goes in backticks; trailing
    sentence punctuation stays outside."""
    token = match.group(0)
    core = token.rstrip(".:")
    glob = "/*" in core or re.search(r"\*\.\w", core)
    placeholder = "<" in core and "/" in core
    return f"`{core}`{token[len(core) :]}" if glob or placeholder else token


def to_markdown(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        if b[0] == "h":
            out.append(f"{'#' * b[1]} {b[2]}")
        elif b[0] == "p":
            out.append(code_paths(b[1]))
        elif b[0] == "list":
            out.append("\n".join(f"- {code_paths(item)}" for item in b[1]))
        elif b[0] == "table":
            lines = ["| " + " | ".join(h.replace("|", "/") for h in b[1]) + " |", "|" + " --- |" * len(b[1])]
            out.append("\n".join(lines + ["| " + " | ".join(code_paths(c).replace("|", "/") for c in row) + " |" for row in b[2]]))
        elif b[0] == "img":
            out.append(f"![{b[1].stem}]({b[1].as_posix()})\n\nFigure: {code_paths(b[2])}")
        elif b[0] == "toc":
            out.append("\n".join(f"{'  ' * (level - 2)}- [{text}](#{anchor})" for level, text, anchor in contents(blocks)))
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Markdown's **bold**, *italic* and `code` as HTML, after escaping; nothing inside a code span is formatted, and a
    bold verdict is coloured."""
    out = []
    for part in re.split(r"(`[^`]*`)", code_paths(text)):
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        part = html.escape(part)
        part = re.sub(r"\*\*(.+?)\*\*", lambda m: f"<b{_class(m.group(1))}>{m.group(1)}</b>", part)
        out.append(re.sub(r"\*(.+?)\*", r"<i>\1</i>", part))
    return "".join(out)


def _class(text: str) -> str:
    """` class="v-good"` (or bad, unsure, none) when `text` starts with a verdict; "" otherwise."""
    verdict = verdict_of(text.strip())
    return f' class="v-{VERDICT_CLASS[verdict]}"' if verdict in VERDICT_CLASS else ""


def to_html(blocks: list[Block], out_dir: Path, title: str) -> str:
    body, ids = [], iter(anchors(blocks))
    for b in blocks:
        if b[0] == "h":
            body.append(f'<h{b[1]} id="{next(ids)}">{_inline(b[2])}</h{b[1]}>')
        elif b[0] == "p":
            body.append(f"<p>{_inline(b[1])}</p>")
        elif b[0] == "list":
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>")
        elif b[0] == "table":
            head = "".join(f"<th{_class(h)}>{_inline(h)}</th>" for h in b[1])
            rows = "".join("<tr>" + "".join(f"<td{_class(c)}>{_inline(c)}</td>" for c in row) + "</tr>" for row in b[2])
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif b[0] == "img":
            encoded = base64.b64encode((out_dir / b[1]).read_bytes()).decode()
            body.append(f'<figure><img alt="{html.escape(b[1].stem)}" src="data:image/png;base64,{encoded}"><figcaption>'
                        f"{_inline(b[2])} <span class='file'>({html.escape(b[1].as_posix())})</span></figcaption></figure>")  # fmt: skip
        elif b[0] == "toc":
            items = "".join(
                f'<li class="toc{level}"><a href="#{anchor}">{_inline(text)}</a></li>' for level, text, anchor in contents(blocks)
            )
            body.append(f'<ul class="toc">{items}</ul>')
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.45}table{border-collapse:collapse;"
             "margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:3px 7px;font-size:90%;text-align:left}"
             "img{max-width:100%}figcaption{font-size:85%;color:#333}.file{color:#888}code{background:#f4f4f4}"
             ".v-good{color:#1a7f37;font-weight:bold}.v-bad{color:#c62828;font-weight:bold}.v-unsure{color:#b26a00;font-weight:bold}"
             ".v-none{color:#777}.toc{list-style:none;padding-left:0}.toc3{margin-left:1.5em;font-size:90%}")  # fmt: skip
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{style}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")  # fmt: skip


def verdict_of(text: str) -> str:
    """The verdict a verdict text starts with ("not comparable: the paper's expert GT …" -> "not comparable")."""
    return next((v for v in sorted(VERDICT_CLASS, key=len, reverse=True) if text.startswith(v)), text)
