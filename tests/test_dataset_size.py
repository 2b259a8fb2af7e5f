"""Dataset sizing: rows counted and tokens estimated (characters / 4) from CSV, Parquet and JSON lines,
on synthetic files whose true answer is known."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfmodel.config import dataset_size, load_workload, measure_dataset
from perfmodel.errors import ConfigError

FIX = Path(__file__).parent / "fixtures" / "configs"
ROWS = 1000


def frame() -> pd.DataFrame:
    """Row i has a review of 4*(i % 50 + 1) characters (so i % 50 + 1 tokens) and a title of 8."""
    rng = np.random.default_rng(7)
    return pd.DataFrame({
        "review": ["word" * (i % 50 + 1) for i in range(ROWS)],
        "title": ["t" * 8 for _ in range(ROWS)],
        "stars": rng.integers(1, 6, ROWS),
    })


def true_tokens(cap: int | None = None) -> float:
    per_row = np.array([(i % 50 + 1) + 2 for i in range(ROWS)], dtype=float)  # review + title tokens
    return float(np.minimum(per_row, cap).sum() if cap else per_row.sum())


def write(fmt: str, path: Path) -> Path:
    df = frame()
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "parquet":
        df.to_parquet(path, index=False)
    elif fmt == "jsonl":
        df.to_json(path, orient="records", lines=True)
    elif fmt == "csv.gz":
        with gzip.open(path, "wt") as fh:
            df.to_csv(fh, index=False)
    return path


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl", "csv.gz"])
def test_rows_and_tokens_from_every_format(tmp_path, fmt):
    path = write(fmt, tmp_path / f"data.{fmt}")
    stats = measure_dataset(path, text_columns=["review", "title"])
    assert stats.rows == ROWS
    assert stats.tokens_total == pytest.approx(true_tokens())
    assert stats.max_tokens("review") == 50 and stats.max_chars_by_column["title"] == 8
    capped = measure_dataset(path, text_columns=["review", "title"], tokens_cap=20)
    assert capped.tokens_total == pytest.approx(true_tokens(cap=20))
    assert "characters/4 over columns [review, title]" in capped.describe() and "capped at 20" in capped.describe()


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_all_string_columns_skip_numbers(tmp_path, fmt):
    stats = measure_dataset(write(fmt, tmp_path / f"data.{fmt}"), all_string_columns=True)
    assert stats.text_columns == ("review", "title")
    rows_only = measure_dataset(write(fmt, tmp_path / f"data.{fmt}"))
    assert rows_only.rows == ROWS and rows_only.tokens_total == 0


def test_csv_rows_with_quoted_newlines_are_counted_once(tmp_path):
    path = tmp_path / "multi.csv"
    pd.DataFrame({"text": ["line one\nline two", "x", "a,b\n\nc"]}).to_csv(path, index=False)
    stats = measure_dataset(path, text_columns=["text"])
    assert stats.rows == 3 and stats.chars_total == len("line one\nline two") + 1 + len("a,b\n\nc")


def test_missing_values_count_as_empty(tmp_path):
    path = tmp_path / "gaps.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [{"text": "abcd"}, {"text": None}, {"other": 1}, {"text": "abcdabcd"}]) + "\n")
    stats = measure_dataset(path, text_columns=["text"])
    assert stats.rows == 4 and stats.tokens_total == pytest.approx(3.0)


def test_large_files_keep_a_regular_sample_for_quantiles(tmp_path, monkeypatch):
    monkeypatch.setattr(dataset_size, "SAMPLE_LIMIT", 100)
    monkeypatch.setattr(dataset_size, "_CHUNK_ROWS", 64)
    stats = measure_dataset(write("parquet", tmp_path / "d.parquet"), text_columns=["review"])
    assert stats.rows == ROWS  # exact, whatever the sample
    assert len(stats.row_tokens) <= 200
    assert stats.row_tokens_quantile(0.5) == pytest.approx(25.5, abs=3)


def test_missing_column_names_its_origin_and_the_columns(tmp_path):
    with pytest.raises(ConfigError, match=r"no column 'body' \(named by input_features\) \(it has 3 columns") as err:
        measure_dataset(write("csv", tmp_path / "d.csv"), text_columns=["body"], column_origin="input_features")
    # privacy: the file's own column names are not echoed, only the one the config asked for
    assert not any(name in str(err.value) for name in ("review", "title", "stars"))


@pytest.mark.parametrize(
    "make,expected",
    [
        (lambda d: d / "absent.csv", "does not exist"),
        (lambda d: d, "is a directory"),
        (lambda d: (d / "data.xlsx").write_text("x") and d / "data.xlsx", "unsupported file type .xlsx"),
        (lambda d: (d / "bad.parquet").write_text("not parquet") and d / "bad.parquet", "cannot read dataset"),
        (lambda d: (d / "bad.jsonl").write_text("{not json\n") and d / "bad.jsonl", "cannot read dataset"),
    ],
)
def test_unreadable_datasets_are_one_line_config_errors(tmp_path, make, expected):
    with pytest.raises(ConfigError) as err:
        measure_dataset(make(tmp_path), all_string_columns=True)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_native_dataset_flag_gives_samples_and_states_the_method(tmp_path):
    path = write("csv", tmp_path / "reviews.csv")
    w = load_workload(FIX / "native_minimal.yaml", dataset=path)
    assert w.training.samples == ROWS and w.training.epochs == 1 and w.training.tokens is None
    line = next(a for a in w.assumptions if "characters/4" in a)
    assert "reviews.csv: 1,000 rows" in line and "[review, title]" in line and "capped at 512" in line


def test_native_dataset_key_is_relative_to_the_config_and_honours_text_columns(tmp_path):
    write("jsonl", tmp_path / "reviews.jsonl")
    cfg = tmp_path / "run.yaml"
    cfg.write_text((FIX / "native_minimal.yaml").read_text().replace(
        "  tokens: 1.0e8\n", "  dataset: reviews.jsonl\n  text_columns: [review]\n  epochs: 2\n"))
    w = load_workload(cfg)
    assert (w.training.samples, w.training.epochs) == (ROWS, 2)
    assert any("[review]" in a for a in w.assumptions)


def test_special_files_are_refused_before_reading(tmp_path):
    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)  # reading it would block until a writer comes
    with pytest.raises(ConfigError, match="is not a regular file"):
        measure_dataset(fifo)


def test_set_dataset_path_is_relative_to_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    write("csv", tmp_path / "data" / "reviews.csv")
    monkeypatch.chdir(tmp_path / "data")
    w = load_workload(FIX / "native_minimal.yaml", overrides=["training.tokens=null", "training.dataset=reviews.csv"])
    assert w.training.samples == ROWS  # found next to the cwd, not next to the config in tests/fixtures
