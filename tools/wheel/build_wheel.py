#!/usr/bin/env python3
"""Builds shardtrace's wheel from a built binary, as auditwheel repairs one (`make wheel`).

The binary and every shared library it loads that is not in the manylinux base set (glibc's
own libraries, libgcc_s and the X11/GL/glib ones a manylinux system provides) are copied
into the package: the binary as shardtrace/_bin/shardtrace with its rpath set by patchelf to
$ORIGIN/../_libs, each library as shardtrace/_libs/<its soname> with rpath $ORIGIN.
libstdc++ is vendored too, so the wheel does not depend on the system's GCC. The glibc the
wheel needs is measured, not assumed: the highest GLIBC_x.y symbol version `objdump -T`
finds over the binary and the vendored libraries gives the tag manylinux_x_y_x86_64.
Graphviz's layout and SVG plugins are linked into the binary (CMakeLists.txt), so no plugin
directory or config file is needed. Standard library only; needs ldd, objdump, patchelf,
strip and dpkg-query (the provenance list). Prints the wheel's path.

  build_wheel.py --binary build/shardtrace --package python/shardtrace --dist dist
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import NoReturn

# The manylinux policy's libraries (PEP 600 / auditwheel's policy.json, the same set for every
# glibc tag): a manylinux system provides them, so they are never vendored. libstdc++ is in the
# policy but vendored here (its symbol versions would otherwise raise the tag's floor).
MANYLINUX_LIBS = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
    "libnsl.so.1", "libresolv.so.2", "libcrypt.so.1", "libgcc_s.so.1", "libX11.so.6",
    "libXext.so.6", "libXrender.so.1", "libICE.so.6", "libSM.so.6", "libGL.so.1",
    "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0",
}
# The dynamic loader and the kernel's vDSO: never files to copy.
LOADER = re.compile(r"^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|/lib64/ld-linux-x86-64\.so\.2)$")
SUMMARY = "Trace, check and compare how tensors and their shardings flow through MaxText's MoE layers"


def fail(message: str) -> NoReturn:
    sys.stderr.write(f"build_wheel: error: {message}\n")
    sys.exit(2)


def run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        fail(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def resolved_libraries(elf: Path) -> dict[str, Path]:
    """ldd's answer: soname -> the file it resolves to, for the whole dependency tree."""
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    done = subprocess.run(["ldd", str(elf)], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        fail(f"ldd {elf}: {done.stderr.strip() or done.stdout.strip()}")
    libs: dict[str, Path] = {}
    for line in done.stdout.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(\S+)\s+\(", line)
        if m:
            if m.group(2) == "not":
                fail(f"{elf}: {m.group(1)} is not found")
            libs[m.group(1)] = Path(m.group(2))
    return libs


def glibc_floor(files: list[Path]) -> tuple[int, int]:
    """The highest GLIBC_x.y version any of `files` needs (objdump -T, undefined and defined)."""
    best = (2, 17)
    for f in files:
        for m in re.finditer(r"\bGLIBC_(\d+)\.(\d+)(?:\.\d+)?\b", run("objdump", "-T", str(f))):
            best = max(best, (int(m.group(1)), int(m.group(2))))
    return best


def debian_package(path: Path) -> str:
    done = subprocess.run(["dpkg-query", "-S", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        real = path.resolve()
        done = subprocess.run(["dpkg-query", "-S", str(real)], capture_output=True, text=True)
    if done.returncode != 0:
        return "not from a Debian package"
    pkg = done.stdout.split(":")[0].strip()
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                             text=True).stdout.strip()
    return f"{pkg} {version}"


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, type=Path)
    parser.add_argument("--package", required=True, type=Path, help="python/shardtrace")
    parser.add_argument("--dist", required=True, type=Path)
    parser.add_argument("--notice", type=Path, help="NOTICE file shipped in the dist-info")
    args = parser.parse_args()
    for tool in ("ldd", "objdump", "patchelf", "strip"):
        if shutil.which(tool) is None:
            fail(f"{tool} is not installed (scripts/install-deps.sh installs it)")
    if not args.binary.is_file():
        fail(f"{args.binary}: no such binary (build it first)")
    version_line = run(str(args.binary), "--version").strip()
    m = re.match(r"shardtrace (\d+\.\d+\.\d+)", version_line)
    if not m:
        fail(f"{args.binary} --version printed {version_line!r}, expected 'shardtrace X.Y.Z ...'")
    version = m.group(1)

    libs = {name: path for name, path in resolved_libraries(args.binary).items()
            if name not in MANYLINUX_LIBS and not LOADER.match(name)}
    files: dict[str, tuple[bytes, int]] = {}  # archive name -> (content, mode)
    provenance = []
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp)
        exe = staged / "shardtrace"
        shutil.copyfile(args.binary, exe)
        os.chmod(exe, 0o755)
        run("strip", "--strip-unneeded", str(exe))
        run("patchelf", "--remove-rpath", str(exe))
        run("patchelf", "--force-rpath", "--set-rpath", "$ORIGIN/../_libs", str(exe))
        staged_libs = []
        for name, path in sorted(libs.items()):
            target = staged / name
            shutil.copyfile(path.resolve(), target)
            os.chmod(target, 0o755)
            run("patchelf", "--remove-rpath", str(target))
            run("patchelf", "--force-rpath", "--set-rpath", "$ORIGIN", str(target))
            staged_libs.append(target)
            provenance.append(f"{name}\t{path.resolve()}\t{debian_package(path)}")
        major, minor = glibc_floor([exe, *staged_libs])
        files["shardtrace/_bin/shardtrace"] = (exe.read_bytes(), 0o755)
        for lib in staged_libs:
            files[f"shardtrace/_libs/{lib.name}"] = (lib.read_bytes(), 0o755)

    for source in sorted(args.package.iterdir()):
        if source.is_file() and (source.suffix == ".py" or source.name == "py.typed"):
            files[f"shardtrace/{source.name}"] = (source.read_bytes(), 0o644)
    tag = f"py3-none-manylinux_{major}_{minor}_x86_64"
    info = f"shardtrace-{version}.dist-info"
    metadata = (
        "Metadata-Version: 2.1\n"
        "Name: shardtrace\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        "Requires-Python: >=3.8\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Classifier: Programming Language :: C++\n"
        "Classifier: Programming Language :: Python :: 3\n"
        "\n"
        f"shardtrace {version} ({version_line}) as a wheel: the `shardtrace` command and "
        "`import shardtrace`.\n"
        f"Needs glibc {major}.{minor} or newer on x86-64 Linux (measured with objdump -T).\n"
    )
    files[f"{info}/METADATA"] = (metadata.encode(), 0o644)
    files[f"{info}/WHEEL"] = (
        ("Wheel-Version: 1.0\nGenerator: shardtrace tools/wheel/build_wheel.py\n"
         f"Root-Is-Purelib: false\nTag: {tag}\n").encode(), 0o644)
    files[f"{info}/entry_points.txt"] = (
        b"[console_scripts]\nshardtrace = shardtrace._launcher:main\n", 0o644)
    files[f"{info}/top_level.txt"] = (b"shardtrace\n", 0o644)
    files[f"{info}/VENDORED.txt"] = (
        ("Shared libraries vendored in shardtrace/_libs (soname, the file copied, its Debian "
         "package):\n" + "\n".join(provenance) + "\n").encode(), 0o644)
    if args.notice and args.notice.is_file():
        files[f"{info}/NOTICE"] = (args.notice.read_bytes(), 0o644)
    record = [record_line(name, data) for name, (data, _) in files.items()]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = (("\n".join(record) + "\n").encode(), 0o644)

    args.dist.mkdir(parents=True, exist_ok=True)
    wheel = args.dist / f"shardtrace-{version}-{tag}.whl"
    partial = wheel.with_suffix(".whl.partial")
    # The timestamp a wheel's entries carry: SOURCE_DATE_EPOCH when set, so builds compare.
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for name, (data, mode) in files.items():
            entry = zipfile.ZipInfo(name, date_time=stamp)
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    os.replace(partial, wheel)
    for old in args.dist.glob("shardtrace-*.whl"):
        if old != wheel:
            old.unlink()
    print(wheel)


if __name__ == "__main__":
    main()
