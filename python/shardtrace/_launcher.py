"""The ``shardtrace`` console command: execs the binary vendored in this package."""

from __future__ import annotations

import os
import sys

from . import binary


def main() -> None:
    exe = binary()
    try:
        os.execv(exe, [exe, *sys.argv[1:]])
    except OSError as e:
        sys.stderr.write(f"shardtrace: error: cannot run {exe}: {e.strerror or e}\n")
        sys.exit(127)


if __name__ == "__main__":
    main()
