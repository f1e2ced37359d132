"""The one-line errors of every simppo command: ``<prog>: error: <message>`` on stderr, exit status 2 for bad
input."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import NoReturn


class UsageError(ValueError):
    """Bad command-line input or a value no run can use (reported as one line)."""


def report(prog: str, message: str) -> int:
    """Print ``<prog>: error: <message>`` on stderr; returns 2 (the exit status of bad input)."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return 2


def fail(prog: str, message: str, code: int = 2) -> NoReturn:
    """:func:`report` and exit with status ``code``."""
    report(prog, message)
    raise SystemExit(code)


def os_error_line(exc: OSError, path: str) -> str:
    """One line for an ``OSError`` on a path simppo reads or writes: the path the error names (else ``path``, the
    output the command was making) and what is wrong. When a file stands where a folder of ``path`` must be made
    (the error then names ``path`` or a parent of it), the line names that file and ``path``."""
    name = os.fsdecode(exc.filename) if exc.filename is not None else str(path)
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        for part in (Path(name), *Path(name).parents):
            if part.is_file():
                return f"{part}: is a file, so the folder {path} cannot be made there"
    return f"{name}: {exc.strerror or exc}"
