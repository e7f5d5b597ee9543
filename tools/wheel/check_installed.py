#!/usr/bin/env python3
"""Checks an installed shardtrace wheel, run with the virtual environment's python.

test_wheel.sh installs the wheel into a fresh venv and runs this there. It checks the
`shardtrace` console command (on PATH, from the venv), that every library the vendored
binary and the vendored libraries resolve to (ldd, LD_LIBRARY_PATH unset) is either in the
wheel or in the manylinux base set (so the system's Graphviz, OpenBLAS, yaml-cpp, ... are
never used), SVG output (also with the system's copies of the vendored libraries and
Graphviz's plugins hidden in a mount namespace, where user namespaces are allowed), and every
function of the Python API against the embedded configs and a golden case, with values,
warnings, errors and wrong Python types: `fit` against the CLI's JSON of the same config,
`plan` on a small space (Mixtral with 2 layers on v5p-8) whose fastest config's peak memory
must equal `fit`'s for the same overrides. Standard library and the installed package only.

  check_installed.py --wheel dist/shardtrace-*.whl --golden testdata/goldens/sparse_ep2_mixtral \
      --out DIR
"""

from __future__ import annotations

import argparse
import os
import re
import json
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_wheel import LOADER, MANYLINUX_LIBS  # noqa: E402

import shardtrace  # noqa: E402  (the installed package, not the source tree)

FAILURES: List[str] = []
MIXTRAL = dict(model_name="mixtral-8x7b", ici_expert_parallelism=4)


def expect(ok: bool, what: str) -> None:
    if not ok:
        FAILURES.append(what)
        print(f"check_installed: FAILED: {what}")


def expect_error(call: Callable[[], Any], kind: type, status: int, *words: str) -> None:
    """`call` raises `kind` with exit status `status`, one line naming every word."""
    try:
        call()
    except kind as e:  # type: ignore[misc]
        message = str(getattr(e, "message", e))
        expect(getattr(e, "status", None) == status, f"{message!r}: status {getattr(e, 'status', None)}, expected {status}")
        expect("\n" not in message, f"the error is not one line: {message!r}")
        for w in words:
            expect(w in message, f"the error {message!r} does not name {w!r}")
        return
    except Exception as e:  # noqa: BLE001
        expect(False, f"expected {kind.__name__}, got {type(e).__name__}: {e}")
        return
    expect(False, f"expected {kind.__name__}, nothing was raised")


def check_install(wheel: Path) -> None:
    exe = shutil.which("shardtrace")
    venv_bin = Path(sys.executable).parent
    expect(exe is not None and Path(exe).parent == venv_bin, f"`shardtrace` on PATH is {exe}, expected in {venv_bin}")
    version = subprocess.run(["shardtrace", "--version"], capture_output=True, text=True)
    expect(version.returncode == 0 and version.stdout.startswith("shardtrace "), f"--version: {version.stdout!r}")
    expect(version.stdout.split()[1] in wheel.name, f"the wheel {wheel.name} is not version {version.stdout.split()[1]}")
    package = Path(shardtrace.__file__).resolve().parent
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    expect(package.parent == site, f"import shardtrace found {package}, not the venv's {site}")
    binary = Path(shardtrace.binary())
    expect(binary == package / "_bin" / "shardtrace", f"the API runs {binary}")
    libs = sorted((package / "_libs").iterdir())
    expect(any(l.name.startswith("libgvc.") for l in libs), "libgvc is not vendored")
    for elf in [binary, *libs]:
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        out = subprocess.run(["ldd", str(elf)], capture_output=True, text=True, env=env).stdout
        for line in out.splitlines():
            m = re.match(r"\s*(\S+)\s+=>\s+(\S+)", line)
            if not m or LOADER.match(m.group(1)):
                continue
            name, where = m.group(1), m.group(2)
            inside = where != "not" and Path(where).resolve().parent == (package / "_libs").resolve()
            expect(inside or name in MANYLINUX_LIBS,
                   f"{elf.name} resolves {name} to {where}: neither the wheel's nor the manylinux base set's")
    print(f"check_installed: {binary.name} and {len(libs)} vendored libraries resolve only to the wheel "
          "and the manylinux base set")


def check_cli(out: Path) -> None:
    svg = subprocess.run(["shardtrace", "trace", *[f"{k}={v}" for k, v in MIXTRAL.items()], "--devices", "8",
                          "--format", "svg"], capture_output=True, text=True)
    expect(svg.returncode == 0, f"trace --format svg exited {svg.returncode}: {svg.stderr.strip()}")
    expect("<svg" in svg.stdout and "class=\"node\"" in svg.stdout and "wi_0" in svg.stdout,
           "trace --format svg printed no laid-out graph")
    page = out / "mixtral.html"
    html = subprocess.run(["shardtrace", "render", "model_name=mixtral-8x7b", "ici_expert_parallelism=4",
                           "--devices", "8", "--format", "html", "-o", str(page)], capture_output=True, text=True)
    expect(html.returncode == 0 and page.is_file(), f"render --format html: {html.stderr.strip()}")
    text = page.read_text(encoding="utf-8") if page.is_file() else ""
    expect(text.startswith("<!DOCTYPE html>") and "<svg" in text and 'id="tensors-table"' in text,
           "the HTML report lacks the doctype, the SVG or the tensor table")
    fit_page = out / "fit.html"
    fit = subprocess.run(["shardtrace", "fit", "model_name=mixtral-8x7b", "compile_topology=v5p-64", "--format", "html",
                          "-o", str(fit_page)], capture_output=True, text=True)
    fit_text = fit_page.read_text(encoding="utf-8") if fit_page.is_file() else ""
    expect(fit.returncode == 0 and '<svg id="memory-chart"' in fit_text and 'id="params-table"' in fit_text,
           f"fit --format html: exit {fit.returncode}, {fit.stderr.strip()}; chart or parameter table missing")
    print(f"check_installed: CLI: svg ({len(svg.stdout)} bytes), render --format html ({len(text)} bytes), "
          f"fit --format html ({len(fit_text)} bytes)")


HIDE = r"""
set -e
plugins=$1
shift
while read -r file; do mount --bind /dev/null "$file"; done <<EOF_FILES
$HIDDEN_FILES
EOF_FILES
if [ -d "$plugins" ]; then mount -t tmpfs none "$plugins"; fi
exec "$@"
"""


def check_hidden_system_libraries() -> None:
    """The vendored binary renders SVG with the system's copies of every library the wheel
    vendors hidden (in a mount namespace each is an empty file, and Graphviz's plugin
    directory is empty): what a machine without those Debian packages has. The binary is run
    directly, as the venv's python itself loads the system's libexpat and libz. Skipped (said
    so) where user namespaces are not allowed."""
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        print("check_installed: hidden system libraries: skipped (no user namespaces here; the ldd check stands)")
        return
    vendored = [f for f in (metadata.files("shardtrace") or []) if f.name == "VENDORED.txt"]
    expect(len(vendored) == 1, "the installed wheel has no VENDORED.txt")
    if not vendored:
        return
    sources = [line.split("\t")[1] for line in vendored[0].read_text().splitlines()[1:] if "\t" in line]
    hidden = sorted({str(Path(p).resolve()) for p in sources if Path(p).exists()})
    plugins = "/usr/lib/x86_64-linux-gnu/graphviz"
    args = [shardtrace.binary(), "trace", *[f"{k}={v}" for k, v in MIXTRAL.items()], "--devices", "8",
            "--format", "svg"]
    env = dict(os.environ, HIDDEN_FILES="\n".join(hidden))
    done = subprocess.run(["unshare", "-rm", "sh", "-c", HIDE, "sh", plugins, *args], capture_output=True,
                          text=True, env=env)
    nodes = done.stdout.count('class="node"')
    expect(done.returncode == 0 and nodes > 10,
           f"with the system's libraries hidden: exit {done.returncode}, {nodes} nodes; {done.stderr.strip()[:300]}")
    print(f"check_installed: with the system's copies of the {len(hidden)} vendored libraries and Graphviz's "
          f"plugins hidden, the vendored binary's svg has {nodes} nodes")


def tensor(result: Dict[str, Any], name: str) -> Dict[str, Any]:
    found = [t for t in result["tensors"] if t["name"] == name]
    expect(bool(found), f"no tensor {name!r} in the trace")
    return found[0] if found else {}


def check_api(golden: Path, out: Path, base: Path) -> None:
    # trace: Mixtral 8x7B (E=8, M=4096, H=14336) on fsdp=2 x expert=4.
    t = shardtrace.trace(**MIXTRAL, devices=8)
    expect(t["devices"] == 8 and t["warnings"] == [] and t["exit_status"] == 0, f"trace: {t['devices']}, {t['warnings']}")
    expect(t["path"].startswith("sparse_matmul/ragged_all_to_all"), f"trace path {t['path']!r}")
    wi_0 = tensor(t, "wi_0")
    expect(wi_0.get("shape") == [8, 4096, 14336], f"wi_0 shape {wi_0.get('shape')}")
    expect(wi_0.get("local_shape") == [2, 2048, 14336], f"wi_0 per device {wi_0.get('local_shape')}")
    expect(wi_0.get("bytes_per_device") == 2 * 2048 * 14336 * 4, f"wi_0 bytes {wi_0.get('bytes_per_device')}")
    kinds = {c["kind"] for c in t["totals"]["collectives"]}
    expect(any("ragged_all_to_all" in k for k in kinds), f"collectives {kinds}")
    # Keyword values: bools as true/false, numbers as numbers.
    dense = shardtrace.trace(model_name="mixtral-8x7b", sparse_matmul=False, capacity_factor=1.25,
                             ici_expert_parallelism=4, devices=8)
    expect(dense["path"].startswith("dense_matmul"), f"sparse_matmul=False gave path {dense['path']!r}")
    numeric = shardtrace.trace(base_emb_dim=16, base_mlp_dim=32, base_moe_mlp_dim=32, num_experts=8,
                               num_experts_per_tok=2, max_target_length=8, per_device_batch_size=1,
                               decoder_block="mixtral", dtype="float32", ici_expert_parallelism=4,
                               devices=8, numeric=True, seed=1)
    out_tensor = [x for x in numeric["tensors"] if x.get("summary")]
    expect(bool(out_tensor), "a numeric trace carries no value summaries")

    # warnings come back in the result.
    dup = out / "dup.yml"
    dup.write_text(f"base_config: \"{base}\"\nmodel_name: mixtral-8x7b\n"
                   "ici_expert_parallelism: 2\nici_expert_parallelism: 4\n")
    w = shardtrace.trace(dup, devices=8)
    expect(len(w["warnings"]) == 1 and "repeats the one on line 3" in w["warnings"][0], f"warnings {w['warnings']}")
    expect(w["mesh"] == t["mesh"], f"the later ici_expert_parallelism was not used: {w['mesh']}")

    # check: a golden case passes; diff: EP=1 vs EP=4 differ.
    c = shardtrace.check(golden)
    expect(c["passed"] is True and c["exit_status"] == 0, f"check {golden.name}: {c.get('exit_status')}")
    d = shardtrace.diff(model_name="mixtral-8x7b", devices=8, a={"ici_expert_parallelism": 1},
                        b={"ici_expert_parallelism": 4})
    expect(d["same"] is False and d["exit_status"] == 1, f"diff EP=1 vs EP=4: same={d['same']}")
    same = shardtrace.diff(model_name="mixtral-8x7b", devices=8, a={"ici_expert_parallelism": 4},
                           b={"ici_expert_parallelism": 4})
    expect(same["same"] is True, "diff of a config with itself differs")

    # render: Markdown returned; HTML written with output= and returned.
    md = shardtrace.render(**MIXTRAL, devices=8)
    expect(isinstance(md, str) and "# mixtral-8x7b: sparse_matmul/ragged_all_to_all" in md, "render's markdown title")
    expect("## Summary" in md and md.warnings == [], "render's markdown summary or warnings")
    page = shardtrace.render(**MIXTRAL, devices=8, format="html", output=out / "api.html")
    expect(page.path == str(out / "api.html") and (out / "api.html").read_text(encoding="utf-8") == page,
           "render(output=) did not write the page it returned")
    expect('<table class="sortable" id="tensors-table">' in page and "<svg" in page, "render html content")

    # Errors: the CLI's one line and status; wrong Python types before the binary runs.
    expect_error(lambda: shardtrace.trace(model_name="no-such-model"), shardtrace.ShardtraceError, 2, "no-such-model")
    expect_error(lambda: shardtrace.trace(model_name="mixtral-8x7b", num_expert=8), shardtrace.ShardtraceError, 2,
                 "num_expert", "did you mean")
    expect_error(lambda: shardtrace.trace(devices="x"), shardtrace.ShardtraceTypeError, 2, "devices", "positive int")
    expect_error(lambda: shardtrace.trace(devices="x"), TypeError, 2, "devices")
    expect_error(lambda: shardtrace.trace(rules={"a": 1}), shardtrace.ShardtraceTypeError, 2, "rules", "dict")
    expect_error(lambda: shardtrace.trace(model_name=None), shardtrace.ShardtraceTypeError, 2, "model_name")
    expect_error(lambda: shardtrace.render(format="pdf"), shardtrace.ShardtraceTypeError, 2, "format", "html")
    expect_error(lambda: shardtrace.diff(a=["x=1"]), shardtrace.ShardtraceTypeError, 2, "a", "mapping")
    expect_error(lambda: shardtrace.trace(42), shardtrace.ShardtraceTypeError, 2, "configs[0]")

    # fit: the issue's own example, against the installed CLI's JSON of the same config.
    def check_fit() -> None:
        f = shardtrace.fit(model_name="mixtral-8x7b", compile_topology="v5p-64")
        cli = json.loads(subprocess.run([shardtrace.binary(), "fit", "model_name=mixtral-8x7b", "compile_topology=v5p-64",
                                         "--format", "json"], capture_output=True, text=True, check=True).stdout)
        expect(f["fits"] is True and f["devices"] == 32, f"fit(): fits {f['fits']!r} on {f['devices']} devices")
        for key in ("argument_size_in_bytes", "temp_size_in_bytes", "peak_memory_in_bytes", "hbm_bytes"):
            expect(f[key] == cli[key] and f[key] > 0, f"fit()[{key!r}] {f[key]} != the CLI's {cli[key]}")
        expect_error(lambda: shardtrace.fit(model_name="mixtral-8x7b", compile_topology="v5p-7"),
                     shardtrace.ShardtraceError, 2, "compile_topology", "v5p-7")

    # plan: Mixtral with 2 layers on v5p-8 (4 devices: 10 meshes x 11 remat policies x 2 matmuls, a second),
    # its fastest config held to fit() of the same overrides.
    small = dict(model_name="mixtral-8x7b", override_model_config=True, base_num_decoder_layers=2,
                 compile_topology="v5p-8", compile_topology_num_slices=1, per_device_batch_size=4,
                 max_target_length=2048)
    p = shardtrace.plan(base, flags=["--quiet"], **small)
    expect(p["exit_status"] == 0 and p["warnings"] == [], f"plan(): exit {p['exit_status']}, {p['warnings']}")
    expect(p["evaluated"] == 220, f"plan() evaluated {p['evaluated']} configs, expected 220")
    expect(0 < p["fitting"] <= p["evaluated"]
           and p["fitting"] + p["not_fitting"] + len(p["excluded"]) == p["evaluated"],
           f"plan(): {p['fitting']} fit, {p['not_fitting']} do not, {len(p['excluded'])} excluded "
           f"of {p['evaluated']}")
    configs = p["configs"]
    expect(len(configs) == min(10, p["fitting"]), f"plan() lists {len(configs)} configs (--top 10)")
    speeds = [c["tokens_per_second_per_device"] for c in configs]
    expect(speeds == sorted(speeds, reverse=True), f"plan()'s configs are not fastest first: {speeds}")
    if configs:
        first = configs[0]
        overrides = dict(o.split("=", 1) for o in first["overrides"])
        f = shardtrace.fit(base, **small, **overrides)
        expect(first["fits"] is True and f["fits"] is True, f"plan()'s first config: fits {first['fits']}, fit() {f['fits']}")
        for key in ("peak_memory_in_bytes", "argument_size_in_bytes", "temp_size_in_bytes", "headroom_bytes"):
            expect(first[key] == f[key] and f["peak_memory_in_bytes"] > 0,
                   f"plan()'s first config {key} {first[key]} != fit()'s {f[key]} for {first['overrides']}")
        print(f"check_installed: plan: {p['fitting']} of {p['evaluated']} fit; the fastest "
              f"({' '.join(first['overrides'])}) peaks at {first['peak_memory_in_bytes']} bytes, as fit() says")
    expect_error(lambda: shardtrace.plan(model_name="mixtral-8x7b", devices=8), shardtrace.ShardtraceError, 2,
                 "--devices", "compile_topology")

    check_fit()
    print("check_installed: API: trace (symbolic, dense, numeric, warnings), check, diff, render (markdown, html), "
          "fit, plan, errors and wrong types")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", required=True, type=Path)
    parser.add_argument("--golden", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.golden.resolve().parent.parent / "maxtext-moe-models" / "configs" / "base.yml"
    check_install(args.wheel)
    check_cli(args.out)
    check_hidden_system_libraries()
    check_api(args.golden, args.out, base)
    if FAILURES:
        print(f"check_installed: {len(FAILURES)} checks failed")
        return 1
    print("check_installed: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
