"""What a training run records, independent of where it is recorded: its name, description,
params, headline metrics and tags, dataset input, and the artifact files (plots and evaluation
tables). `perfmodel.learn.train` writes these into the local run folder and hands them to a
`Tracker`; everything here is a pure function of the data, the evaluation and the decision.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import perfmodel
from perfmodel.learn import plots
from perfmodel.learn.metrics import HEADLINE_METRIC, HEADLINE_METRICS, SPLITS
from perfmodel.learn.report import evaluation_markdown
from perfmodel.schema import SCHEMA_VERSION
from perfmodel.tracking import DatasetInput, flatten

if TYPE_CHECKING:
    from perfmodel.learn.data import TrainingData
    from perfmodel.learn.evaluate import EvalConfig, Evaluation

TARGET = "log(measured step time / roofline bound)"


def run_name(data: TrainingData) -> str:
    """`lgbm-<dataset hash, 8 characters>-<trained rows>r`: runs of one dataset share a prefix."""
    return f"lgbm-{data.sha256[:8]}-{len(data.y)}r"


def rows_by_source(frame: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in frame["source"].astype(str).value_counts().sort_index().items()}


def run_params(data: TrainingData, config: EvalConfig, splitter: str) -> dict[str, Any]:
    """Everything that determines the run, as MLflow params."""
    params: dict[str, Any] = flatten("config", asdict(config))
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
            "target": TARGET,
        }
    )
    for source, count in rows_by_source(data.table).items():
        params[f"rows_by_source.{source}"] = count
    for source, count in rows_by_source(data.kept).items():
        params[f"trained_rows_by_source.{source}"] = count
    for reason, count in data.skipped.items():
        params[f"skipped.{reason[:80]}"] = count
    return params


def headline_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """The few headline metrics again under `headline/` (MLflow charts group by that prefix)."""
    return {f"headline/{k}": metrics[k] for k in HEADLINE_METRICS if k in metrics}


def headline_tags(metrics: dict[str, float]) -> dict[str, str]:
    """`headline.<metric>` tags (columns of the runs table), one decimal."""
    return {f"headline.{k}": f"{metrics[k]:.1f}" for k in HEADLINE_METRICS if k in metrics}


def describe_run(data: TrainingData, metrics: dict[str, float], decision: str) -> str:
    """The run description (Markdown, shown on the run page and in the runs table)."""

    def pct(key: str) -> str:
        return f"{metrics[key]:.1f}%" if key in metrics else "-"

    lines = [
        f"LightGBM x roofline on {len(data.y):,} rows of dataset `{data.sha256[:8]}` "
        f"({data.kept['gpu'].nunique()} accelerators, {data.kept['model_family'].nunique()} model families).",
        "",
        f"**Headline median APE {pct(HEADLINE_METRIC)}**: {SPLITS['loso']} {pct('loso_median_ape_pct')}, "
        f"{SPLITS['loho']} {pct('loho_median_ape_pct')} (random {pct('random_median_ape_pct')}, "
        f"model family held out {pct('lofo_median_ape_pct')}); 90% intervals cover "
        f"{pct('coverage90_loso_pct')} of held-out-source rows and {pct('coverage90_loho_pct')} of "
        "held-out-hardware rows.",
    ]
    if decision:
        lines += ["", f"Champion: {decision}."]
    return "\n".join(lines)


def dataset_input(data: TrainingData) -> DatasetInput:
    """The feature table as the run's MLflow dataset (digest = dataset hash)."""
    tags = {f"rows_by_source.{k}": str(v) for k, v in rows_by_source(data.table).items()}
    tags.update({"dataset_sha256": data.sha256, "rows_trained": str(len(data.y))})
    return DatasetInput(
        name=f"features-{data.sha256[:8]}",
        digest=data.sha256,
        source=str(data.path),
        frame=data.table,
        tags=tags,
    )


def mlflow_tables(evaluation: Evaluation, kernel_heldout: Any = None) -> dict[str, Any]:
    """The tables every run logs with `mlflow.log_table` (artifact file -> DataFrame), the same files
    in every run so the compare page lines them up: per split the errors, coverage and width of every
    method; per split and regime the same; and, when given, the kernel-level errors with each
    accelerator held out."""
    summary = evaluation.summary.copy()
    tables = {"tables/evaluation_by_split.json": summary.round(3)}
    if evaluation.regimes is not None and len(evaluation.regimes):
        tables["tables/evaluation_by_split_and_regime.json"] = evaluation.regimes.round(3)
    if kernel_heldout is not None and len(kernel_heldout):
        tables["tables/kernels_accelerator_held_out.json"] = kernel_heldout
    return tables


def write_artifacts(evaluation: Evaluation, booster: Any, out: Path) -> list[Path]:
    """Plots and evaluation tables into `out` (logged at the run's artifact root, so the MLflow
    compare page finds the same files in every run)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [
        plots.plot_predicted_vs_measured(evaluation.predictions, out / "predicted_vs_measured.png"),
        plots.plot_predicted_vs_measured(
            evaluation.predictions, out / "predicted_vs_measured_unseen_gpu.png", split="unseen_gpu"
        ),
        plots.plot_residuals_by_hardware(evaluation.predictions, out / "residuals_by_hardware.png"),
        plots.plot_coverage(evaluation.summary, out / "coverage.png"),
        plots.plot_feature_importance(booster, out / "feature_importance.png"),
    ]
    tables = {
        "evaluation.csv": evaluation.summary,
        "evaluation_breakdown.csv": evaluation.breakdown,
        "evaluation_regimes.csv": evaluation.regimes,
        "oof_predictions.csv": evaluation.predictions,
    }
    md = out / "evaluation.md"
    md.write_text(evaluation_markdown(evaluation))
    paths.append(md)
    for name, frame in tables.items():
        frame.to_csv(out / name, index=False)
        paths.append(out / name)
    return paths
