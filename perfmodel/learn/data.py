"""The feature table as model inputs: read the parquet, turn rows into (X, y) through
`perfmodel.features.rows_to_training_data`, and identify the dataset by its hash."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from perfmodel.errors import DataError
from perfmodel.features import rows_to_training_data
from perfmodel.paths import features_path as default_features_path

MIN_TRAINING_ROWS = 20


@dataclass(frozen=True, kw_only=True)
class TrainingData:
    """The feature table turned into model inputs."""

    path: Path
    """The parquet file read."""
    sha256: str
    """Dataset hash: the content hash in <stem>.sha256 beside the parquet (written by
    `perfmodel dataset build`), else the sha256 of the parquet bytes."""
    file_sha256: str
    """sha256 of the parquet bytes."""
    table: Any
    """The whole feature table (DataFrame)."""
    X: Any
    """Feature frame of the trainable rows."""
    y: Any
    """log(measured step time / roofline bound) of the trainable rows."""
    kept: Any
    """The trainable rows of `table`, aligned with X and y."""
    skipped: dict[str, int]
    """Rows not trainable, counted by reason."""
    kernel_table: Any = None
    """The kernel table (datasets/kernels/, perfmodel.kernels.table) the accelerator-never-seen
    folds refit the kernel model on; None when there is none."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dataset_hash(path: Path, file_hash: str) -> str:
    """The content hash from <stem>.sha256 when it is there and well-formed, else `file_hash`."""
    side = path.with_suffix(".sha256")
    if side.is_file():
        text = side.read_text().strip().split()
        if text and len(text[0]) == 64 and all(c in "0123456789abcdef" for c in text[0].lower()):
            return text[0].lower()
    return file_hash


def _kernel_table() -> Any:
    try:
        from perfmodel.kernels.table import load_kernel_table

        return load_kernel_table()
    except (DataError, ImportError):
        return None


def load_training_data(features_path: str | Path | None = None) -> TrainingData:
    """Read the feature table (default: `perfmodel.paths.features_path()`) and build (X, y)."""
    path = Path(features_path) if features_path is not None else default_features_path()
    if not path.is_file():
        raise DataError(
            f"no feature table at {path}; build it with `perfmodel dataset build` (make dataset) or pass --features PATH"
        )
    try:
        table = pd.read_parquet(path)
    except Exception as exc:
        raise DataError(f"cannot read feature table {path}: {exc}") from exc
    X, y, kept, skipped = rows_to_training_data(table)
    if len(y) < MIN_TRAINING_ROWS:
        raise DataError(
            f"{path} has {len(y)} usable rows (skipped: {skipped}); training needs at least {MIN_TRAINING_ROWS}"
        )
    raw = file_sha256(path)
    return TrainingData(
        kernel_table=_kernel_table(),
        path=path,
        sha256=dataset_hash(path, raw),
        file_sha256=raw,
        table=table,
        X=X,
        y=y,
        kept=kept,
        skipped=skipped,
    )
