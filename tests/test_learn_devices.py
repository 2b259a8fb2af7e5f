"""CPU rows get a booster of their own; both live in one model text that round-trips."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from perfmodel.learn.devices import CPU_MARKER, split_model_text
from perfmodel.learn.regressor import LGBMConfig, LGBMRatioRegressor
from perfmodel.learn.synthetic import make_synthetic_table, synthetic_catalog


@pytest.fixture(scope="module")
def data():
    from perfmodel.features import rows_to_training_data

    with synthetic_catalog():
        X, y, _, _ = rows_to_training_data(make_synthetic_table(240, seed=5, noise_sigma=0.02))
    X = X.copy()
    cpu = np.arange(len(X)) % 3 == 0  # a third of the rows pretend to be CPU rows ...
    X["vendor"] = pd.Categorical(
        np.where(cpu, "cpu", X["vendor"].astype(str)), categories=X["vendor"].cat.categories
    )
    y = np.where(cpu, y + 2.0, y)  # ... that are e^2 = 7.4x slower than any accelerator row
    return X, y, cpu


def test_cpu_rows_do_not_pull_accelerator_predictions(data):
    X, y, cpu = data
    split = LGBMRatioRegressor(LGBMConfig(n_estimators=200)).fit(X, y)
    assert split.cpu_booster_ is not None
    pred = split.predict(X)
    # each class is learned from its own rows: residuals stay small in both
    assert np.median(np.abs(pred[~cpu] - y[~cpu])) < 0.1
    assert np.median(np.abs(pred[cpu] - y[cpu])) < 0.1


def test_the_stored_text_holds_both_boosters_and_reloads_to_the_same_predictions(data, tmp_path):
    from perfmodel.learn.metadata import ModelMetadata
    from perfmodel.learn.shipped import LearnedModel

    X, y, cpu = data
    reg = LGBMRatioRegressor(LGBMConfig(n_estimators=50)).fit(X, y)
    text = reg.model_text()
    main, cpu_text = split_model_text(text)
    assert CPU_MARKER in text and main.startswith("tree") and cpu_text.startswith("tree")
    import lightgbm

    reloaded = lightgbm.Booster(model_str=main), lightgbm.Booster(model_str=cpu_text)
    from perfmodel.learn.devices import predict_by_device

    np.testing.assert_allclose(predict_by_device(*reloaded, X), reg.predict(X), rtol=1e-9)
    model = LearnedModel(
        None,
        ModelMetadata.from_json({
            "feature_names": list(X.columns),
            "conformal": {"abs_residuals_sorted": [0.1]},
            "domain": {
                "gpus_seen": [],
                "vendors_seen": [],
                "generations_seen": [],
                "numeric_ranges": {},
                "categories_seen": {},
            },
        }),
        model_text=text,
    )
    np.testing.assert_allclose(model.predict_log_ratio(X), reg.predict(X), rtol=1e-9)


def test_too_few_cpu_rows_share_the_accelerator_booster(data):
    X, y, cpu = data
    few = cpu & (np.cumsum(cpu) <= 10)
    keep = ~cpu | few
    reg = LGBMRatioRegressor(LGBMConfig(n_estimators=20)).fit(X[keep], y[keep])
    assert reg.cpu_booster_ is None and CPU_MARKER not in reg.model_text()
