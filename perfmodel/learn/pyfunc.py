"""The registered MLflow model: a pyfunc wrapping the shipped model directory (LightGBM booster,
conformal residuals, training domain) together with the preprocessing (feature-table rows ->
workload -> analytic estimate -> features), so the registry entry predicts from raw rows.

Input: a DataFrame of feature-table rows (perfmodel/schema.py columns; measurements not needed).
Output: one row per input with t_bound_s, log_ratio, log_low, log_high, step_time_s,
step_time_low_s, step_time_high_s and warnings ('; '-joined). `params={"confidence": 0.9}`.

This module imports mlflow; only training code imports it.
"""

from __future__ import annotations

from mlflow.pyfunc import PythonModel


def pip_requirements() -> list[str]:
    import lightgbm
    import numpy
    import pandas

    return [
        f"lightgbm=={lightgbm.__version__}",
        f"pandas=={pandas.__version__}",
        f"numpy=={numpy.__version__}",
        "pyyaml",
        "perfmodel",
    ]


class PerfmodelThroughputModel(PythonModel):  # type: ignore[misc]
    """Step time = t_bound * exp(learned log ratio), with conformal intervals."""

    # Inputs are whole feature-table rows (validated by perfmodel.schema / workload_from_row),
    # not a fixed MLflow schema: skip MLflow's type-hint validation and its warning.
    _skip_type_hint_validation = True

    def load_context(self, context):  # type: ignore[no-untyped-def]
        from perfmodel.learn.shipped import LearnedModel

        self._model = LearnedModel.load(context.artifacts["model_dir"])

    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]
        import math

        import pandas as pd

        from perfmodel.analytic import estimate
        from perfmodel.features import workload_from_row

        confidence = float((params or {}).get("confidence", 0.9))
        items = []
        for row in pd.DataFrame(model_input).to_dict("records"):
            w = workload_from_row(row)
            items.append((w, estimate(w)))
        corrections = self._model.correct(items, confidence)
        rows = []
        for (_, est), c in zip(items, corrections, strict=True):
            bound = est.t_bound_s
            rows.append(
                {
                    "t_bound_s": bound,
                    "log_ratio": c.log_ratio,
                    "log_low": c.log_low,
                    "log_high": c.log_high,
                    "step_time_s": bound * math.exp(c.log_ratio),
                    "step_time_low_s": bound * math.exp(c.log_low),
                    "step_time_high_s": bound * math.exp(c.log_high),
                    "warnings": "; ".join(c.warnings),
                }
            )
        return pd.DataFrame(rows)
