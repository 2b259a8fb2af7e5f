"""perfmodel: measured, calibrated predictions of deep-learning training time and memory.

Public API (loaded on first use, PEP 562, so `import perfmodel` and the CLI start fast; torch,
mlflow and lightgbm load only inside the functions that need them):

    perfmodel.predict(config, **overrides)   -> PredictedRun   (perfmodel.api)
    perfmodel.sweep(config, vary, ...)       -> SweepResult    (perfmodel.decide.sweep)
    perfmodel.compare(configs, ...)          -> Comparison     (perfmodel.decide.compare)
    perfmodel.advise(config, ...)            -> Advice         (perfmodel.decide.advise)

The internal predictor over a resolved `Workload` is `perfmodel.prediction.predict`.
"""

import importlib

__version__ = "0.1.0"

_LAZY_API = {
    "predict": "perfmodel.api",
    "sweep": "perfmodel.decide.sweep",
    "compare": "perfmodel.decide.compare",
    "advise": "perfmodel.decide.advise",
}
"""Public function -> the module that defines it."""

__all__ = ["__version__", *_LAZY_API]


def __getattr__(name: str) -> object:
    if name in _LAZY_API:
        return getattr(importlib.import_module(_LAZY_API[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
