"""Keeping measured runs: rows appended to the collectors' shard folder (`perfmodel.paths.raw_dir()`),
with the host's fingerprint beside them, and duplicates refused.

A kept run's row_id is `<kind>-<key>`, the key a hash of (config, hardware id, step times)
(`run_key`), so the same run kept twice - by `probe` and then `ingest`, or
ingested twice - is recognised whatever its prefix.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.errors import PerfModelError
from perfmodel.measure.storage import measured_row_ids, write_fingerprint, write_shard


class DuplicateRunError(PerfModelError, ValueError):
    """The run is already in the shard folder."""


@dataclass(frozen=True)
class _Fingerprint:
    """What perfmodel.measure.storage.write_fingerprint needs from a fingerprint dict."""

    data: dict[str, Any]

    @property
    def hardware_id(self) -> str:
        return str(self.data["hardware_id"])

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


def run_key(config: dict[str, Any], hardware_id: str, times: list[float]) -> str:
    """The duplicate key of a measured run: sha256 of its config, host and step times (all of
    them, warm-up included, as recorded)."""
    payload = json.dumps(
        {"config": config, "hardware_id": hardware_id, "step_times_s": [round(t, 9) for t in times]},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def existing_row_id(out_dir: str | Path, hardware_id: str, key: str) -> str | None:
    """The row_id under which a run with this key is already kept, or None."""
    if not Path(out_dir).is_dir():
        return None
    for row_id in measured_row_ids(out_dir, hardware_id):
        if str(row_id).split("-", 1)[-1] == key:
            return str(row_id)
    return None


def keep_rows(
    rows: list[dict[str, Any]], *, out_dir: str | Path, prefix: str, fingerprint: dict[str, Any], key: str
) -> Path:
    """Append `rows` (one run) as a new shard `<prefix>__<hardware_id>__<date>__<part>.parquet` and
    write the host fingerprint; DuplicateRunError when the run is already there."""
    hw = str(fingerprint["hardware_id"])
    found = existing_row_id(out_dir, hw, key)
    if found is not None:
        raise DuplicateRunError(
            f"this run is already in {out_dir} as row {found} (same config, hardware {hw} and step times): not added again"
        )
    write_fingerprint(out_dir, _Fingerprint(fingerprint))
    return write_shard(rows, out_dir, prefix=prefix, hardware_id=hw)
