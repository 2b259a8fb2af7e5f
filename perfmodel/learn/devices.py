"""Device classes of the learned correction: CPU rows get their own booster (see
`perfmodel.learn.regressor`), and both boosters live in one stored model text. No scikit-learn
here (the predictor imports this on its cold-start path)."""

from __future__ import annotations

from typing import Any

from perfmodel.errors import DataError

MIN_ROWS_PER_DEVICE_CLASS = 30
"""Rows each device class needs before it gets a booster of its own."""
CPU_MARKER = "\n# perfmodel device class: cpu\n"
"""Line that separates the accelerator booster's text from the CPU booster's in the model text."""


def cpu_rows(X: Any) -> Any:
    """Boolean mask of the rows measured on (or asked of) a CPU (X: a feature DataFrame)."""
    # numpy: kept out of import time (the CLI's cold start)
    import numpy as np

    if "vendor" not in X:
        return np.zeros(len(X), dtype=bool)
    return np.asarray(X["vendor"].astype(str) == "cpu", dtype=bool)


def predict_by_device(booster: Any, cpu_booster: Any, X: Any, cpu: Any = None) -> Any:
    """Predictions routed by device class (all rows to `booster` when there is no CPU booster).

    `X` is a feature DataFrame, or a 2-D float array of `perfmodel.features.feature_matrix`
    (category codes; no pandas needed); `cpu` is the boolean mask of CPU rows, required with an
    array when there is a CPU booster (default: `cpu_rows(X)`)."""
    # numpy: kept out of import time (the CLI's cold start)
    import numpy as np

    out = np.empty(len(X), dtype=float)
    if cpu_booster is None:
        cpu = np.zeros(len(X), dtype=bool)
    elif cpu is None:
        if isinstance(X, np.ndarray):
            raise DataError("predict_by_device needs the CPU-row mask `cpu` for a feature array")
        cpu = cpu_rows(X)
    cpu = np.asarray(cpu, dtype=bool)
    if (~cpu).any():
        out[~cpu] = booster.predict(X[~cpu])
    if cpu.any():
        out[cpu] = cpu_booster.predict(X[cpu])
    return out


def join_model_texts(text: str, cpu_text: str | None) -> str:
    """The stored model text: the accelerator booster, then (if any) the CPU booster."""
    return text if cpu_text is None else text.rstrip("\n") + "\n" + CPU_MARKER + cpu_text


def split_model_text(text: str) -> tuple[str, str | None]:
    """(accelerator booster text, CPU booster text or None) of a stored model text."""
    if CPU_MARKER not in text:
        return text, None
    main, cpu = text.split(CPU_MARKER, 1)
    return main + "\n", cpu
