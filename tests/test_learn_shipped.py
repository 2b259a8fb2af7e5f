"""The learned model as the predictor calls it, on a model trained on synthetic rows: load,
correct, intervals as served (the policy itself is tested on hand-made numbers in
test_learn_interval_policy.py), the lean LightGBM import, and the committed models/ folder."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from session_cache import build_once

from perfmodel.analytic import estimate
from perfmodel.errors import ConfigError
from perfmodel.features import workload_from_row
from perfmodel.learn.fit import fit_learned_model
from perfmodel.learn.interval_policy import OOD_WIDENING
from perfmodel.learn.regressor import LGBMConfig
from perfmodel.learn.shipped import Correction, LearnedModel, load_shipped_model
from perfmodel.learn.synthetic import make_synthetic_table, synthetic_catalog
from perfmodel.paths import model_dir

DEFAULT_MODEL_DIR = model_dir()
FAST = LGBMConfig(n_estimators=80, learning_rate=0.1)
HELD_OUT_GPU = "synth-a2"  # an Ampere part: its generation is seen through synth-a1 / synth-a3


@pytest.fixture(scope="session")
def trained(tmp_path_factory, worker_id):
    """A model trained on synthetic rows of every synthetic GPU but one, and the full table (built
    once per session, shared by xdist workers)."""

    def build(_folder):
        from perfmodel.features import rows_to_training_data

        with synthetic_catalog():
            table = make_synthetic_table(400, seed=3)
            X, y, kept, _ = rows_to_training_data(table)
            train = (kept["gpu"] != HELD_OUT_GPU).to_numpy()
            model, _ = fit_learned_model(
                X[train], y[train], kept[train].reset_index(drop=True), config=FAST, max_splits=5
            )
        return model, kept

    return build_once(tmp_path_factory, worker_id, "learn_shipped_trained", build)


def items_for(rows):
    out = []
    for row in rows:
        w = workload_from_row(row)
        out.append((w, estimate(w)))
    return out


def in_domain_row(kept):
    rows = kept[(kept["gpu"] == "synth-h1") & (kept["model_family"] == "llama")].to_dict("records")
    return rows[0]


def test_load_shipped_model_returns_none_without_a_model(tmp_path):
    assert load_shipped_model(tmp_path) is None


def test_save_load_roundtrip_gives_the_same_corrections(trained, tmp_path):
    model, kept = trained
    with synthetic_catalog():
        items = items_for(kept.head(20).to_dict("records"))
        model.save(tmp_path)
        loaded = load_shipped_model(tmp_path)
        assert isinstance(loaded, LearnedModel)
        assert loaded.kind == "learned" and loaded.trained_rows == model.trained_rows
        a, b = model.correct(items, 0.9), loaded.correct(items, 0.9)
    assert all(isinstance(c, Correction) for c in b)
    np.testing.assert_allclose([c.log_ratio for c in a], [c.log_ratio for c in b], rtol=1e-12)
    np.testing.assert_allclose([c.log_high for c in a], [c.log_high for c in b], rtol=1e-12)


def test_in_domain_interval_is_the_grouped_conformal_quantile_without_warnings(trained):
    from perfmodel.learn.regimes import regime_of

    model, kept = trained
    mondrian = model.metadata.conformal.mondrian
    assert mondrian.runs is not None
    with synthetic_catalog():  # a llama row on synth-h1 whose own regime cell has >= 30 runs
        rows = kept[(kept["gpu"] == "synth-h1") & (kept["model_family"] == "llama")].to_dict("records")
        row = next(r for r in rows if mondrian.runs.get("|".join(regime_of(_features(r))), 0) >= 30)
        (c,) = model.correct(items_for([row]), 0.9)
        own = "|".join(regime_of(_features(row)))
    # oracle: numpy's 'lower' quantile at ceil(0.9 (n + 1)) / n (MAPIE's rule) of the stored
    # one-vote-per-run residuals of the query's regime
    cells = mondrian.cells
    scores = np.asarray(cells[own])
    n = len(scores)
    q = float(np.quantile(scores, math.ceil(0.9 * (n + 1)) / n, method="lower"))
    assert c.warnings == ()
    assert c.log_low < c.log_ratio < c.log_high
    assert c.log_high - c.log_ratio == pytest.approx(q, abs=1e-9)
    assert c.log_ratio - c.log_low == pytest.approx(q, abs=1e-9)


def test_interval_grows_with_confidence_and_rejects_bad_levels(trained):
    model, kept = trained
    with synthetic_catalog():
        items = items_for([in_domain_row(kept)])
        widths = [
            model.correct(items, c)[0].log_high - model.correct(items, c)[0].log_low
            for c in (0.5, 0.8, 0.9, 0.95)
        ]
        assert widths == sorted(widths) and widths[0] < widths[-1]
        for bad in (0.0, 1.0, 1.5, -0.1):
            with pytest.raises(ConfigError):
                model.correct(items, bad)


def test_out_of_domain_parameter_count_widens_the_interval_and_warns(trained):
    model, kept = trained
    row = in_domain_row(kept)
    big = {
        **row,
        "hidden_size": 16384,
        "num_layers": 126,
        "num_heads": 128,
        "num_kv_heads": 8,
        "ffn_hidden_size": 53248,
        "params_total": None,
        "num_gpus": 8,
        "strategy": "fsdp",
    }
    with synthetic_catalog():
        (ood,) = model.correct(items_for([big]), 0.9)
        features = _features(big)
    assert any("parameter count" in w and "outside the training range" in w for w in ood.warnings)
    regime_half, _ = model.policy.regime_half_width(features, 0.9)
    assert (ood.log_high - ood.log_low) == pytest.approx(OOD_WIDENING * 2 * regime_half, rel=1e-6)


def test_unseen_vendor_widens_and_unseen_gpu_of_a_seen_generation_warns(trained):
    model, kept = trained
    row = in_domain_row(kept)
    with synthetic_catalog():
        (base,) = model.correct(items_for([row]), 0.9)
        (new_gpu,) = model.correct(items_for([{**row, "gpu": HELD_OUT_GPU}]), 0.9)
        intel = next(g for g in ("Gaudi2", "Gaudi3") if _resolvable(g))
        (new_vendor,) = model.correct(items_for([{**row, "gpu": intel}]), 0.9)
    width = base.log_high - base.log_low
    assert any(HELD_OUT_GPU in w and "not in the training data" in w for w in new_gpu.warnings)
    # source-held-out residuals already include unseen accelerators: same width, a warning
    assert new_gpu.log_high - new_gpu.log_low == pytest.approx(width)
    assert any("vendor" in w for w in new_vendor.warnings)
    assert new_vendor.log_high - new_vendor.log_low == pytest.approx(OOD_WIDENING * width)


def test_unseen_model_family_uses_the_held_out_family_calibration(trained):
    model, kept = trained
    row = {**in_domain_row(kept), "model_family": "never-seen"}
    with synthetic_catalog():
        (base,) = model.correct(items_for([in_domain_row(kept)]), 0.9)
        (new,) = model.correct(items_for([row]), 0.9)
    assert any("model family 'never-seen'" in w for w in new.warnings)
    # the held-out-family residuals of the first cell, finest first, with >= 30 runs (x1.25 when it
    # is not the query's own), by the split-conformal order statistic
    from perfmodel.learn.regimes import cell_keys

    cells = model.metadata.conformal.family_mondrian
    assert cells is not None
    keys = cell_keys(_regime(model, kept))
    chosen = next(k for k in keys if cells.runs.get(k, 0) >= 30)
    family = np.asarray(cells.cells[chosen])
    q_family = float(np.quantile(family, math.ceil(0.9 * (len(family) + 1)) / len(family), method="lower"))
    q_family *= 1.0 if chosen == keys[0] else 1.25
    expected = max(q_family, base.log_high - base.log_ratio)
    assert new.log_high - new.log_ratio == pytest.approx(expected, abs=1e-5)


def _features(row: dict) -> dict:
    """The learned model's feature row for one feature-table row."""
    from perfmodel.analytic import estimate
    from perfmodel.features import feature_frame, workload_from_row

    w = workload_from_row(row)
    return feature_frame([(w, estimate(w), True)]).iloc[0].to_dict()


def _regime(model, kept) -> tuple[str, ...]:
    from perfmodel.learn.regimes import regime_of

    with synthetic_catalog():
        return regime_of(_features(in_domain_row(kept)))


def _resolvable(name: str) -> bool:
    from perfmodel.catalog import resolve_gpu_key

    return resolve_gpu_key(name) is not None


PREDICT_IN_SUBPROCESS = """
import sys
from perfmodel.analytic import estimate
from perfmodel.catalog import get_gpu, get_model
from perfmodel.learn.shipped import load_shipped_model
from perfmodel.workload import ParallelSpec, TrainingSpec, Workload

model = load_shipped_model(sys.argv[1])
w = Workload(model=get_model("llama2-7b"), training=TrainingSpec(lora_r=16), gpu=get_gpu("A100-80GB"),
             parallel=ParallelSpec())
(c,) = model.correct([(w, estimate(w))], 0.9)
assert c.log_low < c.log_ratio < c.log_high
print([m for m in ("mlflow", "torch", "lightgbm", "sklearn", "mapie") if m in sys.modules])
"""


@pytest.mark.slow
def test_loading_and_correcting_imports_no_mlflow_torch_or_sklearn(trained, tmp_path):
    model, _ = trained
    model.save(tmp_path)
    lean = "from perfmodel.learn import lean_import\nlean_import.use_lean_import()\n" + PREDICT_IN_SUBPROCESS
    out = subprocess.run([sys.executable, "-c", lean, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['lightgbm']"


@pytest.mark.slow
def test_lean_lightgbm_import_predicts_like_a_full_import(trained, tmp_path):
    """The CLI's lean LightGBM import (optional integrations hidden) gives the same predictions."""
    model, _ = trained
    model.save(tmp_path)
    code = (
        "import sys, json\n"
        "from perfmodel.learn import lean_import\n"
        "lean_import.use_lean_import()\n"
        + PREDICT_IN_SUBPROCESS.split("print(")[0]
        + "print(json.dumps([c.log_ratio, 'sklearn' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lean_value, sklearn_loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert sklearn_loaded is False
    full = subprocess.run(
        [sys.executable, "-c", code.replace("lean_import.use_lean_import()", "pass"), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert full.returncode == 0, full.stderr
    full_value, _ = json.loads(full.stdout.strip().splitlines()[-1])
    assert lean_value == pytest.approx(full_value, abs=1e-12)
    loaded = load_shipped_model(tmp_path)
    from perfmodel.features import rows_to_training_data

    with synthetic_catalog():
        X, _, _, _ = rows_to_training_data(make_synthetic_table(50, seed=21))
    np.testing.assert_allclose(loaded.predict_log_ratio(X), model.predict_log_ratio(X), atol=1e-10)


@pytest.mark.skipif(load_shipped_model() is None, reason="no model exported into models/ yet")
def test_committed_model_is_complete_and_corrects_the_bundled_example():
    meta = json.loads((DEFAULT_MODEL_DIR / "metadata.json").read_text())
    for key in (
        "version",
        "trained_rows",
        "feature_names",
        "categorical_levels",
        "conformal",
        "domain",
        "dataset_sha256",
        "evaluation",
        "schema_version",
        "model_sha256",
    ):
        assert key in meta, key
    assert set(meta["conformal"]["quantiles_log"]) == {"0.8", "0.9", "0.95"}
    assert meta["domain"]["gpus_seen"] and meta["domain"]["numeric_ranges"]
    model = load_shipped_model()
    from perfmodel.catalog import get_gpu, get_model
    from perfmodel.workload import ParallelSpec, TrainingSpec, Workload

    w = Workload(
        model=get_model("llama2-7b"),
        training=TrainingSpec(seq_len=512, micro_batch_size=8, lora_r=16),
        gpu=get_gpu("A100-80GB"),
        parallel=ParallelSpec(),
    )
    (c,) = model.correct([(w, estimate(w))], 0.9)
    assert c.log_low < c.log_ratio < c.log_high
    assert math.isfinite(c.log_ratio) and -1.0 < c.log_ratio < 5.0
    assert Path(DEFAULT_MODEL_DIR / "throughput.lgb.txt").stat().st_size < 5_000_000


@pytest.mark.skipif(load_shipped_model() is None, reason="no model exported into models/ yet")
def test_quantized_base_outside_the_training_data_widens_and_warns():
    from perfmodel.catalog import get_gpu, get_model
    from perfmodel.workload import ParallelSpec, TrainingSpec, Workload

    model = load_shipped_model()
    if model.metadata.domain.numeric_ranges.get("quantization_bits", [0, 0])[1] >= 4:
        pytest.skip("the shipped model has seen 4-bit bases")
    plain = TrainingSpec(seq_len=512, micro_batch_size=8, lora_r=16)
    qlora = TrainingSpec(seq_len=512, micro_batch_size=8, lora_r=16, quantization_bits=4)
    out = []
    for training in (plain, qlora):
        w = Workload(
            model=get_model("llama2-7b"), training=training, gpu=get_gpu("A100-80GB"), parallel=ParallelSpec()
        )
        (c,) = model.correct([(w, estimate(w))], 0.9)
        out.append(c)
    assert any("quantization" in w for w in out[1].warnings)
    assert not any("quantization" in w for w in out[0].warnings)
    assert (out[1].log_high - out[1].log_ratio) > (out[0].log_high - out[0].log_ratio)


@pytest.mark.slow
def test_perfmodel_predict_loads_lightgbm_without_its_optional_integrations():
    """The cold-start workaround as the CLI runs it: after a learned prediction, scikit-learn
    (LightGBM's heaviest optional integration) was never imported."""
    code = (
        "import sys\n"
        "from perfmodel.cli import main\n"
        "try:\n"
        f"    main(['predict', '--config', {str(Path(__file__).resolve().parents[1] / 'examples' / 'llama2-7b-lora.yaml')!r}, '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print([m for m in ('lightgbm', 'sklearn') if m in sys.modules], file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["model"]["kind"] == "learned"
    assert out.stderr.strip().splitlines()[-1] == "['lightgbm']"
