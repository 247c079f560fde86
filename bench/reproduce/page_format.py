"""The reproduction page as blocks, written as Markdown (figures linked) and as one self-contained HTML file (figures
embedded as base64, verdicts coloured), for bench/reproduce/page.py."""

from __future__ import annotations

import base64
import html
import io
import re
from collections import Counter
from pathlib import Path

from PIL import Image

from bench.report.table_text import markdown_table

#: ("h", level, text) | ("p", text) | ("list", items) | ("table", header, rows) | ("img", path, caption) | ("toc",) |
#: ("banner", text): a warning across the page, as the figures' red line | ("figures", [(path, caption), …]): figures side by
#: side (HTML; one after the other in Markdown) | ("details", summary, blocks): blocks folded under a summary line (HTML;
#: in Markdown the summary, then the blocks), never holding a heading.
Block = tuple

#: The HTML colour class of each verdict: green where the paper's result is found, red where it is not, amber where the
#: evidence cannot tell, grey where no verdict was given; a pipeline check in the figures' warning red (it is what a smoke
#: run's reader must not miss).
VERDICT_CLASS = {
    "reproduced": "good",
    "holds": "good",
    "not reproduced": "bad",
    "does not hold": "bad",
    "inconclusive": "unsure",
    "no material difference": "unsure",
    "pipeline check": "check",
    "unattainable with the paper's stated precision": "none",
    "incomplete": "none",
    "not run": "none",
    "not comparable": "none",
    "not checkable": "none",
    "no paper value": "none",
}


WARNING_COLOR = "#b00020"  # bench/report/plots.py's, of the figures' "pipeline check, not a verdict" line


def plural(n: int, word: str, many: str = "") -> str:
    """ "1 rater setting", "2 rater settings" (`many`: an irregular plural)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


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
            out.append(markdown_table(b[1], [[code_paths(c) for c in row] for row in b[2]]))
        elif b[0] == "img":
            out.append(f"![{b[1].stem}]({b[1].as_posix()})\n\nFigure: {code_paths(b[2])}")
        elif b[0] == "toc":
            out.append("\n".join(f"{'  ' * (level - 2)}- [{text}](#{anchor})" for level, text, anchor in contents(blocks)))
        elif b[0] == "banner":
            out.append(f"> **{code_paths(b[1])}**")
        elif b[0] == "figures":
            out.append(to_markdown([("img", path, caption) for path, caption in b[1]]).rstrip("\n"))
        elif b[0] == "details":
            out.append(f"{code_paths(b[1])}\n\n" + to_markdown(b[2]).rstrip("\n"))
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Markdown's **bold**, *italic*, `code` and [links](#anchor) within the page as HTML, after escaping; nothing inside a code span is formatted, and a
    bold verdict is coloured."""
    out = []
    for part in re.split(r"(`[^`]*`)", code_paths(text)):
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        part = html.escape(part)
        part = re.sub(r"\*\*(.+?)\*\*", lambda m: f"<b{_class(m.group(1))}>{m.group(1)}</b>", part)
        part = re.sub(r"\*(.+?)\*", r"<i>\1</i>", part)
        out.append(re.sub(r"\[([^\]]+)\]\((#[\w-]+)\)", r'<a href="\2">\1</a>', part))  # a link within the page
    return "".join(out)


def _class(text: str) -> str:
    """` class="v-good"` (or bad, unsure, none) when `text` starts with a verdict; "" otherwise."""
    verdict = verdict_of(text.strip())
    return f' class="v-{VERDICT_CLASS[verdict]}"' if verdict in VERDICT_CLASS else ""


def to_html(blocks: list[Block], out_dir: Path, title: str) -> str:
    ids = iter(anchors(blocks))
    body = "".join(_html_block(b, blocks, out_dir, ids) for b in blocks)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body>{body}<script>{SCRIPT}</script></body></html>\n"
    )


STYLE = (
    "body{font-family:sans-serif;font-size:14px;max-width:1300px;margin:1.5em auto;padding:0 1em;line-height:1.4}"
    "h1{font-size:1.8em;margin:.3em 0}h2{font-size:1.4em;margin:1em 0 .4em}h3{font-size:1.15em;margin:.9em 0 .3em}p{margin:.4em 0}"
    "table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:3px 7px;font-size:90%;text-align:left}"
    "img{max-width:100%}figcaption{font-size:75%;color:#333}.file{color:#888}code{background:#f4f4f4}"
    ".v-good{color:#1a7f37;font-weight:bold}.v-bad{color:#c62828;font-weight:bold}.v-unsure{color:#b26a00;font-weight:bold}"
    f".v-none{{color:#777}}.v-check{{color:{WARNING_COLOR}}}"
    f".banner{{border:2px solid {WARNING_COLOR};background:#fdecee;color:{WARNING_COLOR};font-weight:bold;padding:.5em .8em;"
    "margin:.8em 0;border-radius:4px}.banner code{background:none}"
    ".toc{font-size:90%;line-height:1.6}.toc a{white-space:nowrap}.toc .sub{color:#555}"
    ".figs{display:grid;grid-template-columns:repeat(auto-fill,minmax(290px,1fr));gap:1em;margin:.5em 0 1em}"
    ".figs figure{margin:0;cursor:zoom-in}.figs figure.wide,.figs figure.big{grid-column:1/-1}.figs figure.wide:not(.big) img{max-height:230px}.figs figure.big{cursor:zoom-out}"
    "details{margin:.4em 0}summary{cursor:pointer}figcaption details{margin:0}"
)
#: A figure of a row is clicked to show it across the page, and again to put it back (its caption opens on its own).
SCRIPT = "document.querySelectorAll('.figs figure img').forEach(i=>i.onclick=()=>i.parentNode.classList.toggle('big'))"
WIDE = 2.5  # a figure this many times wider than high (the fused labels) takes a whole row


def _html_block(b: Block, blocks: list[Block], out_dir: Path, ids) -> str:
    """One block as HTML; `blocks` the whole page (for the contents), `ids` the headings' anchors in page order."""
    if b[0] == "h":
        return f'<h{b[1]} id="{next(ids)}">{_inline(b[2])}</h{b[1]}>'
    if b[0] == "p":
        return f"<p>{_inline(b[1])}</p>"
    if b[0] == "list":
        return "<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>"
    if b[0] == "table":
        head = "".join(f"<th{_class(h)}>{_inline(h)}</th>" for h in b[1])
        rows = "".join("<tr>" + "".join(f"<td{_class(c)}>{_inline(c)}</td>" for c in row) + "</tr>" for row in b[2])
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    if b[0] == "img":
        return _figure(out_dir, b[1], b[2])
    if b[0] == "figures":
        return '<div class="figs">' + "".join(_figure(out_dir, path, caption, folded=True) for path, caption in b[1]) + "</div>"
    if b[0] == "banner":
        return f'<div class="banner">{_inline(b[1])}</div>'
    if b[0] == "details":
        return f"<details><summary>{_inline(b[1])}</summary>" + "".join(_html_block(x, blocks, out_dir, ids) for x in b[2]) + "</details>"
    if b[0] == "toc":
        return f'<p class="toc">{_toc(contents(blocks))}</p>'
    raise ValueError(f"unknown page block {b[0]!r}")


def _toc(entries: list[tuple[int, str, str]]) -> str:
    """The contents as one paragraph: each section's link, its subsections' links in brackets after it, " · " between."""
    sections: list[tuple[str, list[str]]] = []
    for level, text, anchor in entries:
        link = f'<a href="#{anchor}">{_inline(text)}</a>'
        if level == 2 or not sections:
            sections.append((link, []))
        else:
            sections[-1][1].append(link)
    return " · ".join(link + (f' <span class="sub">[{", ".join(subs)}]</span>' if subs else "") for link, subs in sections)


def _figure(out_dir: Path, path: Path, caption: str, folded: bool = False) -> str:
    """A PNG embedded as base64 with its caption (`folded`: under a "how to read it" line that opens on a click); a wide
    one is marked to take a whole row of a `figures` block."""
    data = (out_dir / path).read_bytes()
    with Image.open(io.BytesIO(data)) as image:
        wide = ' class="wide"' if image.width >= WIDE * image.height else ""
    caption = f"{_inline(caption)} <span class='file'>({html.escape(path.as_posix())})</span>"
    if folded:  # in a row of figures the caption opens on a click: the figure's own title says what it shows
        caption = f"<details><summary>how to read it</summary>{caption}</details>"
    return (
        f'<figure{wide}><img alt="{html.escape(path.stem)}" '
        f'src="data:image/png;base64,{base64.b64encode(data).decode()}"><figcaption>{caption}</figcaption></figure>'
    )


def verdict_of(text: str) -> str:
    """The verdict a verdict text starts with ("not comparable: the paper's expert GT …" -> "not comparable")."""
    return next((v for v in sorted(VERDICT_CLASS, key=len, reverse=True) if text.startswith(v)), text)
