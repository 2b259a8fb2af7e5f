"""perfmodel: measured, calibrated predictions of deep-learning training time and memory.

Nothing heavy is imported here: torch, mlflow and lightgbm load only inside the functions that
need them, so `import perfmodel` and the CLI start fast.
"""

__version__ = "0.1.0"

_LAZY_API = {
    "predict": "perfmodel.predict",  # the submodule, made callable below
    "sweep": "perfmodel.decide.sweep",
    "compare": "perfmodel.decide.compare",
    "advise": "perfmodel.decide.advise",
}
"""Public functions loaded on first use (module __getattr__, PEP 562) so `import perfmodel` stays light."""


def __getattr__(name: str) -> object:
    if name in _LAZY_API:
        import importlib

        module = importlib.import_module(_LAZY_API[name])
        return module if name == "predict" else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_predict_callable() -> None:
    """`perfmodel.predict(config, **overrides)` is the public function of perfmodel/api.py, and
    `perfmodel.predict` is also the submodule perfmodel/predict.py (`perfmodel.predict.predict(workload)`,
    `from perfmodel.predict import PredictedRun`). Both hold: when the submodule is imported, the
    package makes it callable, the call going to `perfmodel.api.predict`."""
    import sys
    import types

    class _PredictModule(types.ModuleType):
        def __call__(self, *args: object, **kwargs: object) -> object:
            from perfmodel.api import predict

            return predict(*args, **kwargs)  # type: ignore[arg-type]

    class _Package(types.ModuleType):
        def __setattr__(self, name: str, value: object) -> None:
            if name == "predict" and type(value) is types.ModuleType:
                value.__class__ = _PredictModule
            super().__setattr__(name, value)

    sys.modules[__name__].__class__ = _Package


_make_predict_callable()
