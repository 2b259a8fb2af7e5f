"""The CLI through its real entry point (a subprocess), for every command and for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
CONTRACT_INTERVALS = ("throughput_tokens_per_s", "throughput_samples_per_s", "step_time_s", "total_time_s", "gpu_hours", "peak_memory_gb")


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_import_cli_does_not_load_torch_or_mlflow():
    code = "import sys, perfmodel.cli; bad = [m for m in ('torch', 'mlflow', 'lightgbm', 'pandas') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_predict_json_contract_on_the_bundled_example():
    res = run("predict", "--config", str(EXAMPLE), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    for key in CONTRACT_INTERVALS:
        iv = data[key]
        assert set(iv) >= {"estimate", "low", "high"}
        assert 0 < iv["low"] <= iv["estimate"] <= iv["high"], key
    assert data["confidence_level"] == pytest.approx(0.9)
    assert data["total_steps"] == -(-int(5e8) // (512 * 8 * 4))
    assert isinstance(data["fits_in_memory"], bool) and data["fits_in_memory"]
    assert data["model"]["kind"] in ("learned", "analytic")
    assert set(data["model"]) >= {"kind", "version", "trained_rows"}
    assert data["workload"]["training"]["lora_r"] == 16
    assert data["workload"]["model"]["name"] == "llama2-7b"
    assert data["hardware"]["name"] == "A100-80GB"
    assert isinstance(data["warnings"], list)
    # consistency: total time >= steps * step time, gpu-hours = total * gpus / 3600
    assert data["total_time_s"]["estimate"] >= data["total_steps"] * data["step_time_s"]["estimate"]
    assert data["gpu_hours"]["estimate"] == pytest.approx(data["total_time_s"]["estimate"] / 3600)


@pytest.mark.slow
def test_predict_human_output_and_flag_overrides():
    res = run("predict", "--config", str(EXAMPLE), "--gpu", "H100-SXM", "--num-gpus", "2", "--set", "training.micro_batch_size=4")
    assert res.returncode == 0, res.stderr
    assert "2 x H100-SXM" in res.stdout
    assert "Total time" in res.stdout and "Peak memory" in res.stdout
    data = json.loads(run("predict", "--config", str(EXAMPLE), "--gpu", "H100-SXM", "--tokens", "1e6", "--json").stdout)
    assert data["hardware"]["name"] == "H100-SXM"
    assert data["total_steps"] == -(-int(1e6) // (512 * 8 * 4))


@pytest.mark.slow
def test_predict_does_not_fit_verdict(tmp_path):
    cfg = write(tmp_path, EXAMPLE.read_text().replace("lora_r: 16", "").replace("precision: bf16", "precision: amp_bf16"))
    data = json.loads(run("predict", "--config", str(cfg), "--json").stdout)
    assert data["fits_in_memory"] is False
    assert any("does not fit" in w for w in data["warnings"])


@pytest.mark.slow
def test_gpus_and_models_commands():
    res = run("gpus", "--json")
    assert res.returncode == 0
    names = [g["name"] for g in json.loads(res.stdout)]
    assert "A100-80GB" in names and "cpu" in names
    res = run("models", "--json")
    assert res.returncode == 0
    assert "llama2-7b" in [m["name"] for m in json.loads(res.stdout)]
    assert run("gpus").returncode == 0 and run("models").returncode == 0
    listed = run("frameworks").stdout
    assert "clip" in listed and any(line.startswith("hf-eager") and " yes " in line for line in listed.splitlines())
    res = run("models", "--timm", "--json")
    timm = {m["name"]: m for m in json.loads(res.stdout)}
    assert res.returncode == 0 and timm["timm/efficientnet_b0"]["img_size"] == 224
    assert run("models", "--timm").returncode == 0


@pytest.mark.parametrize(
    "patch,expected",
    [
        (("gpu: A100-80GB", "gpu: A100-80G"), "A100-80GB"),  # close match suggested
        (("name: llama2-7b", "name: lama2-7b"), "llama2-7b"),
        (("micro_batch_size: 8", "micro_batch_size: -8"), "training.micro_batch_size"),
        (("seq_len: 512", "seq_len: 0"), "training.seq_len"),
        (("precision: bf16", "precision: fp8"), "fp8"),  # A100 has no fp8
        (("precision: bf16", "precision: fp4"), "training.precision"),
        (("lora_r: 16", "lora_rank: 16"), "lora_rank"),  # unknown key named
    ],
)
@pytest.mark.slow
def test_bad_input_is_one_line_on_stderr_with_exit_1(tmp_path, patch, expected):
    cfg = write(tmp_path, EXAMPLE.read_text().replace(*patch))
    res = run("predict", "--config", str(cfg))
    assert res.returncode == 1, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert expected in lines[0]
    assert "Traceback" not in res.stderr
    assert res.stdout == ""


@pytest.mark.slow
def test_missing_required_value_and_unreadable_files(tmp_path):
    cfg = write(tmp_path, EXAMPLE.read_text().replace("  tokens: 5.0e8\n", ""))
    res = run("predict", "--config", str(cfg))
    assert res.returncode == 1 and "training.tokens" in res.stderr
    res = run("predict", "--config", str(tmp_path / "nope.yaml"))
    assert res.returncode == 1 and "nope.yaml" in res.stderr
    bad = write(tmp_path, "model: [unclosed", "bad.yaml")
    res = run("predict", "--config", str(bad))
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_debug_shows_traceback_and_usage_errors_exit_2(tmp_path):
    cfg = write(tmp_path, EXAMPLE.read_text().replace("gpu: A100-80GB", "gpu: nosuchgpu"))
    res = run("--debug", "predict", "--config", str(cfg))
    assert res.returncode != 0 and "Traceback" in res.stderr
    res = run("predict", "--no-such-flag")
    assert res.returncode == 2
    res = run("predict", "--config", str(EXAMPLE), "--num-gpus", "many")
    assert res.returncode == 2


@pytest.mark.slow
def test_memcheck_command_reports_published_measurements():
    res = run("memcheck", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["rows"] == len(data["measurements"]) >= 20
    assert 0 < data["median_abs_error_pct"] <= data["p90_abs_error_pct"]
    assert all(m["citation"] for m in data["measurements"])
    res = run("memcheck", "--data", "/nonexistent/peak.parquet")
    assert res.returncode == 1 and "no peak-memory table" in res.stderr


@pytest.mark.slow
def test_dataset_build_command_writes_features_and_hash(tmp_path):
    out = tmp_path / "features.parquet"
    res = run("dataset", "build", "--raw", str(ROOT / "datasets" / "raw"), "--public", str(ROOT / "datasets" / "public"), "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert out.is_file() and data["rows"] >= 2000
    assert len(data["content_hash"]) == 64


@pytest.mark.slow
def test_train_command_logs_registers_and_exports(tmp_path):
    """`perfmodel train` end to end through the entry point, into a throwaway MLflow store."""
    from perfmodel.catalog import get_gpu, gpu_names
    from perfmodel.learn.synthetic import make_synthetic_table

    gpus = tuple(g for g in gpu_names() if g != "cpu" and get_gpu(g).supports("bf16") and get_gpu(g).memory_gb >= 40)[:4]
    features = tmp_path / "features.parquet"
    make_synthetic_table(160, seed=3, gpus=gpus).to_parquet(features)
    env_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": env_uri, "NO_COLOR": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "perfmodel", "train", "--features", str(features), "--export-dir", str(tmp_path / "models"), "--json"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=600,
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["tracking_uri"] == env_uri
    assert data["registered_version"] == "1" and data["became_champion"]
    assert (tmp_path / "models" / "throughput.lgb.txt").is_file()
    pred = run("predict", "--config", str(EXAMPLE), "--model-dir", str(tmp_path / "models"), "--json")
    assert pred.returncode == 0, pred.stderr
    assert json.loads(pred.stdout)["model"] == {"kind": "learned", "version": "1", "trained_rows": data["rows_trained"]}


@pytest.mark.slow
def test_a_hugging_face_id_in_the_local_cache_predicts_offline(tmp_path):
    repo = tmp_path / "hub" / "models--microsoft--deberta-v3-base"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abc")
    (repo / "snapshots" / "0123abc").mkdir(parents=True)
    (repo / "snapshots" / "0123abc" / "config.json").write_text(json.dumps({
        "model_type": "deberta-v2", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
        "intermediate_size": 3072, "vocab_size": 128100, "hidden_act": "gelu", "max_position_embeddings": 512}))
    cfg = write(tmp_path, "model:\n  name: microsoft/deberta-v3-base\ntraining:\n  seq_len: 256\n  samples: 10000\n"
                          "hardware:\n  gpu: A100-80GB\n")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, "-m", "perfmodel", "predict", "--config", str(cfg), "--json"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["workload"]["model"]["name"] == "microsoft/deberta-v3-base"
    assert data["workload"]["model"]["hidden_size"] == 768 and data["workload"]["model"]["arch"] == "encoder"
    assert any("local Hugging Face cache" in a for a in data["assumptions"])
