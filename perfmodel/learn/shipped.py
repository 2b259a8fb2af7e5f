"""The shipped learned model (models/throughput.lgb.txt + models/metadata.json) and the interface
the predictor calls: `load_shipped_model()` and `LearnedModel.correct()`.

Never imports mlflow, torch or scikit-learn. The booster text file is loaded by LightGBM itself
(`lightgbm.Booster(model_str=...)`), imported lazily on the first prediction. LightGBM's package
import pulls in its optional integrations (scikit-learn, dask, pyarrow...), over a second of the
`perfmodel predict` cold-start budget; the one-shot CLI process sets `LEAN_LIGHTGBM_IMPORT` so
those integrations are hidden while LightGBM loads (see `import_lightgbm`). Library users get a
normal import. A correction is returned in
log space: the predictor computes step time = t_bound * exp(log_ratio) and its interval
t_bound * exp(log_low) .. t_bound * exp(log_high).

Interval policy (recorded in metadata["interval_policy"]):
  * the half-width is the conformal quantile of out-of-fold |residuals| from cross-validation
    that holds out whole accelerators, so every interval speaks for predicting unseen hardware;
  * a GPU that was never in training gets that interval unchanged (it is what the calibration
    measured) plus a warning;
  * a model family that was never in training gets the larger of that quantile and the one from
    cross-validation holding out whole model families, plus a warning;
  * a query outside the training domain - unseen accelerator vendor or generation, unseen
    architecture / compute dtype / framework / strategy, or parameters, tokens per micro-batch or
    GPU count beyond the training range - gets the half-width times `ood_widening` and a warning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfmodel.errors import ConfigError, DataError

if TYPE_CHECKING:
    from perfmodel.analytic import AnalyticEstimate
    from perfmodel.workload import Workload

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL_DIR = REPO_ROOT / "models"
MODEL_FILE = "throughput.lgb.txt"
METADATA_FILE = "metadata.json"
METADATA_FORMAT = 1

OOD_WIDENING = 1.5
"""Half-width multiplier for out-of-domain queries."""
RANGE_CHECKED_FEATURES: dict[str, str] = {
    "log_params_total": "parameter count",
    "log_tokens_per_micro_batch": "tokens per micro-batch",
    "log_num_gpus": "GPU count",
    "quantization_bits": "base-weight quantization bits (0 = none)",
}
"""Numeric features whose training range is enforced (name -> words for the warning)."""
RANGE_TOLERANCE = 0.05
"""Slack on the (log-scale) range before a value counts as outside it."""
CATEGORY_CHECKED_FEATURES: dict[str, str] = {
    "arch": "architecture",
    "compute_dtype": "compute dtype",
    "framework": "software stack",
    "strategy": "parallel strategy",
}
"""Categorical features whose levels must have been seen in training."""


def conformal_quantile(sorted_scores: Sequence[float], confidence: float) -> float:
    """The split-conformal quantile: the ceil(confidence * (n + 1))-th smallest score, as MAPIE's
    `_compute_regression_quantile` computes it (numpy 'lower' quantile at ceil(c(n+1))/n).
    Returns +inf when n is too small to reach the level."""
    n = len(sorted_scores)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    if n == 0:
        return math.inf
    k = math.ceil(confidence * (n + 1))
    if k > n:
        return math.inf
    return float(sorted_scores[max(k, 1) - 1])


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


def _fmt_range(feature: str, lo: float, hi: float) -> str:
    if feature.startswith("log_params"):
        return f"{10**lo:.3g}..{10**hi:.3g}"
    if feature.startswith("log_"):  # log2 features
        return f"{2**lo:.4g}..{2**hi:.4g}"
    return f"{lo:.4g}..{hi:.4g}"


def _fmt_value(feature: str, value: float) -> str:
    if feature.startswith("log_params"):
        return f"{10**value:.3g}"
    if feature.startswith("log_"):
        return f"{2**value:.4g}"
    return f"{value:.4g}"


LEAN_LIGHTGBM_IMPORT = False
"""Set by the CLI only: hide LightGBM's optional integrations while importing it (a process that
later trains with LightGBM's scikit-learn API must not set this)."""

_OPTIONAL_LIGHTGBM_INTEGRATIONS = ("sklearn", "dask", "datatable", "graphviz", "matplotlib", "pyarrow", "cffi")


def import_lightgbm() -> Any:
    """`import lightgbm`; lean (without its optional integrations) when LEAN_LIGHTGBM_IMPORT."""
    import sys

    if "lightgbm" in sys.modules or not LEAN_LIGHTGBM_IMPORT:
        import lightgbm

        return lightgbm
    hidden = [name for name in _OPTIONAL_LIGHTGBM_INTEGRATIONS if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # makes `import name` raise ImportError
    try:
        import lightgbm
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return lightgbm


class LearnedModel:
    """A LightGBM model of log(t / t_bound) plus its conformal calibration and training domain.

    `trees` is a `lightgbm.Booster`, or None to build one lazily from `model_text`."""

    kind: str = "learned"

    def __init__(self, trees: Any, metadata: dict[str, Any], model_text: str | None = None) -> None:
        self._booster = trees
        self._model_text = model_text
        if trees is None and model_text is None:
            raise DataError("a LearnedModel needs a booster or its model text")
        self.metadata = metadata
        self.version: str = str(metadata.get("version", "unversioned"))
        self.trained_rows: int = int(metadata.get("trained_rows", 0))
        self.feature_names: tuple[str, ...] = tuple(metadata["feature_names"])
        self._scores: list[float] = list(metadata["conformal"]["abs_residuals_sorted"])
        family = metadata["conformal"].get("family") or {}
        self._family_scores: list[float] = list(family.get("abs_residuals_sorted") or [])
        self.ood_widening: float = float(metadata.get("ood_widening", OOD_WIDENING))

    # --- persistence --------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> LearnedModel:
        """Load from a directory holding throughput.lgb.txt and metadata.json."""
        path = Path(path)
        try:
            metadata = json.loads((path / METADATA_FILE).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"cannot read {path / METADATA_FILE}: {exc}") from exc
        if int(metadata.get("format", 0)) != METADATA_FORMAT:
            raise DataError(
                f"{path / METADATA_FILE} has format {metadata.get('format')!r}, expected "
                f"{METADATA_FORMAT}; retrain with `perfmodel train`"
            )
        try:
            text = (path / MODEL_FILE).read_text()
        except OSError as exc:
            raise DataError(f"cannot read {path / MODEL_FILE}: {exc}") from exc
        return cls(None, metadata, model_text=text)

    def save(self, path: str | Path) -> Path:
        """Write throughput.lgb.txt and metadata.json into `path` (created if needed)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self._model_text is not None:
            (path / MODEL_FILE).write_text(self._model_text)
        else:
            self._booster.save_model(str(path / MODEL_FILE))
        (path / METADATA_FILE).write_text(json.dumps(self.metadata, indent=1, sort_keys=True) + "\n")
        return path

    @property
    def booster(self) -> Any:
        """The `lightgbm.Booster` (loaded from the model text on first use)."""
        if self._booster is None:
            self._booster = import_lightgbm().Booster(model_str=self._model_text)
        return self._booster

    # --- intervals ----------------------------------------------------------------------------

    def half_width(self, confidence: float, calibration: str = "hardware") -> tuple[float, tuple[str, ...]]:
        """Conformal half-width of the log interval at `confidence` from the residuals of
        cross-validation holding out whole accelerators (`calibration="hardware"`) or whole model
        families ("family"; falls back to hardware x widening when the model has none). Warns
        when the calibration set is too small for the level (then the largest residual is used)."""
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
            raise ConfigError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
        scores = self._scores
        factor = 1.0
        if calibration == "family":
            if self._family_scores:
                scores = self._family_scores
            else:
                factor = self.ood_widening
        q = conformal_quantile(scores, float(confidence))
        if math.isinf(q):
            top = scores[-1] if scores else 1.0
            return top * factor, (
                f"only {len(scores)} calibration residuals: {confidence:.0%} interval uses the "
                f"largest one and may under-cover",
            )
        return q * factor, ()

    # --- prediction ---------------------------------------------------------------------------

    def predict_log_ratio(self, X: Any) -> Any:
        import numpy as np

        return np.asarray(self.booster.predict(X[list(self.feature_names)]), dtype=float)

    def domain_warnings(
        self,
        X: Any,
        gpus: Sequence[str],
        vendors: Sequence[str],
        generations: Sequence[str],
        families: Sequence[str],
    ) -> list[tuple[tuple[str, ...], bool, bool]]:
        """Per row: (warnings, unseen model family?, widen?) from the training domain."""
        dom = self.metadata["domain"]
        families_seen = set(dom.get("families_seen", ()))
        gpus_seen = set(dom["gpus_seen"])
        vendors_seen = set(dom["vendors_seen"])
        generations_seen = set(dom["generations_seen"])
        ranges = dom["numeric_ranges"]
        levels_seen = dom["categories_seen"]
        out: list[tuple[tuple[str, ...], bool, bool]] = []
        records = X.to_dict("records")
        for row, gpu, vendor, generation, family in zip(
            records, gpus, vendors, generations, families, strict=True
        ):
            warns: list[str] = []
            widen = False
            new_family = family not in families_seen
            if new_family:
                warns.append(
                    f"model family {family!r} was not in the training data; the interval is "
                    f"calibrated on held-out-model-family errors"
                )
            if vendor not in vendors_seen:
                widen = True
                warns.append(
                    f"accelerator vendor {vendor!r} was not in the training data "
                    f"(seen: {', '.join(sorted(vendors_seen))}); interval widened x{self.ood_widening:g}"
                )
            elif vendor != "cpu" and generation not in generations_seen:
                widen = True
                warns.append(
                    f"accelerator generation {generation!r} was not in the training data; "
                    f"interval widened x{self.ood_widening:g}"
                )
            if gpu not in gpus_seen and not widen:
                warns.append(
                    f"{gpu} was not in the training data: the prediction transfers from similar "
                    f"accelerators; the interval is calibrated on held-out-hardware errors"
                )
            for feature, words in RANGE_CHECKED_FEATURES.items():
                lo, hi = ranges.get(feature, (None, None))
                value = row.get(feature)
                if lo is None or value is None:
                    continue
                if value < lo - RANGE_TOLERANCE or value > hi + RANGE_TOLERANCE:
                    widen = True
                    warns.append(
                        f"{words} {_fmt_value(feature, value)} is outside the training range "
                        f"{_fmt_range(feature, lo, hi)}; interval widened x{self.ood_widening:g}"
                    )
            for feature, words in CATEGORY_CHECKED_FEATURES.items():
                value = row.get(feature)
                seen = levels_seen.get(feature)
                if seen is None or value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                if str(value) not in seen:
                    widen = True
                    warns.append(
                        f"{words} {value!r} was not in the training data; interval widened "
                        f"x{self.ood_widening:g}"
                    )
            out.append((tuple(warns), new_family, widen))
        return out

    def correct_frame(
        self,
        X: Any,
        gpus: Sequence[str],
        vendors: Sequence[str],
        generations: Sequence[str],
        families: Sequence[str],
        confidence: float = 0.9,
    ) -> list[Correction]:
        """Corrections for a feature frame (`perfmodel.features.feature_frame`) whose rows ran
        on `gpus` (catalog keys) of the given vendors and generations, for models of `families`."""
        pred = self.predict_log_ratio(X)
        half = self.half_widths(X, gpus, vendors, generations, families, confidence)
        return [
            Correction(log_ratio=float(v), log_low=float(v - h), log_high=float(v + h), warnings=w)
            for v, (h, w) in zip(pred, half, strict=True)
        ]

    def half_widths(
        self,
        X: Any,
        gpus: Sequence[str],
        vendors: Sequence[str],
        generations: Sequence[str],
        families: Sequence[str],
        confidence: float,
    ) -> list[tuple[float, tuple[str, ...]]]:
        """Per row: the interval half-width (log) after the interval policy, and the warnings."""
        q_hw, warn_hw = self.half_width(confidence, "hardware")
        q_fam: float | None = None
        warn_fam: tuple[str, ...] = ()
        out = []
        for warns, new_family, widen in self.domain_warnings(X, gpus, vendors, generations, families):
            q, level_warn = q_hw, warn_hw
            if new_family:
                if q_fam is None:
                    q_fam, warn_fam = self.half_width(confidence, "family")
                if q_fam > q:
                    q, level_warn = q_fam, warn_fam
            if widen:
                q *= self.ood_widening
            out.append((q, level_warn + warns))
        return out

    def correct(
        self, items: list[tuple[Workload, AnalyticEstimate]], confidence: float = 0.9
    ) -> list[Correction]:
        """The learned correction for each (workload, analytic estimate)."""
        from perfmodel.features import feature_frame

        if not items:
            return []
        X = feature_frame((w, est, True) for w, est in items)
        return self.correct_frame(
            X,
            [w.gpu.name for w, _ in items],
            [w.gpu.vendor for w, _ in items],
            [w.gpu.generation for w, _ in items],
            [w.model.family for w, _ in items],
            confidence,
        )


def load_shipped_model(path: str | Path | None = None) -> LearnedModel | None:
    """The model exported into `path` (default <repo>/models); None if there is none."""
    path = Path(path) if path is not None else DEFAULT_MODEL_DIR
    if not (path / MODEL_FILE).is_file() or not (path / METADATA_FILE).is_file():
        return None
    return LearnedModel.load(path)
