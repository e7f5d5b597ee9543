#!/usr/bin/env python3
"""Opens a shardtrace HTML report in Debian's headless Chromium and checks it works.

A copy of the report gets two small scripts: one first in <head> that records every
console.error, uncaught error and Content-Security-Policy violation, and one at the end of
<body>, after the report's own script, that clicks one sortable table's numeric header
(twice: ascending, then descending) and a text header, types a word into the table's filter
box, counts the elements the caller names (the flow graph's nodes, the memory chart's bars,
the plan scatter's points), and writes what it saw into the DOM as JSON. `chromium --headless
--dump-dom` prints that DOM; this script asserts from it that the rows re-sorted and
filtered, the counts are what the caller expects, the summary comes first with a laid-out SVG,
nothing was logged, and that Chromium's own console log (--enable-logging=stderr) has no
console message either. The network is switched off (every host resolves to nothing), so a
report that fetched anything would fail. With --screenshots DIR it also saves the report as
it opens (STEM-top.png) and after the clicks and the filter (STEM-sorted-filtered.png,
everything but the table's section hidden, as a headless screenshot shows the top of the
page). The defaults check render's tensor table.

Exit status: 0 passed, 1 a check failed, 77 Chromium is not installed (a skip for ctest).
Standard library only.

  check_html.py REPORT.html [--table tensors-table] [--number "bytes per device"]
      [--text name] [--order "#"] [--filter wi_0] [--rows N] [--count 'SELECTOR=N' ...]
      [--at-least 'SELECTOR=N' ...] [--contains TEXT] [--summary-heading Summary]
      [--chromium chromium] [--screenshots DIR]
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HEAD_PROBE = """<script>
window.__probeErrors = [];
(function () {
  var error = console.error;
  console.error = function () {
    window.__probeErrors.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
    return error.apply(console, arguments);
  };
  window.addEventListener('error', function (e) { window.__probeErrors.push('error: ' + e.message); });
  document.addEventListener('securitypolicyviolation', function (e) {
    window.__probeErrors.push('csp: ' + e.violatedDirective + ' ' + e.blockedURI);
  });
})();
</script>
"""

BODY_PROBE = """<script>
(function () {
  var cfg = PROBE_CONFIG;
  var out = {};
  try {
    var table = document.getElementById(cfg.table);
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var col = function (name) {
      var i = heads.findIndex(function (th) { return th.textContent.trim() === name; });
      if (i < 0) throw new Error('no column ' + JSON.stringify(name) + ' in #' + cfg.table);
      return i;
    };
    var visible = function (i, numeric) {
      return Array.prototype.filter.call(table.tBodies[0].rows, function (r) { return !r.hidden; })
        .map(function (r) {
          var c = r.cells[i];
          return numeric ? Number(c.getAttribute('data-v')) : c.textContent;
        });
    };
    var click = function (i) {
      heads[i].dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}));
    };
    var number = col(cfg.number), text = col(cfg.text), order = cfg.order ? col(cfg.order) : -1;
    out.rows = table.tBodies[0].rows.length;
    out.order_before = order >= 0 ? visible(order, true) : null;
    out.rows_before = visible(text, false);
    click(number);
    out.numbers_ascending = visible(number, true);
    out.rows_ascending = visible(text, false);
    out.sort_state_1 = heads[number].getAttribute('aria-sort');
    click(number);
    out.numbers_descending = visible(number, true);
    out.sort_state_2 = heads[number].getAttribute('aria-sort');
    click(text);
    out.texts_sorted = visible(text, false);
    var input = document.querySelector('input.filter[data-table="' + cfg.table + '"]');
    input.focus();
    input.value = cfg.word;
    input.dispatchEvent(new InputEvent('input', {bubbles: true, data: cfg.word, inputType: 'insertText'}));
    out.filtered_rows = Array.prototype.filter.call(table.tBodies[0].rows, function (r) { return !r.hidden; })
      .map(function (r) { return r.textContent; });
    out.count_text = document.getElementById(input.getAttribute('data-count')).textContent;
    out.svgs = document.querySelectorAll('svg').length;
    out.counts = {};
    cfg.selectors.forEach(function (s) { out.counts[s] = document.querySelectorAll(s).length; });
    out.summary_first = (document.querySelector('main') || {}).firstElementChild.id === 'summary';
    out.summary_text = document.getElementById('summary').textContent.replace(/\\s+/g, ' ');
    out.summary_svg_box = (function () {
      var c = document.querySelector('#summary svg');
      if (!c) return null;
      var r = c.getBoundingClientRect();
      return [r.width, r.height];
    })();
    out.details = document.querySelectorAll('details').length;
    out.details_open = document.querySelectorAll('details[open]').length;
    out.first_after_summary = (document.querySelector('#summary h2') || {}).textContent || null;
    if (cfg.scroll) {
      // Headless screenshots show the top of the page: everything but the table's section is
      // hidden, and that section unfolded.
      var section = table.closest('main > *');
      if (section.tagName === 'DETAILS') section.open = true;
      Array.prototype.forEach.call(document.querySelectorAll('main > *'), function (e) {
        if (e !== section) e.style.display = 'none';
      });
    }
  } catch (e) {
    out.exception = String(e && e.stack || e);
  }
  out.errors = window.__probeErrors;
  var pre = document.createElement('pre');
  pre.id = 'probe-result';
  if (cfg.scroll) pre.style.display = 'none';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""

NO_NETWORK = ["--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://0.0.0.0:1"]


def natural(a: str, b: str) -> int:
    """The report's text order (templates/report.html.mustache, natural()): case-insensitive,
    runs of digits as numbers, everything else by code point."""
    x, y = re.findall(r"\d+|\D+", a.lower()), re.findall(r"\d+|\D+", b.lower())
    for p, q in zip(x, y):
        if p[0].isdigit() and q[0].isdigit():
            r = int(p) - int(q)
        else:
            r = (p > q) - (p < q)
        if r:
            return r
    return len(x) - len(y)


def chromium_args(chromium: str, profile: Path) -> list[str]:
    return [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
            "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
            "--disable-dev-shm-usage", f"--user-data-dir={profile}", *NO_NETWORK]


def probed(report: str, config: dict, scroll: bool) -> str:
    head = report.find("<head>")
    body = report.rfind("</body>")
    if head < 0 or body < 0:
        raise SystemExit("check_html: FAILED: the report has no <head> or no </body>")
    tail = BODY_PROBE.replace("PROBE_CONFIG", json.dumps(dict(config, scroll=scroll)))
    return report[: head + 6] + "\n" + HEAD_PROBE + report[head + 6 : body] + tail + report[body:]


def run_chromium(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def selector_counts(specs: list[str], flag: str) -> dict[str, int]:
    """'SELECTOR=N' -> {SELECTOR: N} (the last '=' splits: selectors may hold '=')."""
    out = {}
    for spec in specs:
        selector, _, n = spec.rpartition("=")
        if not selector or not n.isdigit():
            raise SystemExit(f"check_html: {flag} {spec!r}: expected SELECTOR=N")
        out[selector] = int(n)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--table", default="tensors-table", help="the sortable table's id")
    parser.add_argument("--number", default="bytes per device", help="a numeric column clicked twice")
    parser.add_argument("--text", default="name", help="a text column clicked once (natural order)")
    parser.add_argument("--order", default="#", help="a numeric column the rows start sorted by ('' for none)")
    parser.add_argument("--filter", default="wi_0", help="the word typed into the filter box")
    parser.add_argument("--rows", type=int, default=None, help="the table's exact number of rows")
    parser.add_argument("--count", action="append", default=[], help="SELECTOR=N: exactly N elements")
    parser.add_argument("--at-least", action="append", default=[], help="SELECTOR=N: N elements or more")
    parser.add_argument("--contains", action="append", default=[], help="a text the summary holds")
    parser.add_argument("--summary-heading", default=None, help="the summary's first <h2>")
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--screenshots", type=Path, default=None)
    args = parser.parse_args()
    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("check_html: SKIPPED: chromium is not installed (scripts/install-deps.sh installs it)")
        return 77
    exact = selector_counts(args.count, "--count")
    minimum = selector_counts(args.at_least, "--at-least")
    config = {"table": args.table, "number": args.number, "text": args.text, "order": args.order,
              "word": args.filter, "selectors": sorted(set(exact) | set(minimum))}
    report = args.report.read_text(encoding="utf-8")
    failures: list[str] = []

    def expect(ok: bool, what: str) -> None:
        if not ok:
            failures.append(what)

    # Self-contained: nothing the page could fetch.
    for pattern in (r"<(script|img|link|iframe)[^>]+(src|href)=\"(?!data:|#)", r"url\((?!data:|#)",
                    r"@import", r"<link\b"):
        m = re.search(pattern, report)
        expect(m is None, f"the report may load something: {m.group(0) if m else ''!r}")
    expect("Content-Security-Policy" in report, "no Content-Security-Policy in the report")

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        page = work / "probed.html"
        page.write_text(probed(report, config, scroll=False), encoding="utf-8")
        done = run_chromium(chromium_args(chromium, work / "profile")
                            + ["--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()])
        m = re.search(r'<pre id="probe-result">(.*?)</pre>', done.stdout, re.S)
        if done.returncode != 0 or not m:
            print(f"check_html: FAILED: chromium exited {done.returncode} without the probe's "
                  f"result; stderr:\n{done.stderr[-3000:]}")
            return 1
        seen = json.loads(html.unescape(m.group(1)))
        console = [l for l in done.stderr.splitlines() if ":CONSOLE" in l]
        expect(not console, f"Chromium logged console messages: {console[:5]}")
        expect("exception" not in seen, f"the probe threw: {seen.get('exception')}")
        expect(not seen.get("errors"), f"errors on the page: {seen.get('errors')}")
        if "exception" not in seen:
            rows = seen["rows"]
            asc, desc = seen["numbers_ascending"], seen["numbers_descending"]
            expect(rows >= 2, f"#{args.table} has {rows} rows")
            expect(args.rows is None or rows == args.rows, f"#{args.table} has {rows} rows, expected {args.rows}")
            if seen["order_before"] is not None:
                expect(seen["order_before"] == sorted(seen["order_before"]),
                       f"rows did not start in '{args.order}' order")
            expect(asc == sorted(asc) and len(asc) == rows, f"'{args.number}' not ascending after one click")
            expect(desc == sorted(desc, reverse=True), f"'{args.number}' not descending after a second click")
            expect(seen["rows_ascending"] != seen["rows_before"], "the rows did not move on the click")
            expect(seen["sort_state_1"] == "ascending" and seen["sort_state_2"] == "descending",
                   f"aria-sort {seen['sort_state_1']}, {seen['sort_state_2']}")
            texts = seen["texts_sorted"]
            expect(texts == sorted(texts, key=functools.cmp_to_key(natural)),
                   f"'{args.text}' not in natural order after a click on it: {texts[:12]}")
            filtered = seen["filtered_rows"]
            expect(0 < len(filtered) < rows, f"the filter '{args.filter}' kept {len(filtered)} of {rows} rows")
            expect(all(args.filter.lower() in r.lower() for r in filtered),
                   f"a row without '{args.filter}' is still shown")
            expect(seen["count_text"] == f"{len(filtered)} of {rows} rows",
                   f"the row count says {seen['count_text']!r}")
            expect(seen["svgs"] >= 1, "no SVG in the report")
            for selector, n in exact.items():
                expect(seen["counts"][selector] == n, f"{seen['counts'][selector]} x '{selector}', expected {n}")
            for selector, n in minimum.items():
                expect(seen["counts"][selector] >= n, f"{seen['counts'][selector]} x '{selector}', expected >= {n}")
            expect(seen["summary_first"], "the summary is not first")
            for text in args.contains:
                expect(text in seen["summary_text"], f"the summary does not say {text!r}")
            if args.summary_heading is not None:
                expect(seen["first_after_summary"] == args.summary_heading,
                       f"the summary's heading is {seen['first_after_summary']!r}")
            box = seen["summary_svg_box"]
            expect(box is not None and box[0] > 100 and box[1] > 50, f"the summary's SVG is laid out as {box}")
            expect(seen["details"] >= 3, f"{seen['details']} folded sections")

        if args.screenshots:
            args.screenshots.mkdir(parents=True, exist_ok=True)
            scrolled = work / "scrolled.html"
            scrolled.write_text(probed(report, config, scroll=True), encoding="utf-8")
            stem = args.report.stem
            for name, source in ((f"{stem}-top.png", args.report.resolve()),
                                 (f"{stem}-sorted-filtered.png", scrolled)):
                shot = args.screenshots / name
                run_chromium(chromium_args(chromium, work / "profile")
                             + ["--window-size=1400,1000", f"--screenshot={shot}", source.as_uri()])
                expect(shot.is_file(), f"no screenshot {shot}")

    if failures:
        for f in failures:
            print(f"check_html: FAILED: {args.report.name}: {f}")
        return 1
    counted = ", ".join(f"{n} x '{s}'" for s, n in seen["counts"].items())
    print(f"check_html: {args.report.name}: {seen['rows']} rows of #{args.table} sorted by "
          f"'{args.number}' (both ways) and '{args.text}', filter '{args.filter}' kept "
          f"{len(seen['filtered_rows'])}, {seen['svgs']} SVGs ({counted or 'no counts asked'}), "
          f"{seen['details']} folded sections, no console message")
    return 0


if __name__ == "__main__":
    sys.exit(main())
