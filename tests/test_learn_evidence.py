"""Shrinking the learned residual by the measured evidence near a query (perfmodel.learn.evidence):
a synthetic test where the truth is known, and the rule's edges."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from perfmodel.features import NUMERIC_FEATURES, frame_records
from perfmodel.learn.evidence import (
    EVIDENCE_COLUMNS,
    SPEC_WINDOW_LOG10,
    Evidence,
    evidence_key,
    evidence_rows,
)
from perfmodel.learn.regimes import REGIME_COLUMNS, regime_of


def _row(vendor="nvidia", gpus=1, nodes=1, fused=0, compile_=0, arch="decoder", peak=989.0, bw=3350.0):
    return {"vendor": vendor, "num_gpus": gpus, "num_nodes": nodes, "recipe_fused_kinds": fused,
            "torch_compile": compile_, "arch": arch, "log_peak_tflops": math.log10(peak),
            "log_hbm_bandwidth_gb_per_s": math.log10(bw)}  # fmt: skip


def test_no_evidence_means_no_residual_and_much_evidence_means_all_of_it():
    none = Evidence.from_rows([], [])
    assert none.shrink([_row()]) == [0.0]
    many = Evidence.from_rows([_row()] * 1000, [1.0] * 1000)
    assert many.shrink([_row()])[0] == pytest.approx(1000 / 1010)
    ten = Evidence.from_rows([_row()] * 20, [0.5] * 20)  # 20 rows of 10 runs
    assert ten.shrink([_row()])[0] == pytest.approx(0.5)


def test_evidence_counts_only_runs_like_the_query():
    h100 = _row(peak=989, bw=3350)
    ev = Evidence.from_rows([h100] * 30, [1.0] * 30)
    h200 = _row(peak=989, bw=4800)  # same peaks, 1.43x the bandwidth: within the window
    assert math.log10(4800 / 3350) <= SPEC_WINDOW_LOG10
    assert ev.runs_near(h200) == 30
    assert ev.runs_near(_row(peak=125, bw=900)) == 0  # a V100
    assert ev.runs_near(_row(gpus=8)) == 0  # another scale
    assert ev.runs_near(_row(fused=4)) == 0  # another kind of stack
    assert ev.runs_near(_row(arch="cnn")) == 0
    assert ev.runs_near(_row(vendor="amd")) == 0
    assert evidence_key(_row(gpus=8, nodes=2)) == "nvidia|multi-node|eager|transformer"


def test_a_recipes_fused_kinds_make_a_transformers_stack_fused_not_a_cnns():
    """A recipe fuses a transformer's kinds (norms, activations, rotary, the loss over the vocabulary);
    a CNN's plan runs its batch norms, ReLUs and adds op by op whatever the recipe, so NVIDIA's
    DeepLearningExamples ResNet (dle-ngc: 2 fused kinds) is evidence for an eager ResNet query; compile
    still is another stack."""
    assert evidence_key(_row(fused=2)) == "nvidia|1 device|fused|transformer"
    assert evidence_key(_row(fused=2, arch="cnn")) == "nvidia|1 device|eager|cnn"
    assert evidence_key(_row(fused=2, arch="mlp")) == "nvidia|1 device|eager|other"
    assert evidence_key(_row(arch="cnn", compile_=1)) == "nvidia|1 device|fused|cnn"
    ev = Evidence.from_rows([_row(fused=2, arch="cnn")] * 10, [1.0] * 10)
    assert ev.shrink([_row(arch="cnn")]) == [pytest.approx(0.5)]


def test_round_trips_through_json():
    ev = Evidence.from_rows([_row(), _row(bw=2039)], [1.0, 0.5])
    assert Evidence.from_json(ev.to_json()) == ev
    fitted = Evidence.fitted([_row(), _row(arch="cnn"), _row(fused=3)], [0.1, 0.3, 0.5], [1.0, 1.0, 1.0])
    assert Evidence.from_json(fitted.to_json()) == fitted and fitted.eager_transformers_unshifted
    assert fitted.offset(_row()) == 0.0 and fitted.offset(_row(arch="cnn")) == fitted.base["accelerator|eager"]
    assert fitted.base["accelerator|eager"] == 0.3  # the eager CNN's alone: the transformer's 0.1 sets no overhead
    assert fitted.offset(_row(fused=3)) == fitted.base["accelerator|fused"]  # a fused transformer keeps it
    assert fitted.offset(_row(vendor="cpu")) == fitted.base["*"]  # and so does one on a CPU
    older = {k: v for k, v in fitted.to_json().items() if k != "eager_transformers_unshifted"}
    assert Evidence.from_json(older).offset(_row()) == fitted.base["accelerator|eager"]  # models fitted before


def test_an_approximate_plan_sets_no_step_overhead_but_takes_its_stacks():
    """NCF's plan leaves out its embedding lookups (perfmodel.analytic.step.APPROXIMATE_PLANS), so
    its runs are measured far slower than their plan (here y = 0.9, 1.0). That is the plan's error,
    not a step's overhead: pooled, two NCF runs beside one eager CNN (0.1) would set the eager
    overhead to 0.9; the CNN's 0.1 sets it alone, and NCF takes it (what its plan leaves out is
    the residual's, at the approximate plans' own transfer share)."""
    ncf = {**_row(arch="mlp"), "plan_approximate": 1.0}
    fitted = Evidence.fitted([ncf, ncf, _row(arch="cnn")], [0.9, 1.0, 0.1], [1.0, 1.0, 1.0])
    assert fitted.base == {"*": pytest.approx(0.1), "accelerator|eager": pytest.approx(0.1)}
    assert fitted.offset(ncf) == fitted.offset(_row(arch="cnn")) == pytest.approx(0.1)
    alone = Evidence.fitted([ncf, ncf], [0.9, 1.0], [1.0, 1.0])  # nothing else: they set it after all
    assert alone.offset(ncf) == pytest.approx(0.9)


@pytest.mark.parametrize("arch, far_value", [("cnn", "overhead"), ("decoder", "kernel model")])
def test_a_regressor_fitted_far_from_the_query_falls_back_to_the_step_overhead(arch, far_value):
    """Synthetic truth: on the training accelerator y = 0.2 for small models and 0.8 for large ones
    (median 0.5: the step overhead of eager jobs on an accelerator). The booster learns the split and
    predicts it at nearly full weight near its rows; for an accelerator whose specs no training run
    shares it predicts the overhead alone for an eager CNN, and the kernel model alone (0) for an
    eager transformer, whatever the model size."""
    from perfmodel.features import FEATURE_NAMES, categorize
    from perfmodel.learn.regressor import LGBMConfig, LGBMRatioRegressor

    rng = np.random.default_rng(0)
    rows = []
    for _ in range(400):
        r = {name: 0.0 for name in FEATURE_NAMES}
        r.update(_row(arch=arch), log_params_total=rng.uniform(7, 10), precision="bf16", compute_dtype="bf16", strategy="ddp",
                 optimizer="adamw", attention_kernel="sdpa")  # fmt: skip
        rows.append(r)
    X = categorize(pd.DataFrame(rows, columns=list(FEATURE_NAMES)))
    y = np.where(X["log_params_total"] < 8.5, 0.2, 0.8)
    reg = LGBMRatioRegressor(LGBMConfig(n_estimators=100, shrink_runs=10.0)).fit(X, y)
    small, large = X[X["log_params_total"] < 8.0].iloc[:3], X[X["log_params_total"] > 9.0].iloc[:3]
    s = 400 / 410
    base = float(np.median(y)) if far_value == "overhead" else 0.0
    assert reg.predict(small) == pytest.approx(base + s * (0.2 - base), abs=0.03)
    assert reg.predict(large) == pytest.approx(base + s * (0.8 - base), abs=0.03)
    far = large.copy()
    far["log_peak_tflops"] = math.log10(125.0)
    far["log_hbm_bandwidth_gb_per_s"] = math.log10(900.0)
    assert reg.predict(far) == pytest.approx(base, abs=1e-9)
    assert reg.evidence_.base["accelerator|eager"] == pytest.approx(float(np.median(y)), abs=0.01)
    unshrunk = LGBMRatioRegressor(LGBMConfig(n_estimators=100, shrink_runs=0.0)).fit(X, y).predict(far)
    assert unshrunk == pytest.approx(0.8, abs=0.03)


def test_the_transfer_share_scales_the_residual_beyond_the_step_overhead():
    """b(x) + a * s * (raw - b(x)): hand-worked for a fused transformer (b = 0.5) with 10 runs near
    (s = 0.5) and a = 0.4: 0.5 + 0.4 * 0.5 * (1.3 - 0.5) = 0.66; an eager one (b = 0): 0.4 * 0.5 * 1.3."""
    rows = [_row(fused=3)] * 10 + [_row()] * 10
    ev = Evidence.fitted(rows, [0.5] * 10 + [0.1] * 10, [1.0] * 20)
    shared = dataclasses.replace(ev, transfer=0.4)
    assert shared.blend([1.3, 1.3], [_row(fused=3), _row()]) == [pytest.approx(0.66), pytest.approx(0.26)]
    assert ev.blend([1.3], [_row(fused=3)]) == [pytest.approx(0.9)]  # share 1: the evidence shrink alone
    assert Evidence.from_json(shared.to_json()) == shared and shared.to_json()["transfer_share"] == 0.4
    assert "transfer_share" not in ev.to_json() and Evidence.from_json(ev.to_json()).transfer == 1.0


def test_an_approximate_plan_keeps_its_own_share():
    """A Transformer-XL or NCF row (feature plan_approximate) takes `transfer_approximate`: its
    residual is what the plan leaves out, which holds in any lab; other rows keep `transfer`."""
    ev = dataclasses.replace(Evidence.fitted([_row()] * 10, [0.2] * 10, [1.0] * 10), transfer=0.4,
                             transfer_approximate=1.0)  # fmt: skip
    txl = {**_row(), "plan_approximate": 1.0}
    s = ev.shrink([_row()])[0]
    assert ev.blend([1.0, 1.0], [_row(), txl]) == [pytest.approx(0.4 * s), pytest.approx(s)]
    assert Evidence.from_json(ev.to_json()) == ev
    assert dataclasses.replace(ev, transfer_approximate=None).share(txl) == 0.4


def _varied_rows(rng, n: int) -> list[dict]:
    """`n` feature rows with random numeric features and cycling vendors, scales, stacks and kinds."""
    rows = []
    for i in range(n):
        row = {name: float(rng.uniform(0, 3)) for name in NUMERIC_FEATURES}
        row.update(_row(vendor=["nvidia", "amd", "cpu"][i % 3], gpus=[1, 8, 16][i % 3], nodes=[1, 1, 2][i % 3],
                        fused=i % 2 * 3, compile_=int(i % 5 == 0), arch=["decoder", "cnn", "mlp", "encoder"][i % 4]))
        rows.append(row)
    return rows


def test_the_evidence_reads_only_the_columns_it_names():
    """`evidence_rows` keeps EVIDENCE_COLUMNS only (training speed): every value the evidence computes
    from a whole feature row is the same from those columns, so a rule that reads another column
    fails here instead of silently reading nothing."""
    rng = np.random.default_rng(0)
    full = _varied_rows(rng, 40)
    for i, row in enumerate(full):
        row["plan_approximate"] = float(i % 7 == 0)
        row["cnn_planned_layer_by_layer"] = float(i % 3 == 0)
    frame = pd.DataFrame(full)
    y = list(rng.normal(0.2, 0.3, len(full)))
    slim = evidence_rows(frame)
    assert set(slim[0]) == set(EVIDENCE_COLUMNS)
    ev = dataclasses.replace(Evidence.fitted(full, y, [1.0] * len(full)), transfer=0.4, transfer_approximate=1.0)
    assert Evidence.fitted(slim, y, [1.0] * len(full)) == Evidence.fitted(full, y, [1.0] * len(full))
    assert ev.blend(y, slim) == ev.blend(y, full)
    assert [ev.offset(r) for r in slim] == [ev.offset(r) for r in full]


def test_frame_records_are_pandas_records_with_the_same_python_values():
    frame = pd.DataFrame(
        {
            "num_gpus": [1, 8, 2],
            "log_peak_tflops": [2.5, float("nan"), 3.0],
            "vendor": pd.Categorical(["nvidia", None, "cpu"], categories=["nvidia", "amd", "cpu"]),
            "arch": ["decoder", "cnn", None],
        }
    )
    columns = ["vendor", "num_gpus", "log_peak_tflops", "arch"]
    ours, theirs = frame_records(frame, columns), frame[columns].to_dict("records")
    assert [list(r) for r in ours] == [list(r) for r in theirs]  # the same keys, in order
    for mine, pandas_row in zip(ours, theirs, strict=True):
        for name in columns:
            a, b = mine[name], pandas_row[name]
            assert type(a) is type(b) and (a == b or (a != a and b != b)), (name, a, b)
    assert frame_records(frame, []) == [{}, {}, {}]  # one record per row, even with no column


def test_the_regimes_read_only_the_columns_they_name():
    """Training reads a fold's regimes from REGIME_COLUMNS only (`fit._regimes`): a rule of
    `regime_of` that reads another column fails here instead of silently reading nothing."""
    rng = np.random.default_rng(1)
    full = _varied_rows(rng, 60)
    for i, row in enumerate(full):
        row.update(lora_r=[0.0, 16.0][i % 2], quantization_bits=[0.0, 4.0][i % 4 // 2],
                   precision=["bf16", "fp32", "fp8", "amp_bf16"][i % 4], log_params_total=rng.uniform(6, 11))
    slim = frame_records(pd.DataFrame(full), list(REGIME_COLUMNS))
    families = [["llama", "ncf", "resnet"][i % 3] for i in range(60)]
    assert [regime_of(r, f) for r, f in zip(slim, families, strict=True)] == [
        regime_of(r, f) for r, f in zip(full, families, strict=True)
    ]
    assert len({regime_of(r) for r in full}) > 10  # the rows span many regimes
