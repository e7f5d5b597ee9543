#!/usr/bin/env python3
"""Opens a shardtrace HTML report in Debian's headless Chromium and checks it works.

A copy of the report gets two small scripts: one first in <head> that records every
console.error, uncaught error and Content-Security-Policy violation, and one at the end of
<body>, after the report's own script, that clicks the tensor table's "bytes per device"
header (twice: ascending, then descending) and its "name" header, types a word into the
table's filter box, counts the SVGs (the flow graph's nodes, the memory chart's bars), and writes what it saw into the DOM as JSON.
`chromium --headless --dump-dom` prints that DOM; this script asserts from it that the rows
re-sorted and filtered, the SVGs are there and nothing was logged, and that Chromium's own
console log (--enable-logging=stderr) has no console message either. The network is
switched off (every host resolves to nothing), so a report that fetched anything would fail.
With --screenshots DIR it also saves the report as it opens (report-top.png) and after the
clicks and the filter (report-sorted-filtered.png, everything but the table hidden, as a
headless screenshot shows the top of the page).

Exit status: 0 passed, 1 a check failed, 77 Chromium is not installed (a skip for ctest).
Standard library only.

  check_html.py REPORT.html [--filter wi_0] [--chromium chromium] [--screenshots DIR]
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
  var out = {};
  try {
    var table = document.getElementById('tensors-table');
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var col = function (name) {
      return heads.findIndex(function (th) { return th.textContent.trim() === name; });
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
    var bytes = col('bytes per device'), name = col('name'), id = col('#');
    out.rows = table.tBodies[0].rows.length;
    out.ids_before = visible(id, true);
    click(bytes);
    out.bytes_ascending = visible(bytes, true);
    out.ids_ascending = visible(id, true);
    out.sort_state_1 = heads[bytes].getAttribute('aria-sort');
    click(bytes);
    out.bytes_descending = visible(bytes, true);
    out.sort_state_2 = heads[bytes].getAttribute('aria-sort');
    click(name);
    out.names_sorted = visible(name, false);
    var input = document.querySelector('input.filter[data-table="tensors-table"]');
    input.focus();
    input.value = FILTER_WORD;
    input.dispatchEvent(new InputEvent('input', {bubbles: true, data: FILTER_WORD, inputType: 'insertText'}));
    out.filtered_rows = Array.prototype.filter.call(table.tBodies[0].rows, function (r) { return !r.hidden; })
      .map(function (r) { return r.textContent; });
    out.count_text = document.getElementById(input.getAttribute('data-count')).textContent;
    out.svgs = document.querySelectorAll('svg').length;
    out.flow_svg_nodes = document.querySelectorAll('#flow-graph svg g.node').length;
    out.flow_svg_edges = document.querySelectorAll('#flow-graph svg g.edge').length;
    out.chart_segments = document.querySelectorAll('#summary svg.chart rect.segment').length;
    out.chart_box = (function () {
      var c = document.querySelector('#summary svg.chart');
      if (!c) return null;
      var r = c.getBoundingClientRect();
      return [r.width, r.height];
    })();
    out.details = document.querySelectorAll('details').length;
    out.details_open = document.querySelectorAll('details[open]').length;
    out.first_after_summary = (document.querySelector('#summary h2') || {}).textContent || null;
    if (SCROLL) {
      // Headless screenshots show the top of the page: everything but the table is hidden.
      Array.prototype.forEach.call(document.querySelectorAll('main > *'), function (e) {
        if (e.id !== 'tensors') e.style.display = 'none';
      });
    }
  } catch (e) {
    out.exception = String(e && e.stack || e);
  }
  out.errors = window.__probeErrors;
  var pre = document.createElement('pre');
  pre.id = 'probe-result';
  if (SCROLL) pre.style.display = 'none';
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


def probed(report: str, word: str, scroll: bool) -> str:
    head = report.find("<head>")
    body = report.rfind("</body>")
    if head < 0 or body < 0:
        raise SystemExit("check_html: FAILED: the report has no <head> or no </body>")
    tail = BODY_PROBE.replace("FILTER_WORD", json.dumps(word)).replace("SCROLL", "true" if scroll else "false")
    return report[: head + 6] + "\n" + HEAD_PROBE + report[head + 6 : body] + tail + report[body:]


def run_chromium(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--filter", default="wi_0", help="the word typed into the filter box")
    parser.add_argument("--chromium", default=None)
    parser.add_argument("--screenshots", type=Path, default=None)
    args = parser.parse_args()
    chromium = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("check_html: SKIPPED: chromium is not installed (scripts/install-deps.sh installs it)")
        return 77
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
        page.write_text(probed(report, args.filter, scroll=False), encoding="utf-8")
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
            asc, desc = seen["bytes_ascending"], seen["bytes_descending"]
            expect(rows >= 2, f"the tensor table has {rows} rows")
            expect(seen["ids_before"] == sorted(seen["ids_before"]), "rows did not start in trace order")
            expect(asc == sorted(asc) and len(asc) == rows, "bytes per device not ascending after one click")
            expect(desc == sorted(desc, reverse=True), "bytes per device not descending after a second click")
            expect(seen["ids_ascending"] != seen["ids_before"], "the rows did not move on the click")
            expect(seen["sort_state_1"] == "ascending" and seen["sort_state_2"] == "descending",
                   f"aria-sort {seen['sort_state_1']}, {seen['sort_state_2']}")
            names = seen["names_sorted"]
            expect(names == sorted(names, key=functools.cmp_to_key(natural)),
                   f"names not in natural order after a click on 'name': {names[:12]}")
            filtered = seen["filtered_rows"]
            expect(0 < len(filtered) < rows, f"the filter '{args.filter}' kept {len(filtered)} of {rows} rows")
            expect(all(args.filter.lower() in r.lower() for r in filtered),
                   f"a row without '{args.filter}' is still shown")
            expect(seen["count_text"] == f"{len(filtered)} of {rows} rows",
                   f"the row count says {seen['count_text']!r}")
            expect(seen["svgs"] >= 1, "no SVG in the report")
            expect(seen["flow_svg_nodes"] >= 2 and seen["flow_svg_edges"] >= 1,
                   f"the flow SVG has {seen['flow_svg_nodes']} nodes, {seen['flow_svg_edges']} edges")
            expect(seen["first_after_summary"] == "Summary", "the summary is not first")
            box = seen["chart_box"]
            expect(seen["chart_segments"] >= 3 and box is not None and box[0] > 100 and box[1] > 50,
                   f"the memory chart: {seen['chart_segments']} segments, laid out as {box}")
            expect(seen["details"] >= 3, f"{seen['details']} folded sections")

        if args.screenshots:
            args.screenshots.mkdir(parents=True, exist_ok=True)
            scrolled = work / "scrolled.html"
            scrolled.write_text(probed(report, args.filter, scroll=True), encoding="utf-8")
            for name, source in (("report-top.png", args.report.resolve()),
                                 ("report-sorted-filtered.png", scrolled)):
                shot = args.screenshots / name
                run_chromium(chromium_args(chromium, work / "profile")
                             + ["--window-size=1400,1000", f"--screenshot={shot}", source.as_uri()])
                expect(shot.is_file(), f"no screenshot {shot}")

    if failures:
        for f in failures:
            print(f"check_html: FAILED: {f}")
        return 1
    print(f"check_html: {args.report.name}: {seen['rows']} tensor rows sorted by bytes (both ways) "
          f"and by name, filter '{args.filter}' kept {len(seen['filtered_rows'])}, "
          f"{seen['svgs']} SVGs (flow: {seen['flow_svg_nodes']} nodes; memory chart: {seen['chart_segments']} "
          f"segments), {seen['details']} folded sections, "
          "no console message")
    return 0


if __name__ == "__main__":
    sys.exit(main())
