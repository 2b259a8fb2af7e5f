"""`perfmodel train` and `perfmodel evaluate`: thin over `perfmodel.learn`, rendered by
`perfmodel.cli.render_eval`."""

from __future__ import annotations

import math
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


def _nan_to_none(value: Any) -> Any:
    """Tables hold NaN where a metric does not apply (baselines have no coverage); strict JSON
    says null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_to_none(v) for v in value]
    return value


def _progress() -> Any:
    console = _common.stderr_console()
    return lambda msg: console.print(f"[dim]{msg}[/dim]", highlight=False)


def train_command(
    features: FeaturesOption = None,
    json_out: JsonOption = False,
    no_register: Annotated[
        bool,
        typer.Option("--no-register", help="Log the run but do not register it or move the champion alias."),
    ] = False,
    force_champion: Annotated[
        bool,
        typer.Option(
            "--force-champion",
            help="Make this run the champion (and, with --export, replace models/) without the "
            "same-rows and beyond-the-seed-spread checks.",
        ),
    ] = False,
    export: Annotated[
        bool,
        typer.Option(
            "--export",
            help="Write the champion into models/ (what `perfmodel predict` ships) when it beats the "
            "model there; without it models/ is never touched.",
        ),
    ] = False,
    export_dir: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--export-dir", help="Export into this folder instead of models/ (implies --export)."),
    ] = None,
    seeds: Annotated[
        int,
        typer.Option(
            "--seeds",
            min=0,
            help="Seeds of the spread measured when the run beats the champion on the same rows "
            "(the gain must exceed it); 0 or 1: never measure, so never beat a champion.",
        ),
    ] = 3,
) -> None:
    """Fit the learned model, evaluate it, save it under runs/, log it to MLflow and register it.

    The tracking store is MLFLOW_TRACKING_URI (default: mlflow.db in the project root); it is
    checked before fitting. The alias `champion` moves only when this run beats the kernel model
    alone on its held-out folds and the champion on the same rows by more than the seed-to-seed
    spread (or with --force-champion). models/ is
    written only with --export. MLflow's usage telemetry is off unless MLFLOW_DISABLE_TELEMETRY=false.
    """
    # loaded when the command runs (CLI start-up)
    from perfmodel.learn.data import load_training_data
    from perfmodel.learn.train import fit_and_log
    from perfmodel.paths import model_dir
    from perfmodel.tracking import MlflowTracker

    tracker = MlflowTracker()
    tracker.check()
    data = load_training_data(features)
    destination = export_dir or (model_dir() if export else None)
    result = fit_and_log(
        data,
        tracker=tracker,
        register=not no_register,
        export_dir=destination,
        force_champion=force_champion,
        spread_seeds=seeds,
        progress=_progress(),
    )
    if json_out:
        _common.print_json(_nan_to_none(result.to_dict()))
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render_eval import summary_table

    console = _common.stdout_console()
    if result.evaluation is not None:
        title = f"{result.rows_trained} rows trained of {result.rows_total}"
        console.print(summary_table(result.evaluation.summary, title))
    lines = [
        f"train time {result.train_seconds:.1f} s; saved in {result.local_dir}",
        f"MLflow run {result.run_name} ({result.run_id}) at {result.tracking_uri}",
    ]
    if result.registered_version is None:
        lines.append("model not registered (--no-register)")
    else:
        verdict = "is the new champion" if result.became_champion else "is not the champion"
        reason = (result.decision or {}).get("reason", "")
        lines.append(
            f"registered {tracker.model_name} version {result.registered_version}: "
            f"{result.headline_metric} = {_num(result.headline)}%; {verdict} ({reason})"
        )
    lines.append(result.export_note)
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
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render_eval import breakdown_table, regime_tables, summary_table
    from perfmodel.learn.evaluate import evaluate_features
    from perfmodel.learn.metrics import TARGETS

    if seeds is not None:
        if holdout:
            raise typer.BadParameter("give either --seeds or --holdout, not both", param_hint="--seeds")
        _seed_spread(features, seeds, json_out)
        return
    group = _parse_holdout(holdout) if holdout else None
    evaluation = evaluate_features(features, holdout=group, progress=_progress())
    if json_out:
        _common.print_json(
            _nan_to_none(
                {
                    "holdout": None if group is None else {"key": group[0], "value": group[1]},
                    "summary": evaluation.summary.to_dict("records"),
                    "breakdown": evaluation.breakdown.to_dict("records"),
                    "regimes": [] if evaluation.regimes is None else evaluation.regimes.to_dict("records"),
                    "metrics": evaluation.metrics(),
                    "skipped_splits": evaluation.skipped,
                    "targets": TARGETS if group is None else {},
                }
            )
        )
        return
    console = _common.stdout_console()
    title = "evaluation" if group is None else f"held out {group[0]}={group[1]}"
    console.print(summary_table(evaluation.summary, title))
    for table in regime_tables(evaluation.regimes):
        console.print(table)
    if group is not None:
        console.print(breakdown_table(evaluation.breakdown))
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
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render_eval import spread_table
    from perfmodel.learn.data import load_training_data
    from perfmodel.learn.spread import seed_spread, spread_summary

    data = load_training_data(features)
    runs = seed_spread(data.X, data.y, data.kept, seeds=seeds, progress=_progress())
    summary = spread_summary(runs)
    if json_out:
        _common.print_json(
            _nan_to_none({"runs": runs.to_dict("records"), "spread": summary.to_dict("records")})
        )
        return
    _common.stdout_console().print(spread_table(summary, seeds))
