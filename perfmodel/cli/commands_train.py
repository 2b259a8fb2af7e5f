"""`perfmodel train` and `perfmodel evaluate`: thin over `perfmodel.learn`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from perfmodel.cli import _common


def register(app: typer.Typer) -> None:
    app.command("train")(train_command)
    app.command("evaluate")(evaluate_command)


FeaturesOption = Annotated[
    Optional[Path],  # noqa: UP045 - typer needs Optional at runtime on Python 3.10
    typer.Option("--features", help="Feature table (default: datasets/features.parquet)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _progress() -> Any:
    console = _common.stderr_console()
    return lambda msg: console.print(f"[dim]{msg}[/dim]", highlight=False)


def train_command(
    features: FeaturesOption = None,
    json_out: JsonOption = False,
    no_register: Annotated[
        bool,
        typer.Option("--no-register", help="Log the run but do not register, promote or export the model."),
    ] = False,
    promote: Annotated[
        bool,
        typer.Option(
            "--promote",
            help="Make this run the champion even if it does not beat the current one "
            "(e.g. after the dataset changed and the metrics are not comparable).",
        ),
    ] = False,
    export_dir: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--export-dir", help="Where the champion is exported (default: models/)."),
    ] = None,
) -> None:
    """Fit the learned model, evaluate it, log to MLflow, register it and export the champion."""
    from perfmodel.learn.shipped import DEFAULT_MODEL_DIR
    from perfmodel.learn.train import fit_and_log

    result = fit_and_log(
        features,
        register=not no_register,
        export_dir=export_dir or DEFAULT_MODEL_DIR,
        progress=_progress(),
        promote=promote,
    )
    if json_out:
        _common.print_json(result.to_dict())
        return
    console = _common.stdout_console()
    if result.evaluation is not None:
        console.print(
            _summary_table(result.evaluation, f"{result.rows_trained} rows trained of {result.rows_total}")
        )
    lines = [
        f"train time {result.train_seconds:.1f} s; MLflow run {result.run_id} at {result.tracking_uri}",
    ]
    if no_register and promote:
        lines.append("--promote ignored: nothing was registered (--no-register)")
    if result.registered_version is None:
        lines.append("model not registered (--no-register)")
    else:
        verdict = (
            ("is the new champion" if result.headline_improved else "promoted to champion (--promote)")
            if result.became_champion
            else f"did not beat champion version {result.champion_version} ({_num(result.previous_champion_metric)}%)"
        )
        lines.append(
            f"registered perfmodel-throughput version {result.registered_version}: "
            f"{result.headline_metric} = {_num(result.headline)}% {verdict}"
        )
    if result.exported_to:
        lines.append(f"exported champion version {result.champion_version} to {result.exported_to}")
    for line in lines:
        console.print(line, highlight=False)


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _parse_holdout(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise typer.BadParameter(f"expected KEY=VALUE (e.g. gpu=H200 or model_family=llama), got {text!r}")
    return key.strip(), value.strip()


def evaluate_command(
    holdout: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            "--holdout",
            help="Train without the rows where KEY=VALUE and report errors on them only (e.g. gpu=H200).",
        ),
    ] = None,
    seeds: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(
            "--seeds",
            min=2,
            help="Repeat the random and hardware-held-out splits with this many seeds and report the "
            "spread of their metrics (what a difference between two models must exceed).",
        ),
    ] = None,
    features: FeaturesOption = None,
    json_out: JsonOption = False,
) -> None:
    """Print the evaluation table (all splits, model vs baselines, interval coverage), the
    errors on one held-out group with --holdout, or the seed-to-seed spread with --seeds."""
    from perfmodel.learn.evaluate import TARGETS, evaluate_features

    if seeds is not None:
        if holdout:
            raise typer.BadParameter("give either --seeds or --holdout, not both", param_hint="--seeds")
        _seed_spread(features, seeds, json_out)
        return
    group = _parse_holdout(holdout) if holdout else None
    evaluation = evaluate_features(features, holdout=group, progress=_progress())
    if json_out:
        _common.print_json(
            {
                "holdout": None if group is None else {"key": group[0], "value": group[1]},
                "summary": evaluation.summary.to_dict("records"),
                "breakdown": evaluation.breakdown.to_dict("records"),
                "metrics": evaluation.metrics(),
                "skipped_splits": evaluation.skipped,
                "targets": TARGETS if group is None else {},
            }
        )
        return
    console = _common.stdout_console()
    title = "evaluation" if group is None else f"held out {group[0]}={group[1]}"
    console.print(_summary_table(evaluation, title))
    if group is not None:
        console.print(_breakdown_table(evaluation))
        widened = int(evaluation.predictions["widened"].sum())
        console.print(
            f"{widened} of {len(evaluation.predictions)} rows were out of the training domain (interval widened)",
            highlight=False,
        )
    else:
        console.print("targets: " + ", ".join(f"{k} {v}" for k, v in TARGETS.items()), highlight=False)
    for split, reason in evaluation.skipped.items():
        console.print(f"skipped {split}: {reason}", highlight=False)


def _seed_spread(features: Any, seeds: int, json_out: bool) -> None:
    from rich.table import Table

    from perfmodel.learn.data import load_training_data
    from perfmodel.learn.evaluate import SPLITS, fmt_cell, seed_spread, spread_summary

    data = load_training_data(features)
    runs = seed_spread(data.X, data.y, data.kept, seeds=seeds, progress=_progress())
    summary = spread_summary(runs)
    if json_out:
        _common.print_json({"runs": runs.to_dict("records"), "spread": summary.to_dict("records")})
        return
    table = Table(title=f"model metrics over {seeds} seeds")
    for col in ("split", "metric", "mean", "std", "min", "max"):
        table.add_column(col, justify="left" if col in ("split", "metric") else "right")
    for rec in summary.to_dict("records"):
        table.add_row(SPLITS[rec["split"]], rec["metric"], *(fmt_cell(rec[k]) for k in ("mean", "std", "min", "max")))
    _common.stdout_console().print(table)


def _summary_table(evaluation: Any, title: str) -> Any:
    from rich.table import Table

    from perfmodel.learn.evaluate import SPLITS, SUMMARY_COLUMNS, fmt_cell

    table = Table(title=title)
    for key, label in SUMMARY_COLUMNS:
        table.add_column(label, justify="left" if key in ("split", "method") else "right")
    for rec in evaluation.summary.to_dict("records"):
        cells = [
            SPLITS.get(rec["split"], rec["split"]) if k == "split" else fmt_cell(rec[k])
            for k, _ in SUMMARY_COLUMNS
        ]
        table.add_row(*cells, style="bold" if rec["method"] == "model" else None)
    return table


def _breakdown_table(evaluation: Any) -> Any:
    from rich.table import Table

    from perfmodel.learn.evaluate import fmt_cell

    table = Table(title="by hardware and source")
    for col in ("by", "value", "rows", "model APE %", "const APE %", "bound APE %", "cov90 %"):
        table.add_column(col, justify="left" if col in ("by", "value") else "right")
    for rec in evaluation.breakdown.to_dict("records"):
        table.add_row(
            rec["by"],
            rec["key"],
            str(rec["n_rows"]),
            fmt_cell(rec["model_median_ape_pct"]),
            fmt_cell(rec["const_median_ape_pct"]),
            fmt_cell(rec["bound_median_ape_pct"]),
            fmt_cell(rec["coverage90_pct"]),
        )
    return table
