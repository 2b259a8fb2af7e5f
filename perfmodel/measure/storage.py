"""Append-only parquet shards in the collectors' output folder (default: perfmodel.paths.raw_dir(),
datasets/raw/), named so that a listing explains itself.

    {profile}__{hardware_id}__{YYYYMMDD}__{part:03d}-{pid}.parquet    training-slice rows (COLUMNS)
    microbench__{hardware_id}__{YYYYMMDD}__{part:03d}-{pid}.parquet   micro-benchmark rows
    fingerprint__{hardware_id}.json                                   the host fingerprint

(Shards written before the writer's pid was part of the name end in `__{part:03d}.parquet`; both
forms are read.) Shards are never rewritten. A flush writes a hidden temporary file in the same
folder, fsyncs it, and links it to its final name only if that name is free (`os.link` fails
rather than overwrite), then fsyncs the folder: an interrupted write leaves no half shard, and
no write can replace another's, even from two processes in the same second. A shard that cannot
be read is moved to `damaged/` by `set_aside_damaged` (under the collector's lock), never
silently dropped. `measured_row_ids` reads the row ids of every training shard of a hardware id,
which is how a re-run skips what is already measured.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.errors import DataError
from perfmodel.schema import COLUMNS, MICROBENCH_COLUMNS, Column, conform, empty_frame

MICROBENCH_PREFIX = "microbench"
FINGERPRINT_PREFIX = "fingerprint"
DAMAGED_DIR = "damaged"
"""Sub-folder of the output folder where unreadable shards are set aside."""
_SHARD_RE = re.compile(
    r"^(?P<prefix>[a-z0-9_-]+)__(?P<hw>[a-z0-9-]+)__(?P<date>\d{8})__(?P<part>\d+)(?:-(?P<writer>\d+))?\.parquet$"
)
_REQUIRED = {False: ("row_id",), True: ("bench", "dtype", "shape", "status")}
"""Columns a training (False) or micro-benchmark (True) shard must have to be usable."""
ORPHAN_TMP_AGE_S = 3600.0
"""A temporary shard file older than this (s) was left by a killed writer and is removed."""
_LINK_UNSUPPORTED = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d")


def parse_shard_name(path: Path) -> dict[str, str] | None:
    """{'prefix', 'hw', 'date', 'part', 'writer'} for a shard file name ('writer': the pid that
    wrote it, '' for older names), or None."""
    m = _SHARD_RE.match(path.name)
    if not m:
        return None
    info = m.groupdict()
    info["writer"] = info["writer"] or ""
    return info


def list_shards(
    out_dir: str | Path, *, hardware_id: str | None = None, microbench: bool = False
) -> list[Path]:
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


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a folder be opened or synced
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _publish(tmp: Path, path: Path) -> bool:
    """Give `tmp` the name `path` unless that name exists. True when published. Where hard links
    are not supported, an existence check and os.replace (the pid in the name keeps writers apart)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _LINK_UNSUPPORTED:
            raise
        if path.exists():
            return False
        os.replace(tmp, path)
        return True
    tmp.unlink()
    return True


def write_shard(
    rows: list[dict[str, Any]],
    out_dir: str | Path,
    *,
    prefix: str,
    hardware_id: str,
    columns: tuple[Column, ...] = COLUMNS,
    date: str | None = None,
) -> Path:
    """Conform `rows` to the schema and write them as a new part (the next free part number,
    this process's pid in the name); atomic and never overwriting. Returns the path."""
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame = conform(pd.DataFrame(rows), columns)
    date = date or today()
    pid = os.getpid()
    tmp = out / f".{prefix}__{hardware_id}__{date}.{pid}.{os.urandom(4).hex()}.tmp"
    try:
        frame.to_parquet(tmp, index=False)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        part = _next_part(out, prefix, hardware_id, date)
        while True:
            path = out / f"{prefix}__{hardware_id}__{date}__{part:03d}-{pid}.parquet"
            if _publish(tmp, path):
                break
            part += 1
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _fsync_dir(out)
    return path


class ShardWriter:
    """Buffers rows and writes a new shard on `flush()` (no-op when empty)."""

    def __init__(
        self, out_dir: str | Path, *, prefix: str, hardware_id: str, columns: tuple[Column, ...] = COLUMNS
    ) -> None:
        self.out_dir, self.prefix, self.hardware_id, self.columns = (
            Path(out_dir),
            prefix,
            hardware_id,
            columns,
        )
        self.pending: list[dict[str, Any]] = []
        self.paths: list[Path] = []
        self.rows_written = 0

    def add(self, row: dict[str, Any]) -> None:
        self.pending.append(row)

    def flush(self) -> Path | None:
        if not self.pending:
            return None
        path = write_shard(
            self.pending, self.out_dir, prefix=self.prefix, hardware_id=self.hardware_id, columns=self.columns
        )
        self.rows_written += len(self.pending)
        self.pending = []
        self.paths.append(path)
        return path


@dataclass(frozen=True, kw_only=True)
class DamagedShard:
    """A shard that could not be read."""

    path: str
    """Where it was."""
    reason: str
    """Why it cannot be used (one line)."""
    moved_to: str | None = None
    """Where it was set aside (None: left in place)."""

    def describe(self) -> str:
        where = f"; moved to {self.moved_to}" if self.moved_to else ""
        return f"damaged shard {Path(self.path).name}: {self.reason}{where}"


def _read_table(path: Path, columns: list[str] | None = None) -> Any:
    """The shard as a pyarrow Table; DataError naming the file and the reason when it cannot be
    read (truncated, not parquet, missing columns)."""
    # pyarrow: only when parquet is read or written
    import pyarrow.parquet as pq

    required = _REQUIRED[(parse_shard_name(path) or {}).get("prefix") == MICROBENCH_PREFIX]
    try:
        table = pq.read_table(path, columns=columns)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ... for a bad file
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise DataError(f"damaged shard {path}: {text}") from None
    missing = [c for c in required if c not in table.column_names] if columns is None else []
    if missing:
        raise DataError(f"damaged shard {path}: no column {', '.join(missing)}")
    return table


def set_aside_damaged(out_dir: str | Path) -> list[DamagedShard]:
    """Read every shard in `out_dir` in full; move the ones that cannot be read to
    `out_dir/damaged/` (keeping their names, never overwriting) and return them. Also removes
    temporary files a killed writer left (older than ORPHAN_TMP_AGE_S). Call it only while
    holding the folder's lock."""
    out = Path(out_dir)
    now = time.time()
    for tmp in out.glob(".*__*.tmp"):  # write_shard also runs outside a collector: only stale ones
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > ORPHAN_TMP_AGE_S:
                tmp.unlink()
    damaged = []
    for path in [*list_shards(out, microbench=True), *list_shards(out)]:
        try:
            _read_table(path)
        except DataError as exc:
            reason = str(exc).split(": ", 1)[1]
            target_dir = out / DAMAGED_DIR
            target_dir.mkdir(exist_ok=True)
            target, n = target_dir / path.name, 1
            while target.exists():
                target, n = target_dir / f"{path.name}.{n}", n + 1
            os.replace(path, target)
            damaged.append(DamagedShard(path=str(path), reason=reason, moved_to=str(target)))
    if damaged:
        _fsync_dir(out)
    return damaged


def measured_row_ids(out_dir: str | Path, hardware_id: str) -> set[str]:
    """Row ids already stored for `hardware_id` (any profile, any status). DataError on a
    damaged shard (the collector sets those aside first)."""
    ids: set[str] = set()
    for path in list_shards(out_dir, hardware_id=hardware_id):
        ids.update(_read_table(path, ["row_id"]).column("row_id").to_pylist())
    return ids


def measured_microbench_keys(out_dir: str | Path, hardware_id: str) -> set[tuple[str, str, str]]:
    """(bench, dtype, shape) already stored for `hardware_id` with status 'ok' or 'unsupported'
    (an 'oom' or 'error' benchmark is tried again)."""
    keys: set[tuple[str, str, str]] = set()
    for path in list_shards(out_dir, hardware_id=hardware_id, microbench=True):
        table = _read_table(path, ["bench", "dtype", "shape", "status"]).to_pylist()
        keys.update(
            (r["bench"], r["dtype"] or "", r["shape"] or "")
            for r in table
            if r["status"] in ("ok", "unsupported")
        )
    return keys


def read_rows(out_dir: str | Path, *, microbench: bool = False) -> Any:
    """Every training (or micro-benchmark) row in `out_dir` as one conformed DataFrame.
    DataError on a damaged shard."""
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd


    columns = MICROBENCH_COLUMNS if microbench else COLUMNS
    frames = [_read_table(p).to_pandas() for p in list_shards(out_dir, microbench=microbench)]
    if not frames:
        return empty_frame(columns)
    return conform(pd.concat(frames, ignore_index=True), columns)


def write_fingerprint(out_dir: str | Path, fingerprint: Any) -> Path:
    """fingerprint__{hardware_id}.json (rewritten atomically: software versions may change
    between runs)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{FINGERPRINT_PREFIX}__{fingerprint.hardware_id}.json"
    tmp = out / f".{path.name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(fingerprint.to_dict(), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


@dataclass(frozen=True)
class MeasuredHost:
    """A host that measured into a collectors' folder: its fingerprint, and its micro-benchmark
    shards for the ceilings it reached."""

    fingerprint: dict[str, Any]
    """`fingerprint__{hardware_id}.json` as written (`Fingerprint.to_dict()`)."""
    out_dir: Path
    """The folder it measured into."""

    @property
    def hardware_id(self) -> str:
        return str(self.fingerprint.get("hardware_id", ""))

    def ceilings(self) -> dict[str, float]:
        """Best achieved matmul TFLOP/s per dtype and memory-copy GB/s of its micro-benchmark
        rows with status 'ok' (keys 'matmul_<dtype>_tflops', 'hbm_copy_gb_per_s'); a shard that
        cannot be read is not evidence and is left out (the collector sets it aside)."""
        best: dict[str, float] = {}
        for path in list_shards(self.out_dir, hardware_id=self.hardware_id, microbench=True):
            try:
                table = _read_table(path, ["bench", "dtype", "status", "achieved_tflops", "achieved_gb_per_s"])
            except DataError:
                continue
            for r in table.to_pylist():
                if r["status"] != "ok":
                    continue
                if r["bench"] == "matmul" and r["dtype"] and _finite(r["achieved_tflops"]):
                    key = f"matmul_{r['dtype']}_tflops"
                    best[key] = max(best.get(key, 0.0), float(r["achieved_tflops"]))
                elif r["bench"] == "hbm_copy" and _finite(r["achieved_gb_per_s"]):
                    best["hbm_copy_gb_per_s"] = max(best.get("hbm_copy_gb_per_s", 0.0), float(r["achieved_gb_per_s"]))
        return best


def _finite(value: Any) -> bool:
    return value is not None and value == value and value not in (float("inf"), float("-inf"))


def measured_hosts(out_dir: str | Path) -> tuple[MeasuredHost, ...]:
    """Every host with a fingerprint in `out_dir` (sorted by file name; an unreadable fingerprint
    is skipped): what the catalog reads to rebuild a measured host."""
    out = []
    for path in sorted(Path(out_dir).glob(f"{FINGERPRINT_PREFIX}__*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(data, dict):
            out.append(MeasuredHost(fingerprint=data, out_dir=Path(out_dir)))
    return tuple(out)
