"""The interval policy: how wide the interval of one query is, and why it deserves less trust.

Recorded in every model's metadata ("interval_policy"):
  * the half-width is the conformal quantile of out-of-fold |residuals| from cross-validation
    that holds out whole sources (an unseen lab's setup), one vote per measured run, taken in the
    query's own regime (`perfmodel.learn.regimes`: Mondrian conformal), so a well-measured regime
    gets a narrow interval; a regime with fewer than `MIN_RUNS_PER_CELL` runs uses the nearest
    coarser regime's residuals widened by `THIN_EVIDENCE_WIDENING`, and a warning names it;
  * a GPU that was never in training (of a vendor and generation that were) gets that interval
    unchanged plus a warning: most sources are the only measurements of their accelerators, so
    the source-held-out residuals already include predicting unseen ones;
  * a model family that was never in training gets the larger of that quantile and the one from
    cross-validation holding out whole model families, taken in the query's regime and backed off
    the same way (models calibrated before that have the family quantile over all regimes), plus a
    warning;
  * a query outside the training domain - unseen accelerator vendor or generation, unseen
    architecture / compute dtype / strategy, or parameters, tokens per micro-batch or
    GPU count beyond the training range - gets the half-width times `ood_widening` and a warning.

Pure Python over one `Query` at a time; no numpy, pandas or LightGBM.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfmodel.errors import ConfigError
from perfmodel.learn.conformal import conformal_quantile
from perfmodel.learn.metadata import ModelMetadata, TrainingDomain
from perfmodel.learn.regimes import MIN_RUNS_PER_CELL, THIN_EVIDENCE_WIDENING, cell_keys, describe, regime_of

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
    "strategy": "parallel strategy",
}
"""Categorical features whose levels must have been seen in training."""


@dataclass(frozen=True, kw_only=True)
class Query:
    """One prediction query, as the interval policy sees it."""

    features: Mapping[str, Any]
    """The query's feature row (`perfmodel.features` names -> values; log features in log units)."""
    gpu: str
    """Accelerator catalog key."""
    vendor: str
    """Accelerator vendor (nvidia, amd, intel, cpu)."""
    generation: str
    """Accelerator generation (Ampere, Hopper, ...)."""
    model_family: str
    """Model family (llama, gpt, ...)."""


@dataclass(frozen=True, kw_only=True)
class DomainCheck:
    """How one query relates to the training domain."""

    warnings: tuple[str, ...]
    """Why the prediction deserves less trust (empty when in domain)."""
    new_family: bool
    """The model family was not in training: the family calibration applies."""
    widen: bool
    """The query is outside the training domain: the half-width is multiplied by the widening."""
    unseen_gpu: bool = False
    """The accelerator was not in training (its vendor and generation were): widened too."""


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


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def check_domain(query: Query, domain: TrainingDomain, widening: float) -> DomainCheck:
    """Warnings and verdicts for one query against the training domain."""
    warns: list[str] = []
    widen = False
    new_family = query.model_family not in domain.families_seen
    if new_family:
        warns.append(
            f"model family {query.model_family!r} was not in the training data; the interval is "
            f"calibrated on held-out-model-family errors"
        )
    if query.vendor not in domain.vendors_seen:
        widen = True
        warns.append(
            f"accelerator vendor {query.vendor!r} was not in the training data "
            f"(seen: {', '.join(sorted(domain.vendors_seen))}); interval widened x{widening:g}"
        )
    elif query.vendor != "cpu" and query.generation not in domain.generations_seen:
        widen = True
        warns.append(
            f"accelerator generation {query.generation!r} was not in the training data; "
            f"interval widened x{widening:g}"
        )
    unseen_gpu = query.gpu not in domain.gpus_seen and not widen
    if unseen_gpu:
        warns.append(
            f"{query.gpu} was not in the training data: the prediction transfers from similar "
            f"accelerators; the interval is calibrated on held-out-source errors"
        )
    for feature, words in RANGE_CHECKED_FEATURES.items():
        lo, hi = domain.numeric_ranges.get(feature, (None, None))
        value = query.features.get(feature)
        if lo is None or hi is None or value is None:
            continue
        if value < lo - RANGE_TOLERANCE or value > hi + RANGE_TOLERANCE:
            widen = True
            warns.append(
                f"{words} {_fmt_value(feature, value)} is outside the training range "
                f"{_fmt_range(feature, lo, hi)}; interval widened x{widening:g}"
            )
    for feature, words in CATEGORY_CHECKED_FEATURES.items():
        value = query.features.get(feature)
        seen = domain.categories_seen.get(feature)
        if seen is None or _missing(value):
            continue
        if str(value) not in seen:
            widen = True
            warns.append(f"{words} {value!r} was not in the training data; interval widened x{widening:g}")
    return DomainCheck(warnings=tuple(warns), new_family=new_family, widen=widen, unseen_gpu=unseen_gpu)


class IntervalPolicy:
    """The conformal calibration and training domain of one model, applied query by query."""

    def __init__(
        self,
        *,
        hardware_scores: Sequence[float],
        family_scores: Sequence[float],
        domain: TrainingDomain,
        ood_widening: float = OOD_WIDENING,
        regime_scores: Mapping[str, Sequence[float]] | None = None,
        min_runs_per_cell: int = MIN_RUNS_PER_CELL,
        thin_evidence_widening: float = THIN_EVIDENCE_WIDENING,
        regime_runs: Mapping[str, int] | None = None,
        family_regime_scores: Mapping[str, Sequence[float]] | None = None,
        family_regime_runs: Mapping[str, int] | None = None,
    ) -> None:
        self.hardware_scores = list(hardware_scores)
        """Sorted |log residuals| of the main (grouped) calibration, all regimes together."""
        self.regime_scores = {k: list(v) for k, v in (regime_scores or {}).items()}
        """Regime cell key -> sorted one-vote-per-run |log residuals| (Mondrian); empty for models
        calibrated before regimes existed (then every query uses `hardware_scores`)."""
        self.regime_runs = dict(regime_runs) if regime_runs else None
        """Regime cell key -> measured runs (before the per-source cap); None: count the scores."""
        self.min_runs_per_cell = int(min_runs_per_cell)
        self.thin_evidence_widening = float(thin_evidence_widening)
        self.family_scores = list(family_scores)
        """Sorted |log residuals| of the held-out-model-family calibration (may be empty)."""
        self.family_regime_scores = {k: list(v) for k, v in (family_regime_scores or {}).items()}
        """Regime cell key -> sorted |log residuals| of the held-out-model-family calibration (empty
        for models calibrated before it existed: an unseen family then takes `family_scores`)."""
        self.family_regime_runs = dict(family_regime_runs) if family_regime_runs else None
        self.domain = domain
        self.ood_widening = float(ood_widening)

    @classmethod
    def from_metadata(cls, metadata: ModelMetadata) -> IntervalPolicy:
        conformal, mondrian = metadata.conformal, metadata.conformal.mondrian
        return cls(
            hardware_scores=conformal.hardware.abs_residuals_sorted,
            family_scores=conformal.family.abs_residuals_sorted if conformal.family else (),
            domain=metadata.domain,
            ood_widening=OOD_WIDENING if metadata.ood_widening is None else metadata.ood_widening,
            regime_scores=mondrian.cells if mondrian else None,
            min_runs_per_cell=MIN_RUNS_PER_CELL
            if mondrian is None or mondrian.min_runs_per_cell is None
            else mondrian.min_runs_per_cell,
            thin_evidence_widening=THIN_EVIDENCE_WIDENING
            if mondrian is None or mondrian.thin_evidence_widening is None
            else mondrian.thin_evidence_widening,
            regime_runs=mondrian.runs if mondrian else None,
            family_regime_scores=conformal.family_mondrian.cells if conformal.family_mondrian else None,
            family_regime_runs=conformal.family_mondrian.runs if conformal.family_mondrian else None,
        )

    def regime_half_width(
        self, features: Mapping[str, Any], confidence: float, family: str | None = None
    ) -> tuple[float, tuple[str, ...]]:
        """Half-width (log) from the residuals of the query's regime (Mondrian conformal; `family`:
        the model family, see `regimes.APPROXIMATE_PLANS`): its own cell when it has
        `min_runs_per_cell` runs, else the nearest coarser cell that does (or the largest one),
        widened by `thin_evidence_widening`, with a warning naming what stands in."""
        if not self.regime_scores:
            return self.half_width(confidence, "hardware")
        return self._cells_half_width(
            self.regime_scores, self.regime_runs, self.hardware_scores, features, confidence, family
        )

    def family_half_width(
        self, features: Mapping[str, Any], confidence: float, family: str | None = None
    ) -> tuple[float, tuple[str, ...]]:
        """Half-width (log) for a model family never seen in training: the held-out-family
        calibration's residuals in the query's regime, backed off as `regime_half_width` does;
        the pooled family quantile (`half_width(..., "family")`) for a model without them."""
        if not self.family_regime_scores:
            return self.half_width(confidence, "family")
        return self._cells_half_width(
            self.family_regime_scores, self.family_regime_runs, self.family_scores, features, confidence, family
        )

    def _cells_half_width(
        self,
        cells: Mapping[str, Sequence[float]],
        cell_runs: Mapping[str, int] | None,
        pooled: Sequence[float],
        features: Mapping[str, Any],
        confidence: float,
        family: str | None,
    ) -> tuple[float, tuple[str, ...]]:
        keys = cell_keys(regime_of(features, family))

        def runs(key: str) -> int:
            if cell_runs is not None:
                return int(cell_runs.get(key, 0))
            return len(cells.get(key, ()))

        chosen = next((k for k in keys if runs(k) >= self.min_runs_per_cell), None)
        if chosen is None:  # nothing is well measured (a small model): the largest pool there is
            chosen = max(keys, key=runs)
        scores = cells.get(chosen, ()) or pooled
        q = conformal_quantile(scores, float(confidence))
        warns: tuple[str, ...] = ()
        if math.isinf(q):
            q = scores[-1] if scores else 1.0
            warns = (
                f"only {len(scores)} calibration runs: the {confidence:.0%} interval uses the largest residual",
            )
        if chosen != keys[0]:
            own = runs(keys[0])
            q *= self.thin_evidence_widening
            warns += (
                f"few measured runs like this one ({own} in regime {describe(keys[0])}): the interval "
                f"comes from {describe(chosen)} ({runs(chosen)} runs), widened x{self.thin_evidence_widening:g}",
            )
        return q, warns

    def half_width(self, confidence: float, calibration: str = "hardware") -> tuple[float, tuple[str, ...]]:
        """Conformal half-width of the log interval at `confidence` from the residuals of
        cross-validation holding out whole accelerators (`calibration="hardware"`) or whole model
        families ("family"; falls back to hardware x widening when the model has none). Warns
        when the calibration set is too small for the level (then the largest residual is used)."""
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
            raise ConfigError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
        scores = self.hardware_scores
        factor = 1.0
        if calibration == "family":
            if self.family_scores:
                scores = self.family_scores
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

    def check(self, query: Query) -> DomainCheck:
        return check_domain(query, self.domain, self.ood_widening)

    def interval(self, query: Query, confidence: float) -> tuple[float, tuple[str, ...]]:
        """The query's half-width (log) after the policy, and every warning that explains it."""
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
            raise ConfigError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
        q, level_warn = self.regime_half_width(query.features, confidence, query.model_family)
        check = self.check(query)
        if check.new_family:
            q_fam, warn_fam = self.family_half_width(query.features, confidence, query.model_family)
            if q_fam > q:
                q, level_warn = q_fam, warn_fam
        if check.widen:
            q *= self.ood_widening
        return q, level_warn + check.warnings
