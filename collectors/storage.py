"""Append-only parquet shards under datasets/raw/, named so that a listing explains itself.

    {profile}__{hardware_id}__{YYYYMMDD}__{part:03d}.parquet      training-slice rows (COLUMNS)
    microbench__{hardware_id}__{YYYYMMDD}__{part:03d}.parquet     micro-benchmark rows
    fingerprint__{hardware_id}.json                               the host fingerprint

Shards are never rewritten: every flush writes a new part (via a temporary file and an atomic
rename, so an interrupted write leaves no half shard). `measured_row_ids` reads the row ids of
every training shard of a hardware id, which is how a re-run skips what is already measured.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path
from typing import Any

from perfmodel.schema import COLUMNS, MICROBENCH_COLUMNS, Column, conform

MICROBENCH_PREFIX = "microbench"
_SHARD_RE = re.compile(r"^(?P<prefix>[a-z0-9_-]+)__(?P<hw>[a-z0-9-]+)__(?P<date>\d{8})__(?P<part>\d+)\.parquet$")


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d")


def parse_shard_name(path: Path) -> dict[str, str] | None:
    """{'prefix', 'hw', 'date', 'part'} for a shard file name, or None."""
    m = _SHARD_RE.match(path.name)
    return m.groupdict() if m else None


def list_shards(out_dir: str | Path, *, hardware_id: str | None = None, microbench: bool = False) -> list[Path]:
    """Training shards (or micro-benchmark shards) in `out_dir`, optionally of one hardware id."""
    out = []
    for path in sorted(Path(out_dir).glob("*.parquet")):
        info = parse_shard_name(path)
        if info is None or (hardware_id and info["hw"] != hardware_id):
            continue
        if (info["prefix"] == MICROBENCH_PREFIX) == microbench:
            out.append(path)
    return out


def _next_part(out_dir: Path, prefix: str, hardware_id: str, date: str) -> int:
    parts = [
        int(info["part"])
        for p in out_dir.glob(f"{prefix}__{hardware_id}__{date}__*.parquet")
        if (info := parse_shard_name(p))
    ]
    return max(parts, default=0) + 1


def write_shard(
    rows: list[dict[str, Any]],
    out_dir: str | Path,
    *,
    prefix: str,
    hardware_id: str,
    columns: tuple[Column, ...] = COLUMNS,
    date: str | None = None,
) -> Path:
    """Conform `rows` to the schema and write them as the next part. Returns the path."""
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = conform(pd.DataFrame(rows), columns)
    date = date or today()
    path = out / f"{prefix}__{hardware_id}__{date}__{_next_part(out, prefix, hardware_id, date):03d}.parquet"
    tmp = path.with_name(path.name + ".tmp")
    frame.to_parquet(tmp, index=False)
    os.replace(tmp, path)
    return path


class ShardWriter:
    """Buffers rows and writes a new shard on `flush()` (no-op when empty)."""

    def __init__(self, out_dir: str | Path, *, prefix: str, hardware_id: str, columns: tuple[Column, ...] = COLUMNS) -> None:
        self.out_dir, self.prefix, self.hardware_id, self.columns = Path(out_dir), prefix, hardware_id, columns
        self.pending: list[dict[str, Any]] = []
        self.paths: list[Path] = []
        self.rows_written = 0

    def add(self, row: dict[str, Any]) -> None:
        self.pending.append(row)

    def flush(self) -> Path | None:
        if not self.pending:
            return None
        path = write_shard(self.pending, self.out_dir, prefix=self.prefix, hardware_id=self.hardware_id, columns=self.columns)
        self.rows_written += len(self.pending)
        self.pending = []
        self.paths.append(path)
        return path


def measured_row_ids(out_dir: str | Path, hardware_id: str) -> set[str]:
    """Row ids already stored for `hardware_id` (any profile, any status)."""
    import pyarrow.parquet as pq

    ids: set[str] = set()
    for path in list_shards(out_dir, hardware_id=hardware_id):
        ids.update(pq.read_table(path, columns=["row_id"]).column("row_id").to_pylist())
    return ids


def measured_microbench_keys(out_dir: str | Path, hardware_id: str) -> set[tuple[str, str, str]]:
    """(bench, dtype, shape) already stored for `hardware_id` with status 'ok' or 'unsupported'
    (an 'oom' or 'error' benchmark is tried again)."""
    import pyarrow.parquet as pq

    keys: set[tuple[str, str, str]] = set()
    for path in list_shards(out_dir, hardware_id=hardware_id, microbench=True):
        table = pq.read_table(path, columns=["bench", "dtype", "shape", "status"]).to_pylist()
        keys.update((r["bench"], r["dtype"] or "", r["shape"] or "") for r in table if r["status"] in ("ok", "unsupported"))
    return keys


def read_rows(out_dir: str | Path, *, microbench: bool = False) -> Any:
    """Every training (or micro-benchmark) row in `out_dir` as one conformed DataFrame."""
    import pandas as pd

    from perfmodel.schema import empty_frame

    columns = MICROBENCH_COLUMNS if microbench else COLUMNS
    frames = [pd.read_parquet(p) for p in list_shards(out_dir, microbench=microbench)]
    if not frames:
        return empty_frame(columns)
    return conform(pd.concat(frames, ignore_index=True), columns)


def write_fingerprint(out_dir: str | Path, fingerprint: Any) -> Path:
    """fingerprint__{hardware_id}.json (rewritten: software versions may change between runs)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"fingerprint__{fingerprint.hardware_id}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(fingerprint.to_dict(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path
