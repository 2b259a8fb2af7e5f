"""The registered MLflow model: a pyfunc wrapping the model folder (LightGBM booster, conformal
residuals, training domain) together with the preprocessing (feature-table rows -> workload ->
analytic estimate -> features), so the registry entry predicts from raw rows.

Input: a DataFrame of feature-table rows (perfmodel/schema.py columns; measurements not needed).
Output: one row per input with t_bound_s, log_ratio, log_low, log_high, step_time_s,
step_time_low_s, step_time_high_s and warnings ('; '-joined). `params={"confidence": 0.9}`.
The logged signature is built from `perfmodel.schema` (`model_signature`), with training rows
as the input example.

This module imports mlflow (telemetry off, see `perfmodel.learn.lean_import.import_mlflow`); only
training code imports it.
"""

from __future__ import annotations

from typing import Any

from perfmodel.analytic import estimate
from perfmodel.features import workload_from_row
from perfmodel.learn.lean_import import import_mlflow
from perfmodel.learn.shipped import LearnedModel, learned_step_interval
from perfmodel.schema import COLUMNS

import_mlflow()

from mlflow.pyfunc import PythonModel  # noqa: E402

MEASURED_COLUMNS = (
    "step_time_s",
    "step_time_std_s",
    "step_times_s",
    "tokens_per_s",
    "samples_per_s",
    "peak_memory_gb",
    "achieved_tflops_per_gpu",
    "reported_mfu",
)
"""Feature-table columns that are measurements: never part of the model's input."""


def pip_requirements() -> list[str]:
    # LightGBM, numpy, pandas: only to name the versions the registered model needs
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


INPUT_TYPES = {"string": "string", "float64": "double", "Int64": "any", "boolean": "any"}
"""Feature-table dtype -> MLflow column type. Nullable integers and booleans are 'any': MLflow's
long and boolean columns cannot carry missing values, and declaring them double fails its
"safe conversion" check for integer input."""
PROVENANCE_COLUMNS = ("row_id", "source", "citation", "source_kind", "status", "benchmark_kind")
"""Required in the feature table, not needed to predict."""
OUTPUT_COLUMNS = (
    "t_bound_s",
    "log_ratio",
    "log_low",
    "log_high",
    "step_time_s",
    "step_time_low_s",
    "step_time_high_s",
)


def input_example(rows: Any, n: int = 3) -> Any:
    """The first `n` feature-table rows, as the model takes them (the signature's columns)."""
    columns = [spec.name for spec in model_signature().inputs.inputs]
    frame = rows.head(n).reset_index(drop=True)
    return frame[[c for c in columns if c in frame.columns]]


def model_signature() -> Any:
    """Input: every feature-table column but the measurements (each optional except those a
    workload cannot be built without); output: the columns of `predict_rows`; parameter
    `confidence` (default 0.9)."""
    # mlflow: seconds to import, only tracking needs it
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema
    from mlflow.types.schema import AnyType


    def col_type(dtype: str) -> Any:
        return AnyType() if INPUT_TYPES[dtype] == "any" else INPUT_TYPES[dtype]

    inputs: list[Any] = [
        ColSpec(col_type(c.dtype), c.name, required=c.required and c.name not in PROVENANCE_COLUMNS)
        for c in COLUMNS
        if c.name not in MEASURED_COLUMNS and c.dtype in INPUT_TYPES
    ]
    outputs: list[Any] = [ColSpec("double", name) for name in OUTPUT_COLUMNS] + [
        ColSpec("string", "warnings")
    ]
    params = ParamSchema([ParamSpec("confidence", "double", 0.9)])
    return ModelSignature(inputs=Schema(inputs), outputs=Schema(outputs), params=params)


def predict_rows(model: Any, rows: Any, confidence: float = 0.9) -> Any:
    """Predictions of a `LearnedModel` for feature-table rows (the pyfunc's output frame)."""

    # pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import pandas as pd


    items = []
    for row in pd.DataFrame(rows).to_dict("records"):
        w = workload_from_row(row)
        items.append((w, estimate(w)))
    corrections = model.correct(items, confidence)
    out = []
    for (_, est), c in zip(items, corrections, strict=True):
        step, _ = learned_step_interval(est, c.log_ratio, c.log_low, c.log_high)  # as predict: floored
        out.append(
            {
                "t_bound_s": est.t_bound_s,
                "log_ratio": c.log_ratio,
                "log_low": c.log_low,
                "log_high": c.log_high,
                "step_time_s": step.estimate,
                "step_time_low_s": step.low,
                "step_time_high_s": step.high,
                "warnings": "; ".join(c.warnings),
            }
        )
    return pd.DataFrame(out)


class PerfmodelThroughputModel(PythonModel):  # type: ignore[misc]
    """Step time = t_bound * exp(learned log ratio), with conformal intervals."""

    # Inputs are whole feature-table rows (validated by perfmodel.schema / workload_from_row);
    # the signature documents them, type hints would only duplicate it.
    _skip_type_hint_validation = True

    def load_context(self, context):  # type: ignore[no-untyped-def]

        self._model = LearnedModel.load(context.artifacts["model_dir"])

    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]
        confidence = float((params or {}).get("confidence", 0.9))
        return predict_rows(self._model, model_input, confidence)
