"""shardtrace from Python: the CLI's commands as functions that return its JSON.

Every function runs the ``shardtrace`` binary vendored in this package (or the one named by
the ``SHARDTRACE_BINARY`` environment variable) with MaxText's own argument style: config
files first, then ``key=value`` overrides, here given as keyword arguments::

    import shardtrace
    t = shardtrace.trace(model_name="mixtral-8x7b", ici_expert_parallelism=4, devices=8)
    print(t["path"], t["totals"]["weight_bytes_per_device"])

A keyword's value becomes the override's text: ``True``/``False`` as ``true``/``false``,
numbers as Python prints them, strings as they are, a list or tuple of those as
``[a,b]``. Anything else (a dict, ``None``, an object) raises :class:`ShardtraceTypeError`
before the binary runs, naming the argument.

Bad input raises :class:`ShardtraceError` with the CLI's one-line message (without the
``shardtrace: error:`` prefix) and its exit status (2 bad input, 3 internal error). The
``shardtrace: warning:`` lines the CLI prints come back in the result: ``result["warnings"]``
(a list of strings, after the warnings the JSON itself carries, such as a trace's "MaxText
computes other experts on this mesh"; for :func:`render`, the returned page's ``.warnings``).
"""

from __future__ import annotations

import json
import os
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = [
    "Page",
    "ShardtraceError",
    "ShardtraceTypeError",
    "binary",
    "check",
    "diff",
    "fit",
    "json_command",
    "plan",
    "render",
    "run",
    "trace",
]

try:
    __version__ = metadata.version("shardtrace")
except metadata.PackageNotFoundError:  # the source tree, not an installed wheel
    __version__ = "0+unknown"

PathLike = Union[str, "os.PathLike[str]"]
Scalar = Union[bool, int, float, str]
Override = Union[Scalar, Sequence[Scalar]]

_ERROR = "shardtrace: error: "
_INTERNAL = "shardtrace: internal error"
_WARNING = "shardtrace: warning: "


class ShardtraceError(Exception):
    """A shardtrace command failed: ``message`` is its one line, ``status`` its exit status.

    ``warnings`` holds the warning lines printed before the error, if any.
    """

    def __init__(self, message: str, status: int, warnings: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.warnings = list(warnings)

    def __str__(self) -> str:
        return f"{self.message} (exit status {self.status})"


class ShardtraceTypeError(ShardtraceError, TypeError):
    """An argument of the wrong Python type, refused before the binary runs (status 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 2)

    def __str__(self) -> str:
        return self.message


class Page(str):
    """A page's text (Markdown or HTML) with the warnings of the config it was rendered for."""

    warnings: List[str]
    path: Optional[str]

    def __new__(cls, text: str, warnings: Sequence[str] = (), path: Optional[str] = None) -> "Page":
        page = super().__new__(cls, text)
        page.warnings = list(warnings)
        page.path = path
        return page


def binary() -> str:
    """The shardtrace executable the functions run.

    ``$SHARDTRACE_BINARY`` when set, else the one vendored in this package.
    """
    named = os.environ.get("SHARDTRACE_BINARY")
    if named:
        return named
    return str(Path(__file__).resolve().parent / "_bin" / "shardtrace")


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _scalar_text(name: str, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    raise ShardtraceTypeError(
        f"{name}: expected a bool, int, float or str (or a list of them), found {_describe(value)}"
    )


def _override(name: str, value: object) -> str:
    """``name=value`` as MaxText reads it."""
    if not name.isidentifier():
        raise ShardtraceTypeError(f"override {name!r}: expected a MaxText key (an identifier)")
    if isinstance(value, (list, tuple)):
        return f"{name}=[{','.join(_scalar_text(name, v) for v in value)}]"
    return f"{name}={_scalar_text(name, value)}"


def _path(name: str, value: object) -> str:
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str) and text and "=" not in Path(text).name:
            return text
        raise ShardtraceTypeError(
            f"{name}: expected a file or directory path (no '=': overrides are keyword "
            f"arguments), found {text!r}"
        )
    raise ShardtraceTypeError(f"{name}: expected a path (str or os.PathLike), found {_describe(value)}")


def _devices(devices: object) -> List[str]:
    if devices is None:
        return []
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ShardtraceTypeError(f"devices: expected a positive int, found {_describe(devices)}")
    return ["--devices", str(devices)]


def _str_option(name: str, value: object, choices: Optional[Sequence[str]] = None) -> str:
    if not isinstance(value, str) or (choices is not None and value not in choices):
        expected = f"one of {', '.join(choices)}" if choices else "a str"
        raise ShardtraceTypeError(f"{name}: expected {expected}, found {_describe(value)}")
    return value


def _arguments(
    kind: str, configs: Sequence[object], devices: object, overrides: Mapping[str, object]
) -> List[str]:
    args = [_path(f"{kind}[{i}]", c) for i, c in enumerate(configs)]
    args += [_override(k, v) for k, v in overrides.items()]
    return args + _devices(devices)


def run(*args: str, ok: Tuple[int, ...] = (0,)) -> Tuple[str, List[str], int]:
    """Runs ``shardtrace ARGS...``; returns (stdout, warning lines, exit status).

    Raises :class:`ShardtraceError` when the status is not in ``ok``, with the error line.
    """
    for i, a in enumerate(args):
        if not isinstance(a, str):
            raise ShardtraceTypeError(f"args[{i}]: expected a str, found {_describe(a)}")
    exe = binary()
    try:
        done = subprocess.run(
            [exe, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
        )
    except OSError as e:
        raise ShardtraceError(f"cannot run {exe}: {e.strerror or e}", 127) from None
    warnings: List[str] = []
    error = ""
    for line in done.stderr.splitlines():
        if line.startswith(_WARNING):
            warnings.append(line[len(_WARNING):])
        elif line.startswith(_ERROR):
            error = line[len(_ERROR):]
        elif line.startswith(_INTERNAL):
            error = line[len("shardtrace: "):]
    if done.returncode not in ok:
        if not error:
            lines = [l for l in done.stderr.splitlines() if l.strip()]
            error = lines[-1] if lines else f"shardtrace exited with status {done.returncode}"
        raise ShardtraceError(error, done.returncode, warnings)
    return done.stdout, warnings, done.returncode


def json_command(
    command: str,
    *configs: PathLike,
    devices: Optional[int] = None,
    flags: Sequence[str] = (),
    ok: Tuple[int, ...] = (0,),
    **overrides: Override,
) -> Dict[str, Any]:
    """Runs ``shardtrace COMMAND CONFIGS... key=value... FLAGS... --format json``.

    The generic form every function here uses (and the one to reach a command this module
    has no function for). Returns the parsed JSON with ``exit_status`` added and the CLI's
    warning lines appended to its ``warnings`` (created when the JSON has none); a JSON list
    comes back as ``{"results": [...]}``.
    """
    _str_option("command", command)
    for i, f in enumerate(flags):
        _str_option(f"flags[{i}]", f)
    args = [command, *_arguments("configs", configs, devices, overrides), *flags, "--format", "json"]
    out, warnings, status = run(*args, ok=ok)
    try:
        parsed = json.loads(out)
    except ValueError as e:
        raise ShardtraceError(f"{command}: the output is not JSON ({e})", 3, warnings) from None
    result: Dict[str, Any] = parsed if isinstance(parsed, dict) else {"results": parsed}
    result.setdefault("warnings", [])
    if isinstance(result["warnings"], list):
        result["warnings"] = [*result["warnings"], *warnings]
    result["exit_status"] = status
    return result


def trace(
    *configs: PathLike,
    devices: Optional[int] = None,
    block: str = "moe",
    numeric: bool = False,
    seed: Optional[int] = None,
    step: bool = False,
    **overrides: Override,
) -> Dict[str, Any]:
    """``shardtrace trace``: one block traced; every tensor, op, collective and the memory.

    ``block`` is moe, mlp or shared; ``numeric`` runs with real numbers (``seed`` picks
    them); ``step`` adds the training step. The result is the CLI's ``--format json``:
    ``path``, ``mesh``, ``tensors``, ``ops``, ``totals``, ``memory``, ... and ``warnings``.
    """
    flags = ["--block", _str_option("block", block, ("moe", "mlp", "shared"))]
    if not isinstance(numeric, bool):
        raise ShardtraceTypeError(f"numeric: expected a bool, found {_describe(numeric)}")
    if not isinstance(step, bool):
        raise ShardtraceTypeError(f"step: expected a bool, found {_describe(step)}")
    if numeric:
        flags.append("--numeric")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ShardtraceTypeError(f"seed: expected an int >= 0, found {_describe(seed)}")
        flags += ["--seed", str(seed)]
    if step:
        flags.append("--step")
    if numeric:
        flags.append("--quiet")
    return json_command("trace", *configs, devices=devices, flags=flags, **overrides)


def check(*cases: PathLike, **overrides: Override) -> Dict[str, Any]:
    """``shardtrace check``: golden case directories run and every array compared.

    A mismatch is not an error: the result says which arrays differ and ``passed`` is
    False (the CLI's exit status 1 is in ``exit_status``).
    """
    if not cases:
        raise ShardtraceTypeError("cases: expected at least one golden case directory")
    result = json_command("check", *cases, flags=["--quiet"], ok=(0, 1), **overrides)
    result["passed"] = result["exit_status"] == 0
    return result


def diff(
    *configs: PathLike,
    a: Optional[Mapping[str, Override]] = None,
    b: Optional[Mapping[str, Override]] = None,
    devices: Optional[int] = None,
    block: str = "moe",
    **overrides: Override,
) -> Dict[str, Any]:
    """``shardtrace diff``: how two configs differ in sharding, collectives and bytes.

    Two config files (``overrides`` apply to both), or one config (or none: the embedded
    base.yml) with ``a`` and ``b``, each a mapping of overrides for that side only. The
    result has ``same`` (True when the CLI exits 0).
    """
    flags = ["--block", _str_option("block", block, ("moe", "mlp", "shared"))]
    for side, values in (("a", a), ("b", b)):
        if values is None:
            continue
        if not isinstance(values, Mapping):
            raise ShardtraceTypeError(
                f"{side}: expected a mapping of overrides (key -> value), found {_describe(values)}"
            )
        for k, v in values.items():
            if not isinstance(k, str):
                raise ShardtraceTypeError(f"{side}: expected str keys, found {_describe(k)}")
            flags += [f"--{side}", _override(k, v)]
    result = json_command("diff", *configs, devices=devices, flags=flags, ok=(0, 1), **overrides)
    result["same"] = result["exit_status"] == 0
    return result


def render(
    *configs: PathLike,
    devices: Optional[int] = None,
    format: str = "markdown",
    output: Optional[PathLike] = None,
    block: str = "moe",
    **overrides: Override,
) -> Page:
    """``shardtrace render``: the visualization page of a config, Markdown or HTML.

    Returns the page's text (a :class:`Page`, a str with ``.warnings``); with ``output`` the
    page is also written there (atomically, by the CLI) and ``.path`` names the file.
    """
    fmt = _str_option("format", format, ("markdown", "html"))
    args = ["render", *_arguments("configs", configs, devices, overrides)]
    args += ["--block", _str_option("block", block, ("moe", "mlp", "shared")), "--format", fmt]
    path = None
    if output is not None:
        path = _path("output", output)
        args += ["-o", path]
    out, warnings, _ = run(*args)
    if path is not None:
        out = Path(path).read_text(encoding="utf-8")
    return Page(out, warnings, path)


def fit(
    *configs: PathLike,
    devices: Optional[int] = None,
    flags: Sequence[str] = (),
    **overrides: Override,
) -> Dict[str, Any]:
    """``shardtrace fit``: whether the whole model's training step fits the devices' memory.

    e.g. ``fit(model_name="mixtral-8x7b", compile_topology="v5p-64")["fits"]``; ``flags``
    passes the command's own flags (``["--chip", "h100"]``). The result is the CLI's
    ``fit --format json`` with ``warnings``.
    """
    return json_command("fit", *configs, devices=devices, flags=flags, **overrides)


def plan(
    *configs: PathLike,
    devices: Optional[int] = None,
    flags: Sequence[str] = (),
    **overrides: Override,
) -> Dict[str, Any]:
    """``shardtrace plan``: the meshes and settings that fit, compared.

    ``flags`` passes the command's own flags. The result is the CLI's ``plan --format json``
    with ``warnings``.
    """
    return json_command("plan", *configs, devices=devices, flags=flags, **overrides)
