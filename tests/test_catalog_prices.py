"""Cost: the price catalog's arithmetic and sources, the default-price rule, cost = GPU-hours x
price, and the precedence --price > hardware.price_per_gpu_hour > catalog."""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

import pytest
import yaml

from perfmodel.catalog import get_gpu, gpu_names
from perfmodel.catalog import get_model as _get_model
from perfmodel.catalog.prices import (
    PRICES_FILE,
    default_price,
    price_for,
    priced_gpus,
    with_price,
)
from perfmodel.config import load_workload
from perfmodel.errors import ConfigError
from perfmodel.prediction import predict
from perfmodel.workload import ParallelSpec, TrainingSpec, Workload

ROOT = Path(__file__).resolve().parents[1]
RAW = yaml.safe_load(PRICES_FILE.read_text())


def test_every_listed_price_is_consistent_sourced_and_dated():
    keys = set(gpu_names())
    clouds = {"aws", "gcp", "azure", "lambda", "coreweave"}
    assert RAW["default_rule"] == "median"
    assert len(RAW["gpus"]) >= 10
    for gpu, entries in RAW["gpus"].items():
        assert gpu in keys, f"{gpu} is not a catalog key"
        assert entries, gpu
        for e in entries:
            assert e["cloud"] in clouds
            assert isinstance(e["gpus_per_instance"], int) and e["gpus_per_instance"] >= 1
            # the per-GPU price is the instance price split over its GPUs, to the cent
            assert e["usd_per_gpu_hour"] == pytest.approx(
                e["usd_per_instance_hour"] / e["gpus_per_instance"], abs=0.006
            ), e
            assert e["source"].startswith("https://"), e
            assert re.fullmatch(r"\d{4}(-\d{2}){0,2}", str(e["as_of"])), e
            assert 0.05 < e["usd_per_gpu_hour"] < 50, e


def test_default_price_is_the_median_of_the_listed_prices():
    for gpu, entries in RAW["gpus"].items():
        quote = default_price(gpu)
        assert quote is not None
        assert quote.usd_per_gpu_hour == pytest.approx(
            statistics.median(e["usd_per_gpu_hour"] for e in entries)
        )
        assert quote.rule == "median"
        cheapest, dearest = quote.listed_range_usd
        assert cheapest == min(e["usd_per_gpu_hour"] for e in entries)
        assert dearest == max(e["usd_per_gpu_hour"] for e in entries)
    assert set(priced_gpus()) == set(RAW["gpus"])


def test_hand_worked_median_of_an_even_and_an_odd_count():
    # three prices: the middle one; two prices: their mean (hand-worked from prices.yaml)
    odd = [e["usd_per_gpu_hour"] for e in RAW["gpus"]["H100-SXM"]]
    assert len(odd) == 3
    assert default_price("H100-SXM").usd_per_gpu_hour == sorted(odd)[1]
    even = [e["usd_per_gpu_hour"] for e in RAW["gpus"]["L40S"]]
    assert len(even) == 2
    assert default_price("l40s").usd_per_gpu_hour == pytest.approx((even[0] + even[1]) / 2)  # aliases resolve


def _workload(gpu: str = "A100-80GB", num_gpus: int = 4, price: float | None = None) -> Workload:
    return Workload(
        model=_get_model("llama2-7b"),
        training=TrainingSpec(lora_r=16, tokens=2e8, micro_batch_size=4),
        gpu=get_gpu(gpu),
        parallel=ParallelSpec(num_gpus=num_gpus, price_per_gpu_hour=price),
    )


def test_prediction_cost_is_total_time_times_gpus_times_price(tmp_path):
    pred = predict(_workload(price=3.0), model_dir=tmp_path)  # analytic: no model files there
    for attr in ("estimate", "low", "high"):
        total_s = getattr(pred.total_time_s, attr)
        assert getattr(pred.cost_usd, attr) == pytest.approx(total_s / 3600 * 4 * 3.0)
    data = pred.to_json()
    assert data["price_per_gpu_hour"]["usd"] == 3.0 and data["price_per_gpu_hour"]["rule"] == "given"
    assert data["cost_usd"]["estimate"] == pytest.approx(data["total_time_s"]["estimate"] / 3600 * 4 * 3.0)


def test_catalog_price_is_used_when_none_is_given_and_unpriced_gpus_warn(tmp_path):
    w = _workload()
    assert price_for(w).usd_per_gpu_hour == default_price("A100-80GB").usd_per_gpu_hour
    unpriced = next(
        g for g in gpu_names() if g != "cpu" and g not in priced_gpus() and get_gpu(g).supports("bf16")
    )
    pred = predict(_workload(gpu=unpriced), model_dir=tmp_path)
    assert pred.cost_usd is None and pred.to_json()["cost_usd"] is None
    assert any("no price known" in m and "--price" in m for m in pred.warnings)


def test_price_field_is_validated_and_with_price_overrides():
    with pytest.raises(ConfigError, match="hardware.price_per_gpu_hour"):
        ParallelSpec(price_per_gpu_hour=-1.0)
    assert with_price(_workload(price=1.0), 7.0).parallel.price_per_gpu_hour == 7.0
    assert with_price(_workload(price=1.0), None).parallel.price_per_gpu_hour == 1.0
    free = with_price(_workload(), 0.0)  # own hardware: zero is allowed
    assert price_for(free).usd_per_gpu_hour == 0.0


@pytest.mark.slow
def test_price_precedence_through_the_command_line(tmp_path):
    import json
    import subprocess
    import sys

    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        "model: {name: llama2-7b}\n"
        "training: {lora_r: 16, tokens: 1.0e8, seq_len: 512, micro_batch_size: 4}\n"
        "hardware: {gpu: A100-80GB, num_gpus: 2, price_per_gpu_hour: 2.0}\n"
    )

    def run(*extra: str) -> dict:
        res = subprocess.run(
            [sys.executable, "-m", "perfmodel", "predict", "--config", str(cfg), "--json", *extra],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))

    from_file = run()
    assert from_file["price_per_gpu_hour"]["usd"] == 2.0
    flagged = run("--price", "5")
    assert flagged["price_per_gpu_hour"]["usd"] == 5.0
    assert flagged["cost_usd"]["estimate"] == pytest.approx(flagged["gpu_hours"]["estimate"] * 5.0)
    assert math.isclose(
        flagged["cost_usd"]["estimate"] / from_file["cost_usd"]["estimate"], 2.5, rel_tol=1e-9
    )
    set_ = run("--set", "hardware.price_per_gpu_hour=4")
    assert set_["price_per_gpu_hour"]["usd"] == 4.0
    bad = subprocess.run(
        [sys.executable, "-m", "perfmodel", "predict", "--config", str(cfg), "--price", "-3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "--price" in bad.stderr


def test_ludwig_config_gets_the_catalog_price_of_its_assumed_gpu():
    w = load_workload(ROOT / "examples" / "ludwig-llama2-7b-qlora.yaml", tokens=1e8)
    assert price_for(w).usd_per_gpu_hour == default_price(w.gpu.name).usd_per_gpu_hour
