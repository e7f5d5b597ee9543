"""Screenshots a Markdown page roughly as GitHub renders it, Mermaid graphs drawn.

The page is turned into HTML by markdown-it-py (CommonMark plus tables, raw HTML kept, so
`<details>` folds as on GitHub), styled like GitHub's 980 px markdown column, and every
```mermaid block is drawn by the mermaid.js that `mmdc` ships, scaled to the column as
GitHub scales it. Headless Chromium takes the screenshot; no network.

Usage:
  python screenshot_page.py visualizations/moe_sparse_megablox.md out.png [--height 2400]
"""

import argparse
import html
import pathlib
import shutil
import sys
import tempfile

from markdown_it import MarkdownIt

import chromium_mermaid

STYLE = """
body { margin: 0; background: #fff; color: #1f2328;
       font-family: -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif;
       font-size: 16px; line-height: 1.5; }
.markdown-body { box-sizing: border-box; max-width: 980px; margin: 0 auto; padding: 45px; }
h1, h2 { border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; }
h1 { font-size: 2em; } h2 { font-size: 1.5em; } h3 { font-size: 1.25em; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 85%; }
code { background: #eff1f3; padding: .2em .4em; border-radius: 6px; }
pre { background: #f6f8fa; padding: 16px; overflow: auto; line-height: 1.45; border-radius: 6px; }
pre code { background: none; padding: 0; font-size: 100%; }
table { border-collapse: collapse; display: block; width: max-content; max-width: 100%;
        overflow: auto; margin-bottom: 16px; }
th, td { border: 1px solid #d1d9e0; padding: 6px 13px; }
tr:nth-child(2n) { background: #f6f8fa; }
details { margin-bottom: 16px; } summary { cursor: pointer; }
.mermaid { background: #fff; border: 1px solid #d1d9e0; border-radius: 6px; padding: 8px; }
.mermaid svg { max-width: 100%; height: auto; }
"""


def to_html(markdown_text):
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    default_fence = md.renderer.rules["fence"]

    def fence(tokens, idx, options, env):
        token = tokens[idx]
        if token.info.strip() == "mermaid":
            return f'<pre class="mermaid">{html.escape(token.content)}</pre>\n'
        return default_fence(tokens, idx, options, env)

    md.renderer.rules["fence"] = fence
    return md.render(markdown_text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=2400)
    args = ap.parse_args()
    body = to_html(args.page.read_text(encoding="utf-8"))
    document = (
        '<!doctype html><html><head><meta charset="utf-8"><style>' + STYLE + "</style></head>"
        '<body><article class="markdown-body">' + body + "</article>"
        '<script src="mermaid.js"></script><script>'
        "mermaid.initialize({startOnLoad: false, maxTextSize: 1000000, maxEdges: 5000});"
        "mermaid.run({querySelector: '.mermaid'});</script></body></html>")
    with tempfile.TemporaryDirectory(prefix="page-shot-") as tmp:
        work = pathlib.Path(tmp)
        shutil.copy(chromium_mermaid.MERMAID_JS, work / "mermaid.js")
        (work / "page.html").write_text(document, encoding="utf-8")
        shot = work / "shot.png"
        chromium_mermaid.run_chromium(
            ["--hide-scrollbars", f"--window-size={args.width},{args.height}",
             "--virtual-time-budget=60000", f"--screenshot={shot}", (work / "page.html").as_uri()],
            work)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, args.out)
    print(f"wrote {args.out} ({args.width} x {args.height})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
