"""The learned model as the predictor calls it: `load_shipped_model()` and `LearnedModel.correct()`.

A correction is returned in log space: step time = t_bound * exp(log_ratio) and its interval
t_bound * exp(log_low) .. t_bound * exp(log_high), floored (`learned_step_interval`, what the
predictor and the registered pyfunc both use); the interval's width follows
`perfmodel.learn.interval_policy`. Files are read and verified by `perfmodel.learn.model_files`
before LightGBM sees them; a damaged or mismatched model folder is one warning line and the
analytic fallback, never a crash.

Never imports mlflow, torch or scikit-learn; LightGBM is imported on the first prediction
(`perfmodel.learn.lean_import`). `correct` hands LightGBM a numpy array of feature codes
(`perfmodel.features.feature_matrix`), never a DataFrame, so a prediction does not import pandas
(0.3-0.8 s of a cold start); `correct_frame` keeps the DataFrame path for training and evaluation.
In a lean process (`lean_import.use_lean_import()`) pandas is hidden from LightGBM's import
too, unless something has imported it already.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from perfmodel.errors import DataError
from perfmodel.features import CATEGORY_LEVELS, categorized, feature_matrix, feature_vector
from perfmodel.interval import Interval, floored
from perfmodel.learn import lean_import, model_files
from perfmodel.learn.devices import join_model_texts, predict_by_device, split_model_text
from perfmodel.learn.interval_policy import DomainCheck, IntervalPolicy, Query
from perfmodel.learn.metadata import ModelMetadata, read_model_folder, write_model_folder
from perfmodel.paths import model_dir

if TYPE_CHECKING:
    from perfmodel.analytic import AnalyticEstimate
    from perfmodel.workload import Workload

_log = logging.getLogger("perfmodel.learn")


@dataclass(frozen=True)
class Correction:
    """The learned correction of one analytic estimate, in log space."""

    log_ratio: float
    """Predicted log(step time / roofline bound)."""
    log_low: float
    """Lower end of the interval of log(step time / bound)."""
    log_high: float
    """Upper end of the interval of log(step time / bound)."""
    warnings: tuple[str, ...]
    """Why this prediction deserves less trust (empty when in domain)."""


class Corrector(Protocol):
    """What the predictor holds: a learned correction of analytic estimates (`LearnedModel`, or a
    stand-in in tests). `perfmodel.prediction` calls nothing else."""

    @property
    def version(self) -> str:
        """The model's version (reported as `model.version` in `predict --json`)."""
        ...

    @property
    def trained_rows(self) -> int:
        """Rows it was trained on (`model.trained_rows`)."""
        ...

    def correct(
        self, items: list[tuple[Workload, AnalyticEstimate]], confidence: float = 0.9
    ) -> list[Correction]:
        """One correction per (workload, analytic estimate), in order."""
        ...


def learned_step_interval(
    est: AnalyticEstimate, log_ratio: float, log_low: float, log_high: float
) -> tuple[Interval, bool]:
    """Step time from the learned log ratio and its interval, floored (see `floored`)."""
    step = Interval(
        estimate=est.t_bound_s * math.exp(log_ratio),
        low=est.t_bound_s * math.exp(log_low),
        high=est.t_bound_s * math.exp(log_high),
    )
    return floored(step, est.t_roofline_s)


def query_for(w: Workload, features: Mapping[str, Any]) -> Query:
    """The interval-policy view of one workload and its feature row."""
    return Query(
        features=features,
        gpu=w.gpu.name,
        vendor=w.gpu.vendor,
        generation=w.gpu.generation,
        model_family=w.model.family,
    )


class LearnedModel:
    """A LightGBM model of log(t / t_bound) plus its conformal calibration and training domain.

    `trees` is a fitted `LGBMRatioRegressor` or `lightgbm.Booster`, or None to build the
    booster(s) lazily from `model_text` (the accelerator booster, and after a marker line a CPU
    booster: `regressor.join_model_texts`)."""

    kind: str = "learned"

    def __init__(self, trees: Any, metadata: ModelMetadata, model_text: str | None = None) -> None:
        if trees is None and model_text is None:
            raise DataError("a LearnedModel needs a booster or its model text")
        self._boosters: tuple[Any, Any] | None = None
        self._model_text = model_text
        if trees is not None:
            cpu = getattr(trees, "cpu_booster_", None)
            self._boosters = (getattr(trees, "booster_", trees), cpu)
        self.metadata = metadata
        """The model's metadata.json; provenance (version, run) may be replaced, the rest is fixed."""
        self.feature_names: tuple[str, ...] = metadata.feature_names
        self.policy = IntervalPolicy.from_metadata(metadata)
        self.ood_widening: float = self.policy.ood_widening

    @property
    def version(self) -> str:
        return self.metadata.version

    @property
    def trained_rows(self) -> int:
        return self.metadata.trained_rows

    # --- persistence (model_files does the reading and writing) ---------------------------------

    @classmethod
    def load(cls, path: str | Path) -> LearnedModel:
        """Load a verified model folder; raises `model_files.ModelFileError` when it is damaged,
        mismatched or of another format."""
        metadata, text = read_model_folder(path)
        return cls(None, metadata, model_text=text)

    def save(self, path: str | Path) -> Path:
        """Write throughput.lgb.txt and metadata.json (stamped with the model's hash) into `path`."""
        return write_model_folder(path, self.metadata, self.model_text)

    @property
    def model_text(self) -> str:
        """The booster(s) in LightGBM's text format (`regressor.join_model_texts`)."""
        if self._model_text is None:
            main, cpu = self.boosters
            self._model_text = join_model_texts(
                str(main.model_to_string()), None if cpu is None else str(cpu.model_to_string())
            )
        return self._model_text

    @property
    def boosters(self) -> tuple[Any, Any]:
        """(accelerator booster, CPU booster or None), parsed from the verified text on first use."""
        if self._boosters is None:
            lean = lean_import.LEAN_LIGHTGBM_IMPORT
            with _pandas_hidden(lean):
                lightgbm = lean_import.import_lightgbm(lean=lean)
            main, cpu = split_model_text(str(self._model_text))
            self._boosters = (
                lightgbm.Booster(model_str=main),
                None if cpu is None else lightgbm.Booster(model_str=cpu),
            )
        return self._boosters

    @property
    def booster(self) -> Any:
        """The accelerator `lightgbm.Booster` (the one that serves every row without a CPU booster)."""
        return self.boosters[0]

    # --- prediction -----------------------------------------------------------------------------

    def half_width(self, confidence: float, calibration: str = "hardware") -> tuple[float, tuple[str, ...]]:
        """Conformal half-width at `confidence` (see `IntervalPolicy.half_width`)."""
        return self.policy.half_width(confidence, calibration)

    def check(self, query: Query) -> DomainCheck:
        """How `query` relates to the training domain."""
        return self.policy.check(query)

    def category_levels(self, booster: Any = None) -> dict[str, list[str]]:
        """Categorical feature -> the levels whose positions are its codes for `booster` (default:
        the accelerator booster): the booster's own `pandas_categorical` (what LightGBM re-codes a
        DataFrame to), else `perfmodel.features.CATEGORY_LEVELS`."""
        booster = self.booster if booster is None else booster
        names = [n for n in self.feature_names if n in CATEGORY_LEVELS]
        stored = getattr(booster, "pandas_categorical", None)
        if stored and len(stored) == len(names):
            return {n: list(levels) for n, levels in zip(names, stored, strict=True)}
        return {n: list(CATEGORY_LEVELS[n]) for n in names}

    def predict_log_ratio(self, X: Any) -> Any:
        """Predicted log(t / t_bound) for a feature DataFrame (`perfmodel.features.feature_frame`)."""
        # numpy: kept out of import time (the CLI's cold start)
        import numpy as np

        main, cpu = self.boosters
        if not _lightgbm_reads_pandas():  # LightGBM imported with pandas hidden: give it codes
            return self.predict_log_ratio_rows(X.to_dict("records"))
        raw = np.asarray(predict_by_device(main, cpu, X[list(self.feature_names)]), dtype=float)
        return self._blended(raw, X.to_dict("records"))

    def _blended(self, raw: Any, rows: Sequence[Mapping[str, Any]]) -> Any:
        """The boosters' values shrunk toward the step overhead by the evidence near each row
        (`perfmodel.learn.evidence`; models without evidence: unchanged)."""
        # numpy: kept out of import time (the CLI's cold start)
        import numpy as np

        evidence = self.metadata.evidence
        if evidence is None:
            return np.asarray(raw, dtype=float)
        return np.asarray(evidence.blend([float(v) for v in raw], rows), dtype=float)

    def predict_log_ratio_rows(self, rows: Sequence[Mapping[str, Any]]) -> Any:
        """Predicted log(t / t_bound) for feature vectors (`perfmodel.features.feature_vector`),
        through a numpy array of category codes: the same numbers as `predict_log_ratio` on their
        `feature_frame`, without pandas."""
        # numpy: kept out of import time (the CLI's cold start)
        import numpy as np

        main, cpu = self.boosters
        levels = self.category_levels(main)
        X = feature_matrix(rows, self.feature_names, levels)
        is_cpu = np.array([row.get("vendor") == "cpu" for row in rows], dtype=bool)
        if cpu is None or not is_cpu.any() or self.category_levels(cpu) == levels:
            return self._blended(predict_by_device(main, cpu, X, cpu=is_cpu), rows)
        # the two boosters code a category differently: each gets its own array
        out = np.empty(len(rows), dtype=float)
        if (~is_cpu).any():
            out[~is_cpu] = main.predict(X[~is_cpu])
        cpu_rows = [row for row, c in zip(rows, is_cpu, strict=True) if c]
        out[is_cpu] = cpu.predict(feature_matrix(cpu_rows, self.feature_names, self.category_levels(cpu)))
        return self._blended(out, rows)

    def correct_frame(self, X: Any, queries: Sequence[Query], confidence: float = 0.9) -> list[Correction]:
        """Corrections for a feature frame (`perfmodel.features.feature_frame`) whose row i is
        `queries[i]`."""
        if len(queries) != len(X):
            raise DataError(f"{len(queries)} queries for {len(X)} feature rows")
        return self._corrections(self.predict_log_ratio(X), queries, confidence)

    def _corrections(self, pred: Any, queries: Sequence[Query], confidence: float) -> list[Correction]:
        out = []
        evidence = self.metadata.evidence
        shrink = evidence.shrink([q.features for q in queries]) if evidence is not None else [1.0] * len(queries)
        for value, query, s in zip(pred, queries, shrink, strict=True):  # `pred`: already blended
            half, warnings = self.policy.interval(query, confidence)
            if s < 0.5:
                near = s * evidence.shrink_runs / (1.0 - s) if evidence is not None else 0.0
                carry = "the kernel model and its step overhead carry" if evidence is None or evidence.offset(
                    query.features) else "the kernel model carries"  # fmt: skip
                kept = s * (evidence.share(query.features) if evidence is not None else 1.0)
                warnings = (
                    f"few measured runs like this one ({near:.0f} on similar accelerators, scale and stack): the "
                    f"learned correction is trusted {kept:.0%}; {carry} the estimate",
                    *warnings,
                )
            out.append(
                Correction(
                    log_ratio=float(value),
                    log_low=float(value - half),
                    log_high=float(value + half),
                    warnings=warnings,
                )
            )
        return out

    def correct(
        self, items: list[tuple[Workload, AnalyticEstimate]], confidence: float = 0.9
    ) -> list[Correction]:
        """The learned correction for each (workload, analytic estimate), without pandas."""
        if not items:
            return []
        rows = [feature_vector(w, est, includes_optimizer_step=True) for w, est in items]
        queries = [query_for(w, categorized(row)) for (w, _), row in zip(items, rows, strict=True)]
        return self._corrections(self.predict_log_ratio_rows(rows), queries, confidence)


@contextlib.contextmanager
def _pandas_hidden(lean: bool) -> Iterator[None]:
    """While LightGBM is imported for a lean process, `import pandas` fails (LightGBM then runs
    without its pandas support, which `correct` does not use), unless pandas or LightGBM is
    loaded already."""
    hide = lean and "pandas" not in sys.modules and "lightgbm" not in sys.modules
    if hide:
        sys.modules["pandas"] = None  # type: ignore[assignment]  # makes `import pandas` raise ImportError
    try:
        yield
    finally:
        if hide and sys.modules.get("pandas", 0) is None:
            del sys.modules["pandas"]


def _lightgbm_reads_pandas() -> bool:
    """Whether the imported LightGBM was imported with its pandas support."""
    compat = sys.modules.get("lightgbm.compat")
    return bool(getattr(compat, "PANDAS_INSTALLED", True))


def load_shipped_model(path: str | Path | None = None) -> LearnedModel | None:
    """The model in `path` (default: `perfmodel.paths.model_dir()`, the shipped models/).

    None when there is none, and also when it is damaged or does not match its metadata: then
    one warning line says why (logger `perfmodel.learn`) and the caller falls back to the
    analytic model as it does for a missing one. `LearnedModel.load` raises instead."""
    path = Path(path) if path is not None else model_dir()
    if not model_files.has_model(path):
        return None
    try:
        return LearnedModel.load(path)
    except model_files.ModelFileError as exc:
        _log.warning("warning: learned model not used, falling back to the analytic model: %s", exc)
        return None
