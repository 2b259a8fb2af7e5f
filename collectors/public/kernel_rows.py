"""Shared plumbing of the kernel-table importers: one row from a `KernelWork` and a measured time,
row ids, and the result type (rows kept, source rows skipped by reason).

Every kernel importer reads one source and returns a `KernelImport`; `kernel_table.py` runs them
all and writes datasets/kernels/<source>.parquet. A row whose shape or dtype is unclear is skipped
with a reason, never guessed.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from perfmodel.kernels.work import KernelWork
from perfmodel.schema import KERNEL_COLUMNS, conform


def combine(works: list[KernelWork], *, kind: str | None = None, variant: str | None = None) -> KernelWork:
    """One work for a measured call that runs several memory-bound works back to back (e.g. a residual
    add followed by an RMSNorm): launches and bytes add; kind/variant/impl/dtype/phase of the first
    unless given."""
    first = works[0]
    return KernelWork(
        kind=kind or first.kind,
        impl=first.impl,
        variant=variant or first.variant,
        dtype=first.dtype,
        phase=first.phase,
        flops=sum(w.flops for w in works),
        bytes=sum(w.bytes for w in works),
        bytes_moved=sum(w.bytes_moved for w in works),
        launches=sum(w.launches for w in works),
        shape=first.shape,
    )


@dataclass
class KernelImport:
    """Rows of one source and the source rows skipped, by reason."""

    source: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] += n

    def add(
        self,
        work: KernelWork,
        *,
        gpu: str,
        time_s: float,
        citation: str,
        identity: dict[str, Any],
        **extra: Any,
    ) -> None:
        """A row: the work's columns, the measured time, and `extra` (gpu_name_raw, provider_raw,
        kernel_name_raw, time_p20_s, time_p80_s, measured_at, torch_version, notes, hardware_id)."""
        key = json.dumps({"source": self.source, "gpu": gpu, **identity}, sort_keys=True, default=str)
        self.rows.append(
            {
                "row_id": hashlib.sha1(key.encode()).hexdigest()[:16],
                "source": self.source,
                "citation": citation,
                "gpu": gpu,
                "kernel_kind": work.kind,
                "impl": work.impl,
                "variant": work.variant,
                "dtype": work.dtype,
                "phase": work.phase,
                "shape": "x".join(str(int(v)) for v in work.shape),
                "flops": work.flops,
                "bytes": work.bytes,
                "bytes_moved": work.bytes_moved,
                "launches": work.launches,
                "time_s": float(time_s),
                **extra,
            }
        )

    def frame(self) -> pd.DataFrame:
        frame = conform(pd.DataFrame(self.rows), KERNEL_COLUMNS)
        dup = frame["row_id"].duplicated()
        if dup.any():  # the same point measured twice with the same identity: keep the first
            self.skip("duplicate of another row (same point, same identity)", int(dup.sum()))
            frame = frame[~dup].reset_index(drop=True)
        return frame.sort_values("row_id").reset_index(drop=True)
