"""Checks the Mermaid blocks of markdown files with mermaid.js itself.

Every ```mermaid block of the given files (or a whole .mmd file) is parsed by the real
mermaid.js parser (mermaid.parse), run in the QuickJS engine the `mmdc` package embeds, so
no Node.js or browser is needed. With --render DIR each diagram is also laid out and
written as DIR/<file>-<n>.svg, to look at. Exit status 1 when any block fails to parse.

Usage (see the Makefile target mermaid-check, which sets up the pinned venv):
  python check_mermaid.py visualizations/*.md [--render build/mermaid]
"""

import argparse
import pathlib
import re
import sys

from mmdc import diagram as mmdc_diagram

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
    ap.add_argument("--render", type=pathlib.Path, help="also write each diagram as SVG here")
    args = ap.parse_args()
    engine = mmdc_diagram._get_engine()
    if args.render:
        # mermaid's label wrapping asks Intl.Segmenter for graphemes; QuickJS has no Intl.
        # A code-point segmenter is enough for a preview (labels are ASCII plus arrows).
        engine._executor.submit(lambda: engine._ctx.eval(
            "if (typeof Intl === 'undefined') globalThis.Intl = { Segmenter: class {"
            " segment(s) { return Array.from(s).map((c, i) => ({segment: c, index: i})); } } };"
        )).result()
    failures = checked = 0
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
            print(f"ok   {path} block {n} ({len(code.splitlines())} lines)")
            if args.render:
                args.render.mkdir(parents=True, exist_ok=True)
                out = args.render / f"{path.stem}-{n}.svg"
                try:
                    out.write_text(mmdc_diagram.Diagram(code).svg(), encoding="utf-8")
                except RuntimeError as e:  # layout trouble in the embedded engine, not syntax
                    print(f"     (not rendered: {str(e).splitlines()[0]})")
    print(f"{checked - failures} of {checked} Mermaid blocks parse")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
