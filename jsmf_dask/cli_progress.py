"""What the CLI prints while a stage runs: fit's AP cycles, refine's sweeps, choose-k's models, on stderr."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator


def print_line(record) -> None:
    """One progress record (anything with ``line()``) on stderr."""
    print(record.line(), file=sys.stderr, flush=True)


class CycleProgress:
    """Prints fit's AP cycles on stderr: every cycle on a terminal (one line, rewritten), else every ~5 s."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, record) -> None:
        now = time.monotonic()
        final = record.cycle == record.of
        if self.tty:
            print("\r" + record.line(), end="\n" if final else "", file=sys.stderr, flush=True)
        elif final or now - self.last >= 5.0:
            print(record.line(), file=sys.stderr, flush=True)
            self.last = now

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr, flush=True)


@contextlib.contextmanager
def stage_progress(quiet: bool) -> Iterator[dict]:
    """The ``on_cycle`` and ``on_sweep`` callbacks of fit and refine (none when ``quiet``), as keyword arguments
    for a stage or for ``run``."""
    if quiet:
        yield {}
        return
    cycles = CycleProgress()
    try:
        yield {"on_cycle": cycles, "on_sweep": print_line}
    finally:
        cycles.close()
