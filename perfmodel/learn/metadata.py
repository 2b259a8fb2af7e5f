"""The model folder's `metadata.json` as a typed record: what training hands to serving beside the
trees (the conformal calibration, the training domain, the hyperparameters and the provenance).

    meta, text = read_model_folder("models")      # verified (model_files), then typed
    meta.conformal.hardware.quantiles_log["0.9"]   # instead of meta["conformal"]["quantiles_log"]
    meta = meta.registered_as("3", "perfmodel-throughput", run_id)
    write_model_folder(dest, meta, text, atomically=True)

`ModelMetadata.from_json` reads every metadata file this perfmodel has written (format 2) without
changing it: `from_json(d).to_json() == d` for a complete file (a test holds the shipped
models/metadata.json to that). Keys it does not know (written by a newer perfmodel) are kept in
`extra` and written back. Keys older files lack take the defaults below; the ones a model cannot
predict without (feature names, calibration residuals, training domain) raise `ModelFileError`.

No numpy, pandas or LightGBM here; the file format (hash, text version, atomic writes) is
`perfmodel.learn.model_files`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.learn import model_files
from perfmodel.learn.evidence import Evidence
from perfmodel.learn.model_files import METADATA_FILE, METADATA_FORMAT, ModelFileError


def _optional(data: Mapping[str, Any], key: str, kind: Callable[[Any], Any]) -> Any:
    """data[key] converted by `kind`, or None when it is missing or null."""
    value = data.get(key)
    return None if value is None else kind(value)


@dataclass(frozen=True, kw_only=True)
class TrainingDomain:
    """What a model has seen in training (metadata.json's "domain")."""

    gpus_seen: frozenset[str]
    """Accelerator catalog keys."""
    families_seen: frozenset[str]
    """Model families."""
    vendors_seen: frozenset[str]
    """Accelerator vendors."""
    generations_seen: frozenset[str]
    """Accelerator generations (CPUs excluded)."""
    numeric_ranges: Mapping[str, Sequence[float]]
    """Feature -> [min, max] over the training rows, in the feature's units (log features in log)."""
    categories_seen: Mapping[str, Sequence[str]]
    """Categorical feature -> levels seen."""

    @classmethod
    def from_metadata(cls, domain: Mapping[str, Any]) -> TrainingDomain:
        return cls(
            gpus_seen=frozenset(domain["gpus_seen"]),
            families_seen=frozenset(domain.get("families_seen", ())),
            vendors_seen=frozenset(domain["vendors_seen"]),
            generations_seen=frozenset(domain["generations_seen"]),
            numeric_ranges=dict(domain["numeric_ranges"]),
            categories_seen=dict(domain["categories_seen"]),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "gpus_seen": sorted(self.gpus_seen),
            "families_seen": sorted(self.families_seen),
            "vendors_seen": sorted(self.vendors_seen),
            "generations_seen": sorted(self.generations_seen),
            "numeric_ranges": {k: list(v) for k, v in self.numeric_ranges.items()},
            "categories_seen": {k: list(v) for k, v in self.categories_seen.items()},
        }


@dataclass(frozen=True, kw_only=True)
class Residuals:
    """One grouped calibration: the sorted out-of-fold |log residuals| and their quantiles."""

    abs_residuals_sorted: tuple[float, ...]
    """Sorted |log(measured / predicted)| of the held-out folds (log units)."""
    calibration_groups: str = ""
    """Feature-table column whose values were held out together (source, model_family)."""
    splitter: str = ""
    """The cross-validation, in words ("GroupKFold(12) over 18 groups")."""
    n_residuals: int = 0
    """How many residuals (0: not recorded)."""
    quantiles_log: Mapping[str, float | None] = field(default_factory=dict)
    """Confidence level ("0.9") -> conformal quantile of the residuals (None: too few)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Residuals:
        scores = tuple(float(s) for s in data["abs_residuals_sorted"])
        return cls(
            abs_residuals_sorted=scores,
            calibration_groups=str(data.get("calibration_groups", "")),
            splitter=str(data.get("splitter", "")),
            n_residuals=int(data.get("n_residuals", len(scores))),
            quantiles_log={
                str(k): (None if v is None else float(v))
                for k, v in (data.get("quantiles_log") or {}).items()
            },
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "calibration_groups": self.calibration_groups,
            "splitter": self.splitter,
            "n_residuals": self.n_residuals,
            "quantiles_log": dict(self.quantiles_log),
            "abs_residuals_sorted": list(self.abs_residuals_sorted),
        }


@dataclass(frozen=True, kw_only=True)
class MondrianCells:
    """The main calibration's residuals split by regime (Mondrian conformal, `learn/regimes.py`)."""

    cells: Mapping[str, tuple[float, ...]]
    """Regime cell key -> sorted one-vote-per-run |log residuals|."""
    levels: tuple[str, ...] = ()
    """The regime's levels, coarsest last (scale, method, precision, params)."""
    min_runs_per_cell: int | None = None
    """Fewest runs a cell needs to give its own interval (None: the code's default)."""
    thin_evidence_widening: float | None = None
    """Half-width factor when a coarser cell stands in (None: the code's default)."""
    runs: Mapping[str, int] | None = None
    """Regime cell key -> measured runs in it before the per-source cap (None: len(cells[key]))."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MondrianCells:
        return cls(
            cells={str(k): tuple(float(s) for s in v) for k, v in (data.get("cells") or {}).items()},
            levels=tuple(str(v) for v in data.get("levels", ())),
            min_runs_per_cell=_optional(data, "min_runs_per_cell", int),
            thin_evidence_widening=_optional(data, "thin_evidence_widening", float),
            runs=None if data.get("runs") is None else {str(k): int(v) for k, v in data["runs"].items()},
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "levels": list(self.levels),
            "min_runs_per_cell": self.min_runs_per_cell,
            "thin_evidence_widening": self.thin_evidence_widening,
            "cells": {k: list(v) for k, v in self.cells.items()},
        }
        if self.runs is not None:
            out["runs"] = dict(self.runs)
        return out


@dataclass(frozen=True, kw_only=True)
class Conformal:
    """The model's conformal calibration (metadata.json's "conformal")."""

    hardware: Residuals
    """The main calibration (holding out sources); in the file, its keys sit at this level."""
    method: str = ""
    """How the residuals were made, in words."""
    mondrian: MondrianCells | None = None
    """The main calibration by regime (None: a model calibrated before regimes existed)."""
    family: Residuals | None = None
    """The held-out-model-family calibration (None: fewer than 2 families, or not run)."""
    family_mondrian: MondrianCells | None = None
    """The held-out-model-family calibration by regime (None: a model calibrated before it
    existed; an unseen family then takes the pooled `family` quantile)."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Conformal:
        return cls(
            hardware=Residuals.from_json(data),
            method=str(data.get("method", "")),
            mondrian=MondrianCells.from_json(data["mondrian"]) if data.get("mondrian") else None,
            family=Residuals.from_json(data["family"]) if data.get("family") else None,
            family_mondrian=MondrianCells.from_json(data["family_mondrian"])
            if data.get("family_mondrian")
            else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, **self.hardware.to_json()}
        if self.mondrian is not None:
            out["mondrian"] = self.mondrian.to_json()
        out["family"] = None if self.family is None else self.family.to_json()
        if self.family_mondrian is not None:
            out["family_mondrian"] = self.family_mondrian.to_json()
        return out


_PROVENANCE = (
    "dataset_sha256",
    "schema_version",
    "trained_at",
    "rows_by_source",
    "evaluation",
    "headline_metric",
    "seed_spread",
    "run_id",
    "registered_model",
    "model_sha256",
    "model_text_version",
)
"""Optional keys: written only when set."""


@dataclass(frozen=True, kw_only=True)
class ModelMetadata:
    """Everything a learned model carries beside its trees (metadata.json), as written by
    `perfmodel.learn.fit.build_metadata` and stamped by `perfmodel train` and the registry."""

    feature_names: tuple[str, ...]
    """The booster's input columns, in order (`perfmodel.features.FEATURE_NAMES` at training)."""
    conformal: Conformal
    """The conformal calibration the intervals come from."""
    domain: TrainingDomain
    """What the model saw in training (out-of-domain queries are widened)."""
    format: int = METADATA_FORMAT
    """Metadata format (`model_files.METADATA_FORMAT`)."""
    version: str = "unversioned"
    """Model version: 'unregistered', 'run-<id>' once logged, the registry version once registered."""
    kind: str = "learned"
    """Always 'learned' (the analytic fallback has no folder)."""
    target: str = ""
    """What the booster predicts, in words."""
    trained_rows: int = 0
    """Feature-table rows the model was fitted on."""
    categorical_features: tuple[str, ...] = ()
    """Which of `feature_names` are categorical."""
    categorical_levels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Categorical feature -> its levels at training (codes are positions)."""
    num_trees: int | None = None
    """Trees of the booster (None: not fitted, an evaluation fold's policy)."""
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    """LightGBM parameters (`LGBMConfig.to_params()`)."""
    ood_widening: float | None = None
    """Half-width factor for out-of-domain queries (None: the code's default)."""
    interval_policy: str = ""
    """The interval policy, in words."""
    evidence: Evidence | None = None
    """The training runs as evidence cells: the residual is shrunk where few are near a query
    (`perfmodel.learn.evidence`); None: never shrunk (models before issue 21)."""
    dataset_sha256: str | None = None
    """Hash of the feature table trained on."""
    schema_version: str | None = None
    """`perfmodel.schema.SCHEMA_VERSION` at training."""
    trained_at: str | None = None
    """When it was fitted (ISO 8601, UTC)."""
    rows_by_source: Mapping[str, int] | None = None
    """Training rows per source."""
    evaluation: Mapping[str, float] | None = None
    """Evaluation metrics of the run (percentages and counts, rounded)."""
    headline_metric: str | None = None
    """Which of `evaluation` decides the champion."""
    seed_spread: Mapping[str, Any] | None = None
    """The headline's spread over seeds, when it was measured."""
    run_id: str | None = None
    """MLflow run that logged the model."""
    registered_model: str | None = None
    """Registered model name, once exported from the registry."""
    model_sha256: str | None = None
    """sha256 of the model file (stamped on save)."""
    model_text_version: str | None = None
    """LightGBM text-format version of the model file (stamped on save)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Keys this perfmodel does not know, kept as read and written back."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = METADATA_FILE) -> ModelMetadata:
        """The record of a metadata.json object; ModelFileError naming what is missing or mangled."""
        try:
            return cls._from_json(data)
        except KeyError as exc:
            raise ModelFileError(f"{where} lacks {exc}") from exc
        except (TypeError, ValueError, AttributeError) as exc:
            raise ModelFileError(f"{where} mangles a value: {exc}") from exc

    @classmethod
    def _from_json(cls, data: Mapping[str, Any]) -> ModelMetadata:
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        provenance: dict[str, Any] = {k: data[k] for k in _PROVENANCE if data.get(k) is not None}
        for key in ("dataset_sha256", "schema_version", "trained_at", "headline_metric", "run_id",
                    "registered_model", "model_sha256", "model_text_version"):  # fmt: skip
            if key in provenance:
                provenance[key] = str(provenance[key])
        if "rows_by_source" in provenance:
            provenance["rows_by_source"] = {str(k): int(v) for k, v in provenance["rows_by_source"].items()}
        if "evaluation" in provenance:
            provenance["evaluation"] = dict(provenance["evaluation"])
        if "seed_spread" in provenance:
            provenance["seed_spread"] = dict(provenance["seed_spread"])
        return cls(
            feature_names=tuple(str(n) for n in data["feature_names"]),
            conformal=Conformal.from_json(data["conformal"]),
            domain=TrainingDomain.from_metadata(data["domain"]),
            format=int(data.get("format", METADATA_FORMAT)),
            version=str(data.get("version", "unversioned")),
            kind=str(data.get("kind", "learned")),
            target=str(data.get("target", "")),
            trained_rows=int(data.get("trained_rows", 0)),
            categorical_features=tuple(str(n) for n in data.get("categorical_features", ())),
            categorical_levels={str(k): tuple(v) for k, v in (data.get("categorical_levels") or {}).items()},
            num_trees=_optional(data, "num_trees", int),
            hyperparameters=dict(data.get("hyperparameters") or {}),
            ood_widening=_optional(data, "ood_widening", float),
            interval_policy=str(data.get("interval_policy", "")),
            evidence=None if data.get("evidence") is None else Evidence.from_json(data["evidence"]),
            extra={k: v for k, v in data.items() if k not in known},
            **provenance,
        )

    def to_json(self) -> dict[str, Any]:
        """The metadata.json object (`from_json`'s inverse)."""
        out: dict[str, Any] = {
            **self.extra,
            "format": self.format,
            "version": self.version,
            "kind": self.kind,
            "target": self.target,
            "trained_rows": self.trained_rows,
            "feature_names": list(self.feature_names),
            "categorical_features": list(self.categorical_features),
            "categorical_levels": {k: list(v) for k, v in self.categorical_levels.items()},
            "num_trees": self.num_trees,
            "hyperparameters": dict(self.hyperparameters),
            "conformal": self.conformal.to_json(),
            "ood_widening": self.ood_widening,
            "interval_policy": self.interval_policy,
            "domain": self.domain.to_json(),
        }
        if self.evidence is not None:
            out["evidence"] = self.evidence.to_json()
        for key in _PROVENANCE:
            value = getattr(self, key)
            if value is not None:
                out[key] = dict(value) if isinstance(value, Mapping) else value
        return out

    def replace(self, **changes: Any) -> ModelMetadata:
        """A copy with `changes` (field names) applied."""
        return dataclasses.replace(self, **changes)

    def registered_as(self, version: str, name: str, run_id: str | None = None) -> ModelMetadata:
        """The copy a registered version is stored as: the registry's version and name, and its
        run (the folder logged before registration says `run-<id>`)."""
        return self.replace(version=str(version), registered_model=name, run_id=run_id or self.run_id)


def read_model_folder(path: str | Path) -> tuple[ModelMetadata, str]:
    """(metadata, model text) of a model folder, verified by `model_files.read_model_dir` and then
    typed; ModelFileError when either step fails."""
    raw, text = model_files.read_model_dir(path)
    return ModelMetadata.from_json(raw, str(Path(path) / METADATA_FILE)), text


def write_model_folder(
    path: str | Path, metadata: ModelMetadata, model_text: str, *, atomically: bool = False
) -> Path:
    """Write the folder (`model_files.write_model_dir`, or `write_model_dir_atomically` for a
    folder readers may be using); the metadata is stamped with the model's hash."""
    write = model_files.write_model_dir_atomically if atomically else model_files.write_model_dir
    return write(path, metadata.to_json(), model_text)
