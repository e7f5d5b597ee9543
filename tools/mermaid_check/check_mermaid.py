"""Checks the Mermaid blocks of markdown files with mermaid.js itself.

Every ```mermaid block of the given files (or a whole .mmd file) is parsed by the real
mermaid.js parser (mermaid.parse), run in the QuickJS engine the `mmdc` package embeds, so
no Node.js or browser is needed for that. Layout needs a browser (QuickJS has no DOM to
measure text in): with --layout every diagram is laid out by the same mermaid.js in Debian's
headless Chromium (chromium_mermaid.py) and its width checked against --max-width (1600 px,
what reads inline on GitHub); with --render DIR each laid-out SVG is written as
DIR/<file>-<n>.svg, to look at. Exit status 1 when any block fails to parse or lay out, or
is too wide.

Usage (see the Makefile target mermaid-check, which sets up the pinned venv):
  python check_mermaid.py visualizations/*.md [--layout] [--render build/mermaid]
"""

import argparse
import pathlib
import re
import sys

from mmdc import diagram as mmdc_diagram

import chromium_mermaid

BLOCK = re.compile(r"^```mermaid\n(.*?)^```$", re.M | re.S)


def blocks(path):
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".mmd":
        return [text]
    return BLOCK.findall(text)


def parse(engine, code):
    """Returns None when mermaid.parse accepts `code`, else its error message."""

    def run():
        ctx = engine._ctx
        ctx.set("__code", code)
        ctx.eval(
            "globalThis.__parseError = null; globalThis.__parseDone = false;\n"
            "mermaid.parse(__code).then(() => { globalThis.__parseDone = true; })\n"
            "  .catch(e => { globalThis.__parseError = String(e && e.message || e); });\n")
        engine._pump_jobs()
        err = ctx.eval("globalThis.__parseError")
        if err:
            return str(err)
        if not ctx.eval("globalThis.__parseDone"):
            return "mermaid.parse did not finish"
        return None

    return engine._executor.submit(run).result()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=pathlib.Path)
    ap.add_argument("--layout", action="store_true",
                    help="lay every diagram out with mermaid.js in headless Chromium and fail "
                         "when one is wider than --max-width")
    ap.add_argument("--max-width", type=float, default=1600,
                    help="widest laid-out diagram allowed, in px (default 1600)")
    ap.add_argument("--render", type=pathlib.Path,
                    help="also write each diagram as laid out in Chromium, DIR/<file>-<n>.svg")
    args = ap.parse_args()
    engine = mmdc_diagram._get_engine()
    failures = checked = 0
    parsed = []  # (path, n, code) of every block mermaid.parse accepts
    for path in args.files:
        for n, code in enumerate(blocks(path)):
            checked += 1
            err = parse(engine, code)
            if err:
                failures += 1
                print(f"FAIL {path} block {n}: {err.splitlines()[0]}")
                for line in err.splitlines()[1:4]:
                    print(f"     {line}")
                continue
            parsed.append((path, n, code))
            if not (args.layout or args.render):
                print(f"ok   {path} block {n} ({len(code.splitlines())} lines)")
    print(f"{checked - failures} of {checked} Mermaid blocks parse")
    if args.layout or args.render:
        # The layout mermaid.js computes in a browser: QuickJS's fake DOM cannot measure text.
        results = chromium_mermaid.layout([code for _, _, code in parsed])
        wide = 0
        for (path, n, code), result in zip(parsed, results):
            if "error" in result:
                failures += 1
                print(f"FAIL {path} block {n}: not laid out: {result['error'].splitlines()[0]}")
                continue
            too_wide = args.layout and result["width"] > args.max_width
            wide += too_wide
            print(f"{'WIDE' if too_wide else 'ok  '} {path} block {n} "
                  f"({len(code.splitlines())} lines): "
                  f"{result['width']:.0f} x {result['height']:.0f} px")
            if args.render:
                args.render.mkdir(parents=True, exist_ok=True)
                out = args.render / f"{path.stem}-{n}.svg"
                out.write_text(result["svg"], encoding="utf-8")
        if args.layout:
            print(f"{len(parsed) - wide} of {len(parsed)} laid out within "
                  f"{args.max_width:.0f} px")
        failures += wide
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
