"""``metrics.csv``: the runner's per-iteration metrics as a plain CSV (nothing depends on parsing wandb files)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from simppo.utils.files import atomic_write_bytes, atomic_write_text


class MetricsCSV:
    """One row per iteration (``epoch``, ``step``, then every logged metric), appended and flushed each
    iteration. The header grows when new keys appear (episode stats arrive with the first finished
    episodes): the file is then rewritten once, atomically. Empty cells: not logged that iteration. A last row cut
    short (the process killed while appending it) is dropped before the first write of a process, so that it
    never fuses with the next row.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.fields: list[str] | None = None

    def read(self) -> tuple[list[str], list[dict[str, str]]]:
        """``(header, rows)`` of the file (empty when it does not exist)."""
        if not self.path.is_file():
            return [], []
        with open(self.path, newline="") as f:
            reader = csv.DictReader(f)
            return list(reader.fieldnames or []), list(reader)

    def _rewrite(self, fields: list[str], rows: list[dict]) -> None:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=fields, restval="", extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(self.path, buf.getvalue())
        self.fields = fields

    def _drop_torn_tail(self) -> None:
        """Cut an unterminated last line (a row whose append was interrupted) from the file."""
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            atomic_write_bytes(self.path, data[:data.rfind(b"\n") + 1])

    def append(self, row: dict[str, float]) -> None:
        if self.fields is None:
            self._drop_torn_tail()
            self.fields = self.read()[0]
        new = [k for k in row if k not in self.fields]
        if new or not self.path.is_file():
            fields, rows = self.read()
            self._rewrite([*(fields or self.fields), *new], [*rows, row])
            return
        with open(self.path, "a", newline="") as f:
            csv.DictWriter(f, fieldnames=self.fields, restval="", extrasaction="ignore",
                           lineterminator="\n").writerow(row)
            f.flush()

    def truncate_after(self, epoch: int) -> None:
        """Drop the rows of iterations after ``epoch`` (a resumed run repeats them), and a torn last row."""
        self._drop_torn_tail()
        fields, rows = self.read()
        keep = [r for r in rows if not r.get("epoch") or float(r["epoch"]) <= epoch]
        if fields and len(keep) != len(rows):
            self._rewrite(fields, keep)
