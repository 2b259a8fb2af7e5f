"""`fit_and_log`: read the feature table, evaluate by the protocol, fit and calibrate the shipped
model, log everything to MLflow, register the model, move the `champion` alias only when the
headline metric improves, and export the champion into models/.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.errors import DataError
from perfmodel.learn.data import TrainingData, load_training_data
from perfmodel.learn.evaluate import HEADLINE_METRIC, TARGETS, EvalConfig, Evaluation, evaluate_all
from perfmodel.learn.shipped import DEFAULT_MODEL_DIR, METADATA_FILE, load_shipped_model

Progress = Callable[[str], None]


@dataclass
class TrainResult:
    """What one `perfmodel train` did."""

    run_id: str | None
    tracking_uri: str | None
    features_path: str
    dataset_sha256: str
    rows_total: int
    rows_trained: int
    rows_skipped: dict[str, int]
    headline_metric: str
    headline: float | None
    metrics: dict[str, float]
    registered_version: str | None
    champion_version: str | None
    became_champion: bool
    previous_champion_metric: float | None
    exported_to: str | None
    train_seconds: float
    headline_improved: bool = False
    """The new version beat the champion's headline metric (or there was no champion)."""
    evaluation: Evaluation | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "evaluation"}
        data["targets"] = TARGETS
        if self.evaluation is not None:
            data["evaluation"] = self.evaluation.summary.to_dict("records")
            data["skipped_splits"] = self.evaluation.skipped
        return data


def run_params(data: TrainingData, config: EvalConfig, splitter: str) -> dict[str, Any]:
    """Everything that determines the run, as MLflow params."""
    import perfmodel
    from perfmodel.schema import SCHEMA_VERSION
    from perfmodel.tracking import flatten

    cfg = asdict(config)
    params: dict[str, Any] = flatten("config", cfg)
    params.update(
        {
            "features_path": str(data.path),
            "dataset_sha256": data.sha256,
            "dataset_file_sha256": data.file_sha256,
            "schema_version": SCHEMA_VERSION,
            "perfmodel_version": perfmodel.__version__,
            "rows_total": len(data.table),
            "rows_trained": len(data.y),
            "rows_skipped": len(data.table) - len(data.y),
            "gpus": ",".join(sorted({str(g) for g in data.kept["gpu"]})),
            "model_families": ",".join(sorted({str(g) for g in data.kept["model_family"]})),
            "conformal_splitter": splitter,
            "target": "log(measured step time / roofline bound)",
        }
    )
    for source, count in data.table["source"].astype(str).value_counts().sort_index().items():
        params[f"rows_by_source.{source}"] = int(count)
    for source, count in data.kept["source"].astype(str).value_counts().sort_index().items():
        params[f"trained_rows_by_source.{source}"] = int(count)
    for reason, count in data.skipped.items():
        params[f"skipped.{reason[:80]}"] = count
    return params


def write_artifacts(evaluation: Evaluation, booster: Any, out: Path) -> list[Path]:
    """Plots and evaluation tables into `out`."""
    from perfmodel.learn import plots

    out.mkdir(parents=True, exist_ok=True)
    paths = [
        plots.plot_predicted_vs_measured(evaluation.predictions, out / "predicted_vs_measured.png"),
        plots.plot_residuals_by_hardware(evaluation.predictions, out / "residuals_by_hardware.png"),
        plots.plot_coverage(evaluation.summary, out / "coverage.png"),
        plots.plot_feature_importance(booster, out / "feature_importance.png"),
    ]
    md = out / "evaluation.md"
    md.write_text("# Evaluation\n\n" + evaluation.to_markdown())
    csv = out / "evaluation.csv"
    evaluation.summary.to_csv(csv, index=False)
    breakdown = out / "evaluation_breakdown.csv"
    evaluation.breakdown.to_csv(breakdown, index=False)
    oof = out / "oof_predictions.csv"
    evaluation.predictions.to_csv(oof, index=False)
    return [*paths, md, csv, breakdown, oof]


def export_model_dir(source_dir: Path, dest: Path, stamp: dict[str, Any]) -> Path:
    """Copy throughput.lgb.txt + metadata.json from `source_dir` into `dest`, updating the
    metadata with `stamp` (registered version). Writes to a temp dir first, then replaces."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        tmp_path = Path(tmp)
        for name in ("throughput.lgb.txt", METADATA_FILE):
            shutil.copy2(source_dir / name, tmp_path / name)
        meta = json.loads((tmp_path / METADATA_FILE).read_text())
        meta.update(stamp)
        (tmp_path / METADATA_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        for name in ("throughput.lgb.txt", METADATA_FILE):
            (tmp_path / name).replace(dest / name)
    return dest


def export_champion(tracker: Any, dest: Path, version: str) -> Path:
    """Download registered `version` and export it into `dest`."""
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = tracker.download_model(version, Path(tmp))
        return export_model_dir(
            model_dir, dest, {"version": str(version), "registered_model": tracker.model_name}
        )


def _no_model_in(path: Path) -> bool:
    try:
        return load_shipped_model(path) is None
    except DataError:  # an unreadable or older-format export: replace it
        return True


def fit_and_log(
    features_path: str | Path | None = None,
    *,
    tracking_uri: str | None = None,
    register: bool = True,
    export_dir: str | Path | None = DEFAULT_MODEL_DIR,
    config: EvalConfig | None = None,
    progress: Progress | None = None,
    run_name: str | None = None,
    promote: bool = False,
) -> TrainResult:
    """Train, evaluate, calibrate, log to MLflow, register, and export the champion.

    The `champion` alias moves to the new version only when its headline metric (leave-one-
    hardware-out median APE) beats the champion's, or when `promote` is set (e.g. after the
    dataset changed, when the two numbers are not comparable)."""
    from perfmodel.learn.fit import fit_learned_model
    from perfmodel.schema import SCHEMA_VERSION
    from perfmodel.tracking import MlflowTracker

    say = progress or (lambda _msg: None)
    config = config or EvalConfig()
    t0 = time.perf_counter()
    say("reading the feature table")
    data = load_training_data(features_path)
    say(f"{len(data.y)} trainable rows of {len(data.table)} ({data.kept['gpu'].nunique()} GPUs)")
    evaluation = evaluate_all(data.X, data.y, data.kept, config, progress=say)
    say("fitting and calibrating the shipped model")
    model, calibration = fit_learned_model(
        data.X, data.y, data.kept, config=config.lgbm, max_splits=config.final_max_splits
    )
    train_seconds = time.perf_counter() - t0
    metrics = evaluation.metrics()
    metrics["train_seconds"] = train_seconds
    metrics["rows_trained"] = float(len(data.y))
    metrics["num_trees"] = float(model.booster.num_trees())
    for c, q in model.metadata["conformal"]["quantiles_log"].items():
        if q is not None:
            metrics[f"conformal_q{round(float(c) * 100)}_log"] = float(q)
    headline = metrics.get(HEADLINE_METRIC)

    tracker = MlflowTracker(tracking_uri)
    say(f"logging to MLflow at {tracker.uri}")
    version: str | None = None
    champion_version: str | None = None
    became = False
    improved = False
    previous: float | None = None
    exported: str | None = None
    name = run_name or f"train-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}"
    with tracker.run(name) as run_id, tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        model.metadata.update(
            {
                "version": f"run-{run_id[:8]}",
                "run_id": run_id,
                "dataset_sha256": data.sha256,
                "schema_version": SCHEMA_VERSION,
                "trained_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "rows_by_source": {
                    str(k): int(v) for k, v in data.kept["source"].astype(str).value_counts().items()
                },
                "evaluation": {k: round(v, 4) for k, v in metrics.items()},
                "headline_metric": HEADLINE_METRIC,
            }
        )
        tracker.log_params(run_params(data, config, calibration.splitter))
        tracker.log_metrics(metrics)
        for path in write_artifacts(evaluation, model.booster, tmp_path / "evaluation"):
            tracker.log_artifact(path, "evaluation")
        model_dir = model.save(tmp_path / "model_dir")
        version = tracker.log_model(model_dir, register=register)
        if register and version is not None:
            tracker.set_version_tags(version, {HEADLINE_METRIC: headline, "dataset_sha256": data.sha256})
            champ = tracker.champion(HEADLINE_METRIC)
            previous = champ.metric if champ else None
            improved = (
                champ is None or champ.metric is None or (headline is not None and headline < champ.metric)
            )
            if improved or promote:
                tracker.set_champion(version)
                became = True
                champion_version = version
            elif champ is not None:
                champion_version = champ.version
            if export_dir is not None and champion_version is not None:
                dest = Path(export_dir)
                if became or _no_model_in(dest):
                    say(f"exporting champion version {champion_version} to {dest}")
                    export_champion(tracker, dest, champion_version)
                    exported = str(dest)
    return TrainResult(
        run_id=run_id,
        tracking_uri=tracker.uri,
        features_path=str(data.path),
        dataset_sha256=data.sha256,
        rows_total=len(data.table),
        rows_trained=len(data.y),
        rows_skipped=data.skipped,
        headline_metric=HEADLINE_METRIC,
        headline=headline,
        metrics=metrics,
        registered_version=version,
        champion_version=champion_version,
        became_champion=became,
        previous_champion_metric=previous,
        exported_to=exported,
        train_seconds=train_seconds,
        headline_improved=improved,
        evaluation=evaluation,
    )
