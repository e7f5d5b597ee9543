"""Lays Mermaid diagrams out with mermaid.js in Debian's headless Chromium.

The QuickJS engine of the `mmdc` package parses Mermaid but cannot lay a flowchart out the
way a browser does (no real DOM or text metrics), so sizes come from here: a local HTML page
loads the mermaid.js that `mmdc` ships (mmdc/assets/mermaid.js, the same file GitHub-era
mermaid 11), renders every diagram with mermaid.render, and writes each SVG's viewBox (and
the SVG itself) into the page, which `chromium --headless --dump-dom` prints. No network:
the page and the script are files in a temporary directory.
"""

import html
import json
import pathlib
import re
import shutil
import subprocess
import tempfile

import mmdc

MERMAID_JS = pathlib.Path(mmdc.__file__).parent / "assets" / "mermaid.js"

# The page: every diagram rendered in turn; the results as JSON in <pre id="result">.
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"></head><body>
<pre id="result">pending</pre>
<script src="mermaid.js"></script>
<script>
const diagrams = __DIAGRAMS__;
mermaid.initialize({startOnLoad: false, securityLevel: 'strict', maxTextSize: 1000000,
                    maxEdges: 5000});
(async () => {
  const out = [];
  for (let i = 0; i < diagrams.length; ++i) {
    try {
      const {svg} = await mermaid.render('graph' + i, diagrams[i]);
      const holder = document.createElement('div');
      holder.innerHTML = svg;
      const box = holder.querySelector('svg').getAttribute('viewBox').split(/[ ,]+/).map(Number);
      // XMLSerializer, not mermaid's string: its HTML labels hold <br> a .svg file cannot.
      const xml = new XMLSerializer().serializeToString(holder.querySelector('svg'));
      out.push({width: box[2], height: box[3], svg: xml});
    } catch (e) {
      out.push({error: String(e && e.message || e)});
    }
  }
  document.getElementById('result').textContent = JSON.stringify(out);
})();
</script>
</body></html>
"""


def chromium():
    """The Chromium binary, or None."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(args, workdir, timeout=300):
    """Runs headless Chromium with a throwaway profile; returns its stdout."""
    binary = chromium()
    if binary is None:
        raise RuntimeError("chromium not found (Debian: apt-get install chromium)")
    profile = pathlib.Path(workdir) / "profile"
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-extensions", "--disable-background-networking",
           f"--user-data-dir={profile}"] + args
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.stdout


def layout(diagrams, budget_ms=120000):
    """One dict per diagram: width and height (the SVG viewBox, px) and svg, or error."""
    if not diagrams:
        return []
    with tempfile.TemporaryDirectory(prefix="mermaid-layout-") as tmp:
        work = pathlib.Path(tmp)
        shutil.copy(MERMAID_JS, work / "mermaid.js")
        # '</' inside a script block would end it; JSON allows the escape.
        data = json.dumps(diagrams).replace("</", "<\\/")
        (work / "page.html").write_text(PAGE.replace("__DIAGRAMS__", data), encoding="utf-8")
        dom = run_chromium([f"--virtual-time-budget={budget_ms}", "--dump-dom",
                            (work / "page.html").as_uri()], work)
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    if not found or found.group(1) == "pending":
        raise RuntimeError("mermaid did not finish in Chromium's time budget")
    results = json.loads(html.unescape(found.group(1)))
    if len(results) != len(diagrams):
        raise RuntimeError(f"{len(results)} results for {len(diagrams)} diagrams")
    return results
