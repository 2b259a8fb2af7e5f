"""Shared plumbing of the public-table importers: value parsing, the one row builder, row ids,
the result type.

Every importer reads one file family of `shared/data/public/` (see its README.md) and returns an
`ImportResult`: rows conforming to `perfmodel.schema`, and a Counter of skipped source rows by
reason. A row whose meaning is unclear is skipped with a reason, never guessed.

An importer builds each row with `RowSink.add(config=..., **fields)`: `fields` are the keyword
arguments of `training_row` (what the source states: `ModelRef`, `Batch`, `Layout`, precision,
step time), and the sink adds what every public row shares (source, source_kind 'public',
benchmark_kind 'public_training', status 'ok', collector_version, row_id, run_group)::

    sink = RowSink(path.stem)
    for r in read_csv(path).to_dict("records"):
        ...  # parse; sink.skip("reason") and continue when a value is missing or unclear
        sink.add(
            config={k: r[k] for k in ("model", "gpu", "n_gpus", "batch")},  # identity -> row_id
            citation=f"owner/repo@{commit}:README.md (table 'Training')",
            model=("llama3-8b", "llama"),  # ModelRef: catalog key, family[, arch]
            batch=Batch(micro_batch_size=2, global_batch_size=16, seq_len=8192),
            layout=Layout("H100-SXM", 8, "fsdp", gpu_name_raw=r["gpu"]),
            precision="amp_bf16",
            framework="torchtitan",
            step_time_s=step,
            notes="how step_time_s was derived",
        )
    return sink.result()
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pandas as pd

from perfmodel import __version__
from perfmodel.catalog import get_gpu
from perfmodel.schema import conform

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


PROVENANCE: dict[str, str] = {
    "source_kind": "public",
    "benchmark_kind": "public_training",
    "status": "ok",
    "collector_version": f"perfmodel {__version__} public import",
}
"""Columns every public row shares (RowSink.add sets them)."""


class _Auto:
    def __repr__(self) -> str:
        return "AUTO"


AUTO: Any = _Auto()
"""Default of values derived from the others unless the source states them."""


class ModelRef(NamedTuple):
    """Which model a row trained."""

    name: str
    """Catalog key (perfmodel/catalog/models), or the source's name when it states the dims."""
    family: str
    """Family for grouped evaluation: llama, gpt, bert, resnet, ..."""
    arch: str = "decoder"
    """decoder | encoder | encoder-decoder | cnn | mlp | gbm | other."""


@dataclass(frozen=True)
class Batch:
    """What one optimizer step processes."""

    micro_batch_size: int
    """Samples per GPU per forward/backward."""
    global_batch_size: int
    """Samples per optimizer step over all GPUs."""
    seq_len: int | None = None
    """Tokens per sample (transformers); None for other models."""
    grad_accum_steps: int | None = 1
    """Micro-batches per optimizer step; None when the source does not state it."""


@dataclass(frozen=True)
class Layout:
    """Where a row ran: the accelerators and how the job was spread over them."""

    gpu: str
    """Accelerator catalog key (perfmodel/catalog/gpus)."""
    num_gpus: int
    """Accelerators in total."""
    strategy: str | None = "ddp"
    """Data-parallel strategy (ddp | fsdp | zero1 | zero2 | zero3); None when not stated."""
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    context_parallel: int = 1
    num_nodes: int | None = AUTO
    """Machines; AUTO: the servers `num_gpus` of this accelerator fill (catalog gpus_per_server)."""
    gpu_name_raw: str | None = None
    """The accelerator or system name as the source wrote it."""


def training_row(
    *,
    citation: str,
    model: ModelRef | tuple[str, ...],
    batch: Batch,
    layout: Layout,
    precision: str,
    step_time_s: float,
    framework: str,
    optimizer: str | None = "adamw",
    includes_optimizer_step: bool = True,
    tokens_per_s: float | None = AUTO,
    samples_per_s: float | None = AUTO,
    **columns: Any,
) -> dict[str, Any]:
    """The workload and measurement columns of one public training row.

    Required: what every source must state: `citation` (repository@commit:path and the table),
    the model (a ModelRef or the tuple (name, family[, arch])), the batch, the layout, the precision, the step time of one optimizer step in s
    and the software stack. Defaults: AdamW, the optimizer step inside the timed step. Pass None for what the source does not state (the
    cell stays empty). Derived unless given (AUTO): samples_per_s = global batch / step time,
    tokens_per_s = global batch x seq_len / step time (None without seq_len).
    `columns`: any other schema column (perfmodel.schema): model dims, hardware_id,
    collected_at, notes, activation_checkpointing, peak_memory_gb, reported_mfu, ...; an
    unknown name fails in `RowSink.result` (perfmodel.schema.conform).
    """
    model = ModelRef(*model)
    num_nodes = layout.num_nodes
    if num_nodes is AUTO:
        num_nodes = get_gpu(layout.gpu).servers_for(layout.num_gpus)
    gbs = batch.global_batch_size
    if samples_per_s is AUTO:
        samples_per_s = gbs / step_time_s
    if tokens_per_s is AUTO:
        tokens_per_s = gbs * batch.seq_len / step_time_s if batch.seq_len else None
    return {
        "citation": citation,
        "model_name": model.name,
        "model_family": model.family,
        "arch": model.arch,
        **dataclasses.asdict(batch),
        "precision": precision,
        "optimizer": optimizer,
        "includes_optimizer_step": includes_optimizer_step,
        **dataclasses.asdict(layout),
        "num_nodes": num_nodes,
        "framework": framework,
        "step_time_s": step_time_s,
        "tokens_per_s": tokens_per_s,
        "samples_per_s": samples_per_s,
        **columns,
    }


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

    def add(
        self,
        *,
        config: dict[str, Any],
        run_key: dict[str, Any] | None = None,
        repeat_index: int = 0,
        **fields: Any,
    ) -> None:
        """Add one row built by `training_row(**fields)` with the shared public provenance.

        `config` is what makes the row distinct within its citation (hashed into row_id).
        `run_key`, for rows that measure the same run again (noise repeats, re-runs of one
        configuration in another version or on another host of the same kind), identifies that
        run within the source: rows with equal run_key share a run_group (default: the row_id).
        A row without a positive, finite step time is skipped with a reason."""
        step = fields.get("step_time_s")
        if step is None or not math.isfinite(step) or step <= 0:
            self.skip("no positive step time derivable")
            return
        row = {k: v for k, v in training_row(**fields).items() if v is not None}
        row_id = make_row_id(self.source, fields["citation"], config)
        run_group = make_row_id(self.source, "run", run_key) if run_key is not None else row_id
        row.update(
            PROVENANCE, source=self.source, row_id=row_id, run_group=run_group, repeat_index=repeat_index
        )
        self.records.append(row)

    def result(self) -> ImportResult:
        frame = pd.DataFrame.from_records(self.records) if self.records else pd.DataFrame()
        if len(frame):
            dup = frame["row_id"].duplicated()
            if dup.any():
                self.skip("duplicate of another row (same citation and configuration)", int(dup.sum()))
                frame = frame[~dup]
            alone = frame.groupby("run_group")["run_group"].transform("size") == 1
            frame.loc[alone, "run_group"] = frame.loc[alone, "row_id"]  # a run of one row
        return ImportResult(rows=conform(frame), skipped=self.skipped)


def read_csv(path: Any) -> pd.DataFrame:
    """Read a public table with every cell as a string ('' for empty)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)
