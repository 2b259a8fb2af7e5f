"""`perfmodel predict`: a config file in, a time / memory / cost estimate out."""

from __future__ import annotations

from pathlib import Path

import typer

from perfmodel.cli import _common


def register(app: typer.Typer) -> None:
    app.command("predict")(predict_command)


def predict_command(
    config: Path = typer.Option(None, "--config", "-c", help="Native perfmodel YAML or a Ludwig config."),
    gpu: str = typer.Option(None, "--gpu", help="Accelerator name (`perfmodel gpus`); overrides the file."),
    num_gpus: int = typer.Option(None, "--num-gpus", help="Number of GPUs; overrides the file."),
    tokens: float = typer.Option(None, "--tokens", help="Training tokens (all epochs)."),
    rows: int = typer.Option(None, "--rows", help="Training samples (dataset rows before Ludwig's split)."),
    dataset: Path = typer.Option(None, "--dataset", help="CSV, parquet or JSONL file to size the data from."),
    set_: list[str] = typer.Option([], "--set", help="Override a key: --set training.micro_batch_size=16 (repeatable)."),
    confidence: float = typer.Option(0.9, "--confidence", help="Interval confidence level."),
    analytic: bool = typer.Option(False, "--analytic", help="Ignore the learned model; analytic bound only."),
    model_dir: Path = typer.Option(None, "--model-dir", help="Learned model folder (default: the shipped models/)."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output (the stable JSON contract)."),
) -> None:
    """Predict throughput, step time, total time, GPU-hours and peak memory for a training run."""
    from perfmodel.config import load_workload
    from perfmodel.learn import shipped
    from perfmodel.predict import predict

    shipped.LEAN_LIGHTGBM_IMPORT = True  # one-shot process: keep the cold start fast

    if config is None and not set_:
        raise typer.BadParameter("give --config FILE (or describe the run with --set keys)", param_hint="--config")
    workload = load_workload(
        config,
        overrides=set_,
        gpu=gpu,
        num_gpus=num_gpus,
        tokens=tokens,
        rows=rows,
        dataset=dataset,
    )
    prediction = predict(workload, confidence=confidence, model_dir=model_dir, use_learned=not analytic)
    if json_out:
        _common.print_json(prediction.to_json())
        return
    from perfmodel.cli.render import render_prediction

    render_prediction(prediction, _common.stdout_console())
