"""The one-line errors of every simppo command: ``<prog>: error: <message>`` on stderr, exit status 2 for bad
input."""

from __future__ import annotations

import sys
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
