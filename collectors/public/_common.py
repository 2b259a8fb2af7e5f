"""Shared plumbing of the public-table importers: value parsing, row ids, the result type.

Every importer reads one file family of `shared/data/public/` (see its README.md) and returns an
`ImportResult`: rows conforming to `perfmodel.schema`, and a Counter of skipped source rows by
reason. A row whose meaning is unclear is skipped with a reason, never guessed.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from perfmodel import __version__
from perfmodel.schema import conform

# Catalog keys the importers may emit (perfmodel/catalog/gpus/*.yaml, models/*.yaml). The
# importers keep their own raw-name -> key maps; these sets let tests check the maps.
GPU_KEYS = frozenset(
    """A100-40GB A100-80GB A100-PCIe-40GB A100-PCIe-80GB H100-SXM H100-PCIe H100-NVL H200 H800 GH200
    B200 GB200 B300 L4 L40S L40 A10G A10 A40 T4 V100-16GB V100-32GB V100-PCIe-16GB P100 P4 RTX-3090
    RTX-3080 RTX-4090 RTX-A6000 RTX-6000-Ada RTX-2080Ti Titan-RTX Quadro-RTX-8000 GTX-1080Ti MI100
    MI210 MI250 MI250X MI300X MI325X Gaudi2 Gaudi3""".split()
    # Added by the catalog beyond the planned list (the importers map to them too):
    + "GB300 A30 Quadro-RTX-6000 RTX-A4000 RTX-A5000 V100-PCIe-32GB".split()
)
MODEL_KEYS = frozenset(
    """llama2-7b llama2-13b llama2-70b llama3-8b llama3-70b llama3.1-8b llama3.1-70b llama3.1-405b
    mistral-7b mixtral-8x7b gpt2 gpt2-medium gpt2-large gpt2-xl gpt3-xl gpt3-2.7b gpt3-175b gpt3-5b
    gpt3-20b opt-1.3b bloom-176b nemotron4-15b nemotron4-340b mpt-125m mpt-350m mpt-760m mpt-1b mpt-3b
    mpt-7b mpt-13b mpt-30b mpt-70b bert-base bert-large resnet50 ssd300 transformer-xl-base
    transformer-xl-large gnmt ncf gpt3-xl-neusight""".split()
)

_MISSING = {"", "n/a", "na", "none", "nan", "-", "--", "–", "—", "null", "not stated"}
_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_NUM_RE = re.compile(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?")


def is_missing(value: Any) -> bool:
    """True for empty cells and the source tables' spellings of 'no value'."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return str(value).strip().lower() in _MISSING


def parse_number(value: Any) -> float | None:
    """A number from a table cell as the source wrote it: "30,040" -> 30040, "1.3M" -> 1.3e6,
    "~32" -> 32, "110.95 GiB (60.2%)" -> 110.95, "[842]" -> 842. None for empty/n-a/OOM cells and
    for cells that hold no number."""
    if is_missing(value):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().replace(",", "").replace("*", "").strip("[]{}() ~≈")
    match = re.match(
        r"^(?:around\s+)?([-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)\s*([kKmMbBgGtT])?(?![a-zA-Z]{2})", text
    )
    if not match:
        return None
    number = float(match.group(1))
    suffix = match.group(2)
    if suffix:
        number *= _SUFFIX[suffix.lower()]
    return number


def parse_seq_len(value: Any) -> int | None:
    """A sequence length: "8K" -> 8192 (K = 1024 for sequence lengths), "2048" -> 2048."""
    if is_missing(value):
        return None
    match = re.fullmatch(r"\s*(\d+)\s*([kK])?\s*", str(value))
    if not match:
        return None
    return int(match.group(1)) * (1024 if match.group(2) else 1)


def parse_int(value: Any) -> int | None:
    """An integer cell ("1,024" -> 1024, "8.0" -> 8); None when empty or not a whole number."""
    number = parse_number(value)
    if number is None or not float(number).is_integer():
        return None
    return int(number)


def parse_percent(value: Any) -> float | None:
    """A percentage cell as a fraction: "61.1%" -> 0.611, "53.33" -> 0.5333."""
    number = parse_number(value)
    return None if number is None else number / 100.0


def parse_bool(value: Any) -> bool | None:
    if is_missing(value):
        return None
    text = str(value).strip().lower()
    if text in ("true", "yes", "y", "1"):
        return True
    if text in ("false", "no", "n", "0"):
        return False
    return None


def is_oom(value: Any) -> bool:
    return isinstance(value, str) and "oom" in value.lower()


def make_row_id(source: str, citation: str, config: dict[str, Any]) -> str:
    """Stable id: sha256 of the source stem, the citation and the row's configuration."""
    payload = json.dumps([source, citation, config], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def step_time_from_tokens(global_batch_size: int, seq_len: int, tokens_per_s_total: float) -> float:
    """Seconds per optimizer step = tokens per step / total tokens per second."""
    return global_batch_size * seq_len / tokens_per_s_total


def step_time_from_samples(global_batch_size: int, samples_per_s_total: float) -> float:
    """Seconds per optimizer step = samples per step / total samples per second."""
    return global_batch_size / samples_per_s_total


@dataclass
class ImportResult:
    """What one importer produced."""

    rows: pd.DataFrame
    """Rows conforming to perfmodel.schema (one per measured configuration)."""
    skipped: Counter[str] = field(default_factory=Counter)
    """Source rows not imported, by reason."""

    def __len__(self) -> int:
        return len(self.rows)


class RowSink:
    """Collects rows and skip reasons for one source file; `result()` conforms them."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.records: list[dict[str, Any]] = []
        self.skipped: Counter[str] = Counter()

    def skip(self, reason: str, count: int = 1) -> None:
        if count:
            self.skipped[reason] += count

    def add(self, row: dict[str, Any], *, config: dict[str, Any]) -> None:
        """Add one row; `config` is what makes it distinct within its citation (for row_id)."""
        row = {k: v for k, v in row.items() if v is not None}
        row.setdefault("source", self.source)
        row.setdefault("source_kind", "public")
        row.setdefault("benchmark_kind", "public_training")
        row.setdefault("status", "ok")
        row.setdefault("collector_version", f"perfmodel {__version__} public import")
        row.setdefault("repeat_index", 0)
        step = row.get("step_time_s")
        if step is None or not math.isfinite(step) or step <= 0:
            self.skip("no positive step time derivable")
            return
        row["row_id"] = make_row_id(self.source, row["citation"], config)
        self.records.append(row)

    def result(self) -> ImportResult:
        frame = pd.DataFrame.from_records(self.records) if self.records else pd.DataFrame()
        if len(frame):
            dup = frame["row_id"].duplicated()
            if dup.any():
                self.skip("duplicate of another row (same citation and configuration)", int(dup.sum()))
                frame = frame[~dup]
        return ImportResult(rows=conform(frame), skipped=self.skipped)


def read_csv(path: Any) -> pd.DataFrame:
    """Read a public table with every cell as a string ('' for empty)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)
