"""Build the feature table: own collector shards + normalised public rows, one parquet, one hash.

    build_features(raw_dir=None, public_dir=None, out=None) -> BuildResult

Defaults are `perfmodel.paths` (raw_dir(), public_dir(), features_path()), so `perfmodel dataset
build` run from any folder writes the table `perfmodel train` reads.

1. Read training shards from `raw_dir` (datasets/raw/*.parquet). Micro-benchmark shards
   (name starting with "microbench") and shards that do not fit the training schema are skipped
   and listed in the result.
2. Read the public parquet files from `public_dir` (datasets/public/*.parquet, except the MAMF
   matmul ceilings, which are not training rows).
3. Drop duplicate row_ids (own rows first, so an own measurement wins over a public copy).
4. Fill missing model dims from the catalog when model_name resolves to a catalog key. A row that
   states its own width keeps it; catalog values fill only the columns it leaves empty, and only
   when its stated hidden_size agrees with the catalog's (a different width means a different
   model, e.g. NeuSight's GPT-3 XL). num_layers may differ (proxy models with fewer layers).
5. Drop rows that still cannot be costed: rows without a dimension of
   perfmodel.codec.REQUIRED_BY_ARCH (transformers without hidden_size / num_layers / num_heads /
   seq_len, CNN / MLP rows without forward FLOPs or parameter count), counted by reason.
6. Fill run_group (default: the row_id) and sample_weight (1/k for the k rows of a run_group) where
   the source left them empty (perfmodel.schema.fill_run_defaults).
7. Conform to perfmodel.schema, sort by row_id, write parquet (zstd) and the content hash: sha256
   over the schema version, the column names and every row's canonical JSON, in row_id order,
   written to <out stem>.sha256 (e.g. datasets/features.sha256). The hash does not depend on
   parquet/pyarrow versions or on the order rows were read in.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel import paths
from perfmodel.catalog import get_model, resolve_model_key
from perfmodel.codec import REQUIRED_BY_ARCH, is_missing
from perfmodel.errors import DataError, PerfModelError
from perfmodel.schema import COLUMN_NAMES, COLUMNS, REQUIRED, SCHEMA_VERSION, conform, fill_run_defaults

MAMF_FILE = "mamf_matmul.parquet"
MICROBENCH_PREFIX = "microbench"
DIM_COLUMNS = (
    "hidden_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "ffn_hidden_size",
    "vocab_size",
    "gated_mlp",
    "tied_embeddings",
    "learned_pos_embeddings",
    "num_experts",
    "experts_per_token",
    "forward_gflops_per_sample",
    "activation_mb_per_sample",
    "params_total",
    "gemm_layers",
    "embedding_params",
    "embedding_lookups_per_sample",
    "embedding_dim",
)


@dataclass(frozen=True)
class BuildResult:
    """What `build_features` wrote."""

    path: Path
    """The feature-table parquet."""
    rows: int
    """Rows written."""
    content_hash: str
    """sha256 of the sorted rows' canonical bytes (also in <out stem>.sha256)."""
    counts: dict[str, Any] = field(default_factory=dict)
    """by_source, by_gpu, dropped (reason -> rows), skipped_shards (file -> reason), filled_from_catalog."""


def build_features(
    raw_dir: str | Path | None = None,
    public_dir: str | Path | None = None,
    out: str | Path | None = None,
) -> BuildResult:
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd


    raw_dir = raw_dir or paths.raw_dir()
    public_dir = public_dir or paths.public_dir()
    out = out or paths.features_path()

    skipped_shards: dict[str, str] = {}
    frames = []
    for path in _parquet_files(raw_dir):
        if path.name.startswith(MICROBENCH_PREFIX):
            skipped_shards[str(path)] = "micro-benchmark shard"
            continue
        frame = _read_training(path, skipped_shards)
        if frame is not None:
            frames.append(frame)
    for path in _parquet_files(public_dir):
        if path.name == MAMF_FILE:
            continue
        frame = _read_training(path, skipped_shards)
        if frame is not None:
            frames.append(frame)
    if not frames:
        raise DataError(
            f"no training rows found in {raw_dir} or {public_dir}; run `perfmodel dataset import-public` or `make collect`"
        )
    table = pd.concat(frames, ignore_index=True)
    dropped: Counter[str] = Counter()
    dup = table["row_id"].duplicated(keep="first")
    if dup.any():
        dropped["duplicate row_id"] += int(dup.sum())
        table = table[~dup].reset_index(drop=True)
    table, filled = _fill_from_catalog(table)
    table, reasons = _drop_uncostable(table)
    dropped.update(reasons)
    table = conform(fill_run_defaults(table)).sort_values("row_id", kind="stable").reset_index(drop=True)
    out_path = Path(out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    table.to_parquet(tmp, index=False, compression="zstd")
    tmp.replace(out_path)
    digest = content_hash(table)
    out_path.with_suffix(".sha256").write_text(digest + "\n")
    counts = {
        "by_source": dict(Counter(table["source"].tolist()).most_common()),
        "by_gpu": dict(Counter(table["gpu"].tolist()).most_common()),
        "by_source_kind": dict(Counter(table["source_kind"].tolist()).most_common()),
        "dropped": dict(dropped.most_common()),
        "skipped_shards": skipped_shards,
        "filled_from_catalog": filled,
    }
    return BuildResult(path=out_path, rows=len(table), content_hash=digest, counts=counts)


def _parquet_files(folder: str | Path) -> list[Path]:
    path = Path(folder)
    return sorted(path.glob("*.parquet")) if path.is_dir() else []


def _read_training(path: Path, skipped: dict[str, str]) -> Any:
    """The shard conformed to the training schema, or None (reason recorded in `skipped`)."""
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd


    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # unreadable or truncated file
        skipped[str(path)] = f"unreadable: {type(exc).__name__}"
        return None
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        skipped[str(path)] = f"not a training shard (no {missing[0]!r} column)"
        return None
    try:
        return conform(frame)
    except DataError as exc:
        skipped[str(path)] = f"does not match the training schema: {str(exc).splitlines()[0]}"
        return None


def _catalog_dims(name: str) -> dict[str, Any] | None:
    """Dims of the catalog model `name` (None when it has no catalog key)."""
    try:
        key = resolve_model_key(name)
        if key is None:
            return None
        spec = get_model(key)
    except (PerfModelError, OSError, ValueError):
        return None
    dims = {c: getattr(spec, c) for c in DIM_COLUMNS}
    if spec.is_transformer:
        dims["ffn_hidden_size"] = spec.ffn_size
        dims["num_kv_heads"] = spec.kv_heads
    return dims


def _fill_from_catalog(table: Any) -> tuple[Any, int]:
    """Fill empty dim columns from the catalog; returns (table, rows changed)."""
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    table = table.copy()
    for col in DIM_COLUMNS:
        table[col] = table[col].astype(object)
    changed = 0
    cache: dict[str, dict[str, Any] | None] = {}
    for idx, name in table["model_name"].items():
        if name not in cache:
            cache[name] = _catalog_dims(str(name))
        dims = cache[name]
        if not dims:
            continue
        width = table.at[idx, "hidden_size"]
        if (
            not is_missing(width)
            and dims.get("hidden_size") is not None
            and int(width) != int(dims["hidden_size"])
        ):
            continue
        touched = False
        for col, value in dims.items():
            if value is not None and is_missing(table.at[idx, col]):
                table.at[idx, col] = value
                touched = True
        changed += touched
    for column in COLUMNS:
        if column.name in DIM_COLUMNS:
            table[column.name] = pd.Series(table[column.name].tolist(), index=table.index).astype(
                column.dtype
            )
    return table, changed


def _drop_uncostable(table: Any) -> tuple[Any, Counter[str]]:
    reasons: Counter[str] = Counter()
    keep = []
    for _, row in table.iterrows():
        arch = str(row["arch"])
        missing = [c for c in REQUIRED_BY_ARCH.get(arch, ()) if is_missing(row[c])]
        keep.append(not missing)
        if missing:
            reasons[f"{arch} row without {', '.join(missing)}: {row['model_name']}"] += 1
    return table[keep].reset_index(drop=True), reasons


def _null(value: Any) -> bool:
    """None, NaN or pandas NA (an empty string is a value here: the hash tells them apart)."""
    if value is None:
        return True
    try:
        import pandas as pd

        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists / arrays
        return False


def _canonical(value: Any) -> Any:
    """JSON-stable form of one cell."""
    if _null(value):
        return None
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    return str(value)


def content_hash(table: Any) -> str:
    """sha256 over the schema version, column names and each row's canonical JSON, in row_id order."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"schema_version": SCHEMA_VERSION, "columns": list(COLUMN_NAMES)}).encode())
    ordered = table.sort_values("row_id", kind="stable")
    for row in ordered[list(COLUMN_NAMES)].itertuples(index=False, name=None):
        digest.update(b"\n")
        digest.update(json.dumps([_canonical(v) for v in row], separators=(",", ":")).encode())
    return digest.hexdigest()
