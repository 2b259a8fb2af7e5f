"""build_features on a tiny raw + public fixture: shard selection, dedupe, catalog dim filling,
dropping uncostable rows, run groups and weights, default locations, and a content hash that is
stable and changes with the data."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from perfmodel.dataset import build_features, content_hash
from perfmodel.schema import COLUMN_NAMES, MICROBENCH_COLUMNS, conform


def row(row_id: str, **values: object) -> dict:
    base = {
        "row_id": row_id,
        "source": "fixture",
        "citation": "fixture@0:table.md",
        "source_kind": "public",
        "status": "ok",
        "benchmark_kind": "public_training",
        "model_name": "llama2-7b",
        "model_family": "llama",
        "arch": "decoder",
        "micro_batch_size": 1,
        "precision": "amp_bf16",
        "gpu": "A100-80GB",
        "num_gpus": 8,
        "step_time_s": 2.0,
        "seq_len": 4096,
    }
    return {**base, **values}


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conform(pd.DataFrame(rows)).to_parquet(path, index=False)


@pytest.fixture()
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    raw, public = tmp_path / "raw", tmp_path / "public"
    write(
        raw / "llm__host-1__20250101__001.parquet",
        [
            row(
                "own-1",
                source="perfmodel-collector",
                source_kind="own",
                benchmark_kind="training_slice",
                step_time_s=1.5,
            ),
            row(
                "dup",
                source="perfmodel-collector",
                source_kind="own",
                benchmark_kind="training_slice",
                step_time_s=9.0,
            ),
        ],
    )
    micro = conform(
        pd.DataFrame([{"hardware_id": "h", "gpu": "cpu", "bench": "matmul", "status": "ok"}]),
        MICROBENCH_COLUMNS,
    )
    micro.to_parquet(raw / "microbench__host-1__20250101__001.parquet", index=False)
    pd.DataFrame({"something": [1, 2]}).to_parquet(raw / "other__host-1__20250101__001.parquet", index=False)
    write(
        public / "src_a.parquet",
        [
            row("dup", step_time_s=3.0),  # same row_id as an own row: the own row wins
            row(
                "dims-given",
                model_name="custom-gpt",
                model_family="gpt",
                hidden_size=1024,
                num_layers=4,
                num_heads=16,
            ),
            row("no-dims", model_name="mystery-model", model_family="gpt"),
            row(
                "no-seq",
                model_name="custom-gpt",
                model_family="gpt",
                hidden_size=1024,
                num_layers=4,
                num_heads=16,
                seq_len=None,
            ),
            row("gpt2-rep0", model_name="gpt2", model_family="gpt2", run_group="gpt2-run"),
            row("gpt2-rep1", model_name="gpt2", model_family="gpt2", run_group="gpt2-run", step_time_s=2.1),
            row(
                "cnn-catalog",
                model_name="resnet50",
                model_family="resnet",
                arch="cnn",
                seq_len=None,
                micro_batch_size=256,
            ),
            row("cnn-unknown", model_name="ssd300", model_family="ssd", arch="cnn", seq_len=None),
            row(
                "wider", model_name="llama2-7b", hidden_size=3072, num_layers=24, num_heads=24
            ),  # not the catalog's width
        ],
    )
    pd.DataFrame({"gpu": ["H100-SXM"], "dtype": ["bf16"], "mamf_tflops": [794.5]}).to_parquet(
        public / "mamf_matmul.parquet"
    )
    return raw, public


def test_build_selects_dedupes_fills_and_drops(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    raw, public = dirs
    result = build_features(raw, public, tmp_path / "out" / "features.parquet")
    table = pd.read_parquet(result.path)
    assert list(table.columns) == list(COLUMN_NAMES)
    kept = ["cnn-catalog", "dims-given", "dup", "gpt2-rep0", "gpt2-rep1", "own-1", "wider"]
    assert sorted(table["row_id"]) == kept
    assert result.rows == 7
    assert table.set_index("row_id").loc["dup", "step_time_s"] == 9.0
    assert result.counts["dropped"] == {
        "duplicate row_id": 1,
        "decoder row without hidden_size, num_layers, num_heads: mystery-model": 1,
        "decoder row without seq_len: custom-gpt": 1,
        "cnn row without params_total, forward_gflops_per_sample: ssd300": 1,
    }
    skipped = {Path(k).name: v for k, v in result.counts["skipped_shards"].items()}
    assert skipped["microbench__host-1__20250101__001.parquet"] == "micro-benchmark shard"
    assert skipped["other__host-1__20250101__001.parquet"].startswith("not a training shard")
    by_id = table.set_index("row_id")
    own = by_id.loc["own-1"]  # llama2-7b dims come from the catalog
    assert (
        own["hidden_size"],
        own["num_layers"],
        own["num_heads"],
        own["ffn_hidden_size"],
        own["vocab_size"],
    ) == (4096, 32, 32, 11008, 32000)
    assert bool(own["gated_mlp"]) is True
    assert (bool(own["tied_embeddings"]), own["learned_pos_embeddings"]) == (
        False,
        0,
    )  # Llama 2: untied, rotary
    gpt2 = by_id.loc["gpt2-rep0"]  # GPT-2 small: 768 wide, 12 layers, tied LM head, 1024 learned positions
    assert (gpt2["hidden_size"], gpt2["num_layers"], bool(gpt2["tied_embeddings"])) == (768, 12, True)
    assert gpt2["learned_pos_embeddings"] == 1024
    assert by_id.loc["dims-given", "hidden_size"] == 1024 and pd.isna(by_id.loc["dims-given", "vocab_size"])
    wider = by_id.loc["wider"]  # its own width differs from the catalog's: nothing is filled
    assert wider["hidden_size"] == 3072 and pd.isna(wider["ffn_hidden_size"])
    assert (
        by_id.loc["cnn-catalog", "forward_gflops_per_sample"] > 0
        and by_id.loc["cnn-catalog", "params_total"] > 0
    )
    assert result.counts["by_source_kind"] == {"public": 5, "own": 2}
    # the two gpt2 rows are one run: one group, half a vote each; every other row is its own run
    assert by_id.loc[["gpt2-rep0", "gpt2-rep1"], "run_group"].tolist() == ["gpt2-run", "gpt2-run"]
    assert by_id.loc[["gpt2-rep0", "gpt2-rep1"], "sample_weight"].tolist() == [0.5, 0.5]
    alone = by_id.drop(index=["gpt2-rep0", "gpt2-rep1"])
    assert (alone["run_group"] == alone.index).all() and (alone["sample_weight"] == 1.0).all()
    assert (tmp_path / "out" / "features.sha256").read_text().strip() == result.content_hash


def test_hash_is_stable_and_tracks_content(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    raw, public = dirs
    first = build_features(raw, public, tmp_path / "a.parquet")
    second = build_features(raw, public, tmp_path / "b.parquet")
    assert first.content_hash == second.content_hash
    shuffled = pd.read_parquet(first.path).sample(frac=1.0, random_state=0)
    assert content_hash(shuffled) == first.content_hash  # row order does not matter
    frame = pd.read_parquet(public / "src_a.parquet")
    frame.loc[frame["row_id"] == "dims-given", "step_time_s"] = 2.5
    frame.to_parquet(public / "src_a.parquet", index=False)
    third = build_features(raw, public, tmp_path / "c.parquet")
    assert third.content_hash != first.content_hash


def test_build_without_rows_is_an_error(tmp_path: Path) -> None:
    from perfmodel.errors import DataError

    with pytest.raises(DataError, match="no training rows"):
        build_features(tmp_path / "none", tmp_path / "none2", tmp_path / "f.parquet")


def test_cli_build_json_and_missing_public_dir(
    dirs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfmodel.cli import main

    raw, public = dirs
    main(
        [
            "dataset",
            "build",
            "--raw",
            str(raw),
            "--public",
            str(public),
            "--out",
            str(tmp_path / "f.parquet"),
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] == 7 and len(out["content_hash"]) == 64 and out["by_source_kind"]["own"] == 2
    with pytest.raises(SystemExit) as exc:
        main(["dataset", "import-public", "--public-dir", str(tmp_path / "missing")])
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not found" in err[0]


def test_build_defaults_to_the_project_locations_from_any_folder(
    dirs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from perfmodel import paths
    from perfmodel.cli import main

    raw, public = dirs  # tmp_path/raw and tmp_path/public: a datasets folder
    monkeypatch.setenv("PERFMODEL_DATASETS", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    main(["dataset", "build", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert Path(out["path"]) == tmp_path / "features.parquet" == paths.features_path()
    assert out["rows"] == 7 and (tmp_path / "features.sha256").is_file()
    assert not list(elsewhere.iterdir())  # nothing written where the command ran
