"""Screenshots of a reproduction page (RESULTS/paper/REPRODUCTION.html) in headless Chromium, and the page's height.

    python tools/screenshot_page.py RESULTS/paper/REPRODUCTION.html [--out DIR]

writes DIR/first_screen.png (what a reader sees on opening the page in a 1400 × 900 window) and DIR/full_page.png (the
whole page, cropped below its last non-white row), and prints the page's height in pixels. DIR defaults to
RESULTS/paper/screenshots. Chromium draws the full page in a window `--max-height` pixels tall; a page that fills it is
reported as at least that tall. Needs the `chromium` binary (Debian: `apt-get install chromium`) and Pillow.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

WIDTH, HEIGHT = 1400, 900  # the first screen of a laptop browser window
WHITE = 250  # a row whose every pixel is at least this bright in every channel is blank


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if path := shutil.which(name):
            return path
    sys.exit("error: no chromium on PATH; install it (Debian: apt-get install chromium) and rerun")


def screenshot(page: Path, out: Path, width: int, height: int) -> None:
    """Chromium's screenshot of `page` in a width × height window, as `out` (PNG)."""
    with tempfile.TemporaryDirectory() as profile:  # a fresh profile: no state from the user's browser
        command = [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={out}",
            page.resolve().as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not out.is_file():
        sys.exit(f"error: chromium failed on {page} (exit {done.returncode}): {done.stderr.strip()[-500:]}")


def content_height(image: Image.Image) -> int:
    """The row below the last non-white row of `image`: the height of what the page drew."""
    pixels = np.asarray(image.convert("RGB"))
    drawn = np.flatnonzero((pixels < WHITE).any(axis=(1, 2)))
    return int(drawn[-1]) + 1 if len(drawn) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path, help="the page, e.g. results/paper/REPRODUCTION.html")
    parser.add_argument("--out", type=Path, help="folder for the PNGs (default: screenshots/ beside the page)")
    parser.add_argument("--max-height", type=int, default=20000, help="the window height of the full-page shot (default 20000)")
    args = parser.parse_args(argv)
    if not args.page.is_file():
        sys.exit(f"error: no page {args.page}; write one with `python -m bench report --results RESULTS`")
    out = args.out or args.page.parent / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    first, full = out / "first_screen.png", out / "full_page.png"
    screenshot(args.page, first, WIDTH, HEIGHT)
    screenshot(args.page, full, WIDTH, args.max_height)
    with Image.open(full) as image:
        height = content_height(image)
        image.crop((0, 0, image.width, max(height, 1))).save(full)
    at_least = "at least " if height >= args.max_height else ""
    print(f"{first}\n{full}\npage height: {at_least}{height} px at {WIDTH} px wide")
    return 0


if __name__ == "__main__":
    sys.exit(main())
