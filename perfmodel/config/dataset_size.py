"""How much data a training file holds: rows counted, text tokens estimated, streaming.

Supported: CSV / TSV (optionally compressed), Parquet, JSON lines. Files are read in chunks of
only the needed columns, so a large file is never held in memory. Tokens are estimated as
characters / 4 (the usual rule of thumb for English BPE tokenizers, e.g. OpenAI's tokenizer
guide: "one token generally corresponds to ~4 characters of text"), optionally capped per row
at the sequence length (truncation).
"""

from __future__ import annotations

import gzip
import math
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.errors import ConfigError, clip, quote

CHARS_PER_TOKEN = 4.0
"""Characters per token for the estimate."""

SAMPLE_LIMIT = 1_000_000
"""Per-row token counts kept for quantiles; beyond this, every k-th row is kept."""

_CHUNK_ROWS = 200_000
_FORMATS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl",
            ".ndjson": "jsonl", ".json": "jsonl"}
_COMPRESSION = (".gz", ".bz2", ".zip", ".xz", ".zst")


@dataclass(frozen=True, kw_only=True)
class DatasetStats:
    """Size of a dataset file and an estimate of its text tokens."""

    path: Path
    rows: int
    """Data rows (header excluded)."""
    columns: tuple[str, ...]
    """Every column of the file."""
    text_columns: tuple[str, ...]
    """Columns whose characters were counted."""
    chars_total: int
    """Characters over text_columns, all rows."""
    max_chars_by_column: dict[str, int]
    """Longest value of each text column, in characters."""
    extra_tokens_per_row: float
    """Tokens added to every row (e.g. a prompt template), included in the figures below."""
    tokens_cap: int | None
    """Per-row cap (truncation) applied to tokens_total, or None."""
    tokens_total: float
    """Estimated tokens over all rows, each row capped at tokens_cap."""
    row_tokens: Any
    """numpy array: uncapped token estimate of each row (a regular sample of rows when large)."""

    @property
    def mean_row_tokens(self) -> float:
        return self.tokens_total / self.rows if self.rows else 0.0

    def row_tokens_quantile(self, q: float) -> float:
        """Uncapped per-row token estimate at quantile q (0..1)."""
        # numpy: kept out of import time (the CLI's cold start)
        import numpy as np

        if len(self.row_tokens) == 0:
            return 0.0
        return float(np.quantile(self.row_tokens, q))

    def max_tokens(self, column: str) -> int:
        return math.ceil(self.max_chars_by_column.get(column, 0) / CHARS_PER_TOKEN)

    def describe(self) -> str:
        """One line: what was counted and how."""
        cols = ", ".join(self.text_columns) if self.text_columns else "none"
        cap = f", each row capped at {self.tokens_cap}" if self.tokens_cap else ""
        extra = (f" plus {self.extra_tokens_per_row:.0f} tokens per row (prompt template, special tokens)"
                 if self.extra_tokens_per_row else "")
        return (
            f"dataset {self.path.name}: {self.rows:,} rows; tokens estimated as characters/4 over columns "
            f"[{cols}]{extra}{cap}: {self.tokens_total:,.0f} tokens ({self.mean_row_tokens:,.0f} per row)"
        )


def _check_regular_file(p: Path) -> None:
    """ConfigError unless `p` is a regular file (a FIFO or device would block or never end)."""
    shown = clip(str(p))
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise ConfigError(f"dataset {shown} does not exist") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read dataset {shown}: {getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"dataset {shown} is a directory; give a .csv, .parquet or .jsonl file")
    if not stat.S_ISREG(mode):
        raise ConfigError(f"dataset {shown} is not a regular file (a FIFO, device or socket); give a .csv, .parquet or .jsonl file")


def dataset_format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSION:
        suffixes = suffixes[:-1]
    fmt = _FORMATS.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise ConfigError(
            f"dataset {path}: unsupported file type {''.join(path.suffixes) or '(none)'}; "
            f"give a .csv, .tsv, .parquet or .jsonl file"
        )
    return fmt


def measure_dataset(
    path: str | Path,
    *,
    text_columns: Sequence[str] | None = None,
    all_string_columns: bool = False,
    tokens_cap: int | None = None,
    extra_tokens_per_row: float = 0.0,
    column_origin: str = "",
) -> DatasetStats:
    """Count rows and estimate tokens. `text_columns` names the text columns (a missing one is a
    ConfigError naming `column_origin`); with `all_string_columns`, every string column counts."""
    # numpy: kept out of import time (the CLI's cold start)
    import numpy as np

    p = Path(path).expanduser()
    _check_regular_file(p)
    fmt = dataset_format(p)
    try:
        columns, string_columns = _schema(p, fmt)
        if text_columns is not None:
            missing = [c for c in text_columns if c not in columns]
            if missing:
                # Only the columns the config asked for are named: never the file's own contents.
                origin = f" (named by {column_origin})" if column_origin else ""
                raise ConfigError(
                    f"dataset {clip(p.name)} has no column {quote(missing[0])}{origin} "
                    f"(it has {len(columns)} columns; column names are case-sensitive)"
                )
            cols = tuple(dict.fromkeys(text_columns))
        else:
            cols = tuple(string_columns) if all_string_columns else ()
        rows = 0
        chars_total = 0
        tokens_total = 0.0
        max_chars = dict.fromkeys(cols, 0)
        kept: list[Any] = []
        kept_n = 0
        stride = 1
        for n, lengths in _iter_lengths(p, fmt, cols, columns):
            row_chars = np.zeros(n, dtype=np.float64)
            for c in cols:
                arr = lengths[c]
                row_chars += arr
                if n:
                    max_chars[c] = max(max_chars[c], int(arr.max()))
            row_tok = row_chars / CHARS_PER_TOKEN + extra_tokens_per_row
            chars_total += int(row_chars.sum())
            tokens_total += float(np.minimum(row_tok, tokens_cap).sum() if tokens_cap else row_tok.sum())
            start = (-rows) % stride
            kept.append(row_tok[start::stride].astype(np.float32))
            kept_n += len(kept[-1])
            rows += n
            while kept_n > SAMPLE_LIMIT:  # halve the sample: keep every other kept row
                merged = np.concatenate(kept)[::2]
                kept, kept_n, stride = [merged], len(merged), stride * 2
    except ConfigError:
        raise
    except Exception as exc:  # pandas / pyarrow raise many types; one line for the user
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise ConfigError(f"cannot read dataset {clip(str(p))}: {clip(first)}") from exc
    return DatasetStats(
        path=p,
        rows=rows,
        columns=tuple(columns),
        text_columns=cols,
        chars_total=chars_total,
        max_chars_by_column=max_chars,
        extra_tokens_per_row=extra_tokens_per_row,
        tokens_cap=tokens_cap,
        tokens_total=tokens_total,
        row_tokens=np.concatenate(kept) if kept else np.zeros(0, dtype=np.float32),
    )


def first_value(path: str | Path, column: str) -> Any:
    """The first non-empty value of a column (used to probe e.g. an image path), or None."""
    p = Path(path).expanduser()
    fmt = dataset_format(p)
    try:
        for n, values in _iter_values(p, fmt, (column,), chunk_rows=1000):
            vals = values[column]
            for v in vals.to_pylist() if hasattr(vals, "to_pylist") else vals:
                if v is not None and v == v and str(v).strip():
                    return v
            if n:
                return None
    except Exception:
        return None
    return None


# --- readers ------------------------------------------------------------------------------------


def _schema(p: Path, fmt: str) -> tuple[list[str], list[str]]:
    """(all columns, string columns)."""
    if fmt == "parquet":
        # pyarrow: only when parquet is read or written
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pq.ParquetFile(p).schema_arrow
        strings = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
        return list(schema.names), strings
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    if fmt == "jsonl":
        head = next(iter(pd.read_json(p, lines=True, chunksize=1000, dtype=False)), None)
        if head is None:
            return [], []
    else:
        head = pd.read_csv(p, sep="\t" if fmt == "tsv" else ",", nrows=1000)
    columns = [str(c) for c in head.columns]
    strings = [str(c) for c in head.columns if head[c].map(lambda v: isinstance(v, str)).any()]
    return columns, strings


def _iter_values(p: Path, fmt: str, cols: Sequence[str], chunk_rows: int | None = None) -> Iterator[tuple[int, Any]]:
    """(rows in chunk, {column: values}) chunks; with no columns, the rows are still counted."""
    chunk_rows = chunk_rows or _CHUNK_ROWS
    if fmt == "parquet":
        # pyarrow: only when parquet is read or written
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(p)
        if not cols:
            yield pf.metadata.num_rows, {}
            return
        for batch in pf.iter_batches(columns=list(cols), batch_size=chunk_rows):
            yield batch.num_rows, {c: batch.column(c) for c in cols}
        return
    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd

    if fmt == "jsonl":
        if not cols:
            yield _count_nonblank_lines(p), {}
            return
        reader: Any = pd.read_json(p, lines=True, chunksize=chunk_rows, dtype=False)
        for chunk in reader:
            yield len(chunk), {c: chunk[c] if c in chunk else pd.Series([None] * len(chunk)) for c in cols}
        return
    sep = "\t" if fmt == "tsv" else ","
    usecols = list(cols) if cols else [0]
    for chunk in pd.read_csv(p, sep=sep, usecols=usecols, dtype=str, keep_default_na=False, chunksize=chunk_rows):
        yield len(chunk), {c: chunk[c] for c in cols}


def _iter_lengths(p: Path, fmt: str, cols: Sequence[str], columns: Sequence[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(rows, {column: characters per row as a float array})."""
    # numpy: kept out of import time (the CLI's cold start)
    import numpy as np

    for n, values in _iter_values(p, fmt, cols):
        out: dict[str, Any] = {}
        for c in cols:
            v = values[c]
            if fmt == "parquet":
                # pyarrow: only when parquet is read or written
                import pyarrow as pa
                import pyarrow.compute as pc

                if not (pa.types.is_string(v.type) or pa.types.is_large_string(v.type)):
                    v = pc.cast(v, pa.string())
                out[c] = pc.fill_null(pc.utf8_length(v), 0).to_numpy(zero_copy_only=False).astype(np.float64)
            else:
                filled = v.where(v.notna(), "")
                out[c] = filled.astype(str).str.len().to_numpy(dtype=np.float64)
        yield n, out


def _count_nonblank_lines(p: Path) -> int:
    opener: Any = gzip.open if p.suffix == ".gz" else open
    count = 0
    with opener(p, "rb") as fh:
        for line in fh:
            if line.strip():
                count += 1
    return count
