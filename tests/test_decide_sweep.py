"""Sweeps: the grid, stable output keys, each point equal to `predict` of the same change given as
--set (native) or edited into the file (Ludwig), errors kept per point, CSV, and the plot's data
equal to the table's."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest
import yaml

from perfmodel.catalog import get_gpu
from perfmodel.config import load_workload
from perfmodel.config.source import ConfigSource
from perfmodel.decide.plot import plot_sweep
from perfmodel.decide.sweep import parse_vary, sweep
from perfmodel.errors import ConfigError
from perfmodel.prediction import predict

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
LUDWIG = ROOT / "examples" / "ludwig-llama2-7b-qlora.yaml"
TOP_KEYS = {"config", "dialect", "varied", "confidence_level", "model", "fastest", "points"}
POINT_KEYS = {
    "values",
    "error",
    "adjusted",
    "total_time_s",
    "step_time_s",
    "throughput_tokens_per_s",
    "throughput_samples_per_s",
    "gpu_hours",
    "cost_usd",
    "price_per_gpu_hour",
    "peak_memory_gb",
    "memory_capacity_gb",
    "fits_in_memory",
    "device_memory_gb",
    "memory_verdict",
    "mfu",
    "gpu",
    "num_gpus",
    "total_steps",
    "extrapolation",
    "warnings",
}


def test_parse_vary_reads_yaml_scalars_and_rejects_bad_syntax():
    assert parse_vary("training.micro_batch_size=1,2, 4") == ("training.micro_batch_size", [1, 2, 4])
    assert parse_vary("training.activation_checkpointing=true,false")[1] == [True, False]
    assert parse_vary("hardware.gpu=A100-80GB,H100-SXM")[1] == ["A100-80GB", "H100-SXM"]
    for bad in ("training.micro_batch_size", "=1,2", "training.micro_batch_size=", "a.b=1,,2", "a.b=1,1"):
        with pytest.raises(ConfigError):
            parse_vary(bad)


def test_grid_order_keys_and_points_equal_predict_of_the_same_set():
    vary = {"training.micro_batch_size": [2, 8], "hardware.gpu": ["A100-80GB", "H100-SXM", "L40S"]}
    result = sweep(EXAMPLE, vary)
    data = result.to_json()
    assert set(data) == TOP_KEYS
    assert [v["key"] for v in data["varied"]] == list(vary)
    assert len(data["points"]) == 6
    # the last key varies fastest
    assert [tuple(p["values"].values()) for p in data["points"]] == [
        (m, g) for m in (2, 8) for g in vary["hardware.gpu"]
    ]
    for point in data["points"]:
        assert set(point) == POINT_KEYS
        assert point["error"] is None
        for key in ("total_time_s", "throughput_samples_per_s", "cost_usd", "peak_memory_gb", "mfu"):
            iv = point[key]
            assert 0 < iv["low"] <= iv["estimate"] <= iv["high"], key
        sets = [f"{k}={v}" for k, v in point["values"].items()]
        alone = predict(load_workload(EXAMPLE, overrides=sets))
        assert point["total_time_s"]["estimate"] == pytest.approx(alone.total_time_s.estimate)
        assert point["peak_memory_gb"]["estimate"] == pytest.approx(alone.peak_memory_gb.estimate)
        assert point["fits_in_memory"] == alone.fits_in_memory
        assert point["gpu"] == point["values"]["hardware.gpu"]


def test_ludwig_keys_are_applied_to_the_ludwig_file(tmp_path):
    result = sweep(LUDWIG, {"trainer.batch_size": [1, 4, 8]}, tokens=1e8)
    assert result.dialect == "ludwig"
    raw = yaml.safe_load(LUDWIG.read_text())
    for point in result.points:
        raw["trainer"]["batch_size"] = point.values["trainer.batch_size"]
        edited = tmp_path / f"b{point.values['trainer.batch_size']}.yaml"
        edited.write_text(yaml.safe_dump(raw))
        alone = predict(load_workload(edited, tokens=1e8))
        assert alone.workload.training.micro_batch_size == point.values["trainer.batch_size"]
        assert point.outcome.total_time_s.estimate == pytest.approx(alone.total_time_s.estimate)
    # native keys still work on a Ludwig config (as --set does)
    native = sweep(LUDWIG, {"hardware.gpu": ["A100-80GB", "H100-SXM"]}, tokens=1e8)
    assert [p.outcome.gpu for p in native.points] == ["A100-80GB", "H100-SXM"]


def test_unknown_keys_are_refused_and_bad_points_are_kept_with_their_error():
    with pytest.raises(ConfigError, match="allowed keys"):
        sweep(EXAMPLE, {"training.micro_batch": [1, 2]})
    result = sweep(
        EXAMPLE, {"hardware.gpu": ["A100-80GB", "V100-16GB"]}, overrides=["training.precision=bf16"]
    )
    good, bad = result.points
    assert good.error is None and good.outcome is not None
    assert bad.outcome is None and "bf16" in bad.error
    assert set(bad.to_json()) == POINT_KEYS and bad.to_json()["total_time_s"] is None
    assert set(good.to_json()) == POINT_KEYS


def test_gpu_count_changes_bring_the_node_count_along():
    source = ConfigSource.load(EXAMPLE)
    for n in (8, 16, 24):
        w = source.workload({"hardware.num_gpus": n})
        assert w.parallel.num_nodes == math.ceil(n / get_gpu("A100-80GB").gpus_per_server)
    pinned = source.workload({"hardware.num_gpus": 16, "hardware.num_nodes": 4})
    assert pinned.parallel.num_nodes == 4
    assert "num_nodes: 1" in EXAMPLE.read_text()  # the config's one node gives way to the count, no error
    with pytest.raises(ConfigError, match=r"hardware\.num_gpus \(16\) does not fit on hardware\.num_nodes \(1\)"):
        source.workload({"hardware.num_gpus": 16, "hardware.num_nodes": 1})  # asked for: refused


def test_another_accelerator_brings_its_server_size_along():
    """The example's 1 node holds its 1 GPU on any accelerator; 8 GPUs on 1 node fit an 8-GPU
    server but not a GB200 compute tray of 4: the nodes follow (2), with the count kept."""
    source = ConfigSource.load(EXAMPLE, overrides=["hardware.num_gpus=8"])
    assert source.workload({"hardware.gpu": "H100-SXM"}).parallel.num_nodes == 1
    w = source.workload({"hardware.gpu": "GB200"})
    assert (w.parallel.num_gpus, w.parallel.num_nodes) == (8, 2)


def test_price_can_be_swept_and_scales_cost_only():
    result = sweep(EXAMPLE, {"hardware.price_per_gpu_hour": [1.0, 3.0]})
    cheap, dear = (p.outcome for p in result.points)
    assert cheap.total_time_s == dear.total_time_s
    assert dear.cost_usd.estimate == pytest.approx(3 * cheap.cost_usd.estimate)


def test_csv_has_one_row_per_point_with_the_same_numbers():
    result = sweep(EXAMPLE, {"training.micro_batch_size": [1, 4, 64]})
    rows = list(csv.DictReader(io.StringIO(result.to_csv())))
    assert len(rows) == 3
    assert list(rows[0])[:4] == [
        "training.micro_batch_size",
        "total_time_s_estimate",
        "total_time_s_low",
        "total_time_s_high",
    ]
    for row, point in zip(rows, result.points, strict=True):
        assert float(row["total_time_s_estimate"]) == pytest.approx(point.outcome.total_time_s.estimate)
        assert row["fits_in_memory"] == str(point.outcome.fits_in_memory)


def _line(fig, gid: str):
    found = [ln for ax in fig.axes for ln in ax.lines if ln.get_gid() == gid]
    return found[0] if found else None


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_file_is_written_and_its_data_equal_the_table(tmp_path, suffix):
    gpus = ["A100-80GB", "L40S"]
    mbs = [1, 4, 16, 64]
    result = sweep(EXAMPLE, {"training.micro_batch_size": mbs, "hardware.gpu": gpus})
    path = tmp_path / f"sweep{suffix}"
    fig = plot_sweep(result, path)
    assert path.is_file() and path.stat().st_size > 1000
    any_oom = False
    for gpu in gpus:
        label = f"hardware.gpu={gpu}"
        points = [p for p in result.points if p.values["hardware.gpu"] == gpu]
        fit = [p for p in points if p.outcome.fits_in_memory]
        oom = [p for p in points if not p.outcome.fits_in_memory]
        any_oom = any_oom or bool(oom)
        for panel, attr, scale in (("time", "total_time_s", 1 / 3600), ("cost", "cost_usd", 1.0)):
            line = _line(fig, f"{panel}:{label}")
            assert list(line.get_xdata()) == [p.values["training.micro_batch_size"] for p in fit]
            assert list(line.get_ydata()) == pytest.approx(
                [getattr(p.outcome, attr).estimate * scale for p in fit]
            )
            marks = _line(fig, f"{panel}-oom:{label}")
            if oom:
                assert list(marks.get_xdata()) == [p.values["training.micro_batch_size"] for p in oom]
                assert list(marks.get_ydata()) == pytest.approx(
                    [getattr(p.outcome, attr).estimate * scale for p in oom]
                )
            else:
                assert marks is None
    assert any_oom, "mb 64 of a 7B LoRA at seq 512 should not fit on a 48 GB card"


def test_plot_refuses_three_keys_and_unknown_formats(tmp_path):
    result = sweep(
        EXAMPLE,
        {
            "training.micro_batch_size": [1, 2],
            "hardware.gpu": ["A100-80GB"],
            "training.activation_checkpointing": [False],
        },
    )
    with pytest.raises(ConfigError, match="one or two"):
        plot_sweep(result, tmp_path / "x.png")
    with pytest.raises(ConfigError, match=".png"):
        plot_sweep(sweep(EXAMPLE, {"training.micro_batch_size": [1, 2]}), tmp_path / "x.jpg")


def test_outcome_json_keys_match_to_json():
    point = sweep(EXAMPLE, {"training.micro_batch_size": [2]}).points[0]
    assert tuple(point.outcome.to_json()) == point.outcome.json_keys()


def test_fastest_is_the_quickest_fitting_point_with_a_paired_verdict_against_the_next():
    from perfmodel.decide.pairs import load_correlations

    result = sweep(EXAMPLE, {"training.micro_batch_size": [2, 8], "hardware.gpu": ["A100-80GB", "H100-SXM"]})
    winner = result.fastest()
    assert winner is not None and winner.runner_up is not None and winner.ratio is not None
    fitting = sorted(
        (p for p in result.points if p.outcome is not None and p.outcome.fits_in_memory),
        key=lambda p: p.outcome.total_time_s.estimate,
    )
    assert winner.best is fitting[0] and winner.runner_up is fitting[1]
    assert winner.ratio.estimate == pytest.approx(
        fitting[1].outcome.total_time_s.estimate / fitting[0].outcome.total_time_s.estimate
    )
    # the two differ in the micro-batch only (both on the H100): that kind's measured rho
    assert winner.ratio.kind == "micro_batch"
    assert winner.ratio.rho == load_correlations().rho_for("micro_batch", result.confidence_level)
    assert winner.line.startswith("fastest that fits: " + winner.best.label)
    assert result.to_json()["fastest"]["verdict"] == winner.line
