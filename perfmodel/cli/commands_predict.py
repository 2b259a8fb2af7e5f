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
    price: float = typer.Option(None, "--price", help="USD per GPU-hour (overrides hardware.price_per_gpu_hour and the catalog's list price)."),
    model_uri: str = typer.Option(
        None,
        "--model-uri",
        help="A registered model instead of --model-dir: models:/perfmodel-throughput@champion or models:/NAME/VERSION "
        "(registry: $MLFLOW_TRACKING_URI; each version is downloaded once into ~/.cache/perfmodel/registry).",
    ),
) -> None:
    """Predict throughput, step time, total time, GPU-hours and peak memory for a training run."""
    from perfmodel.config import load_workload
    from perfmodel.learn.lean_import import use_lean_import
    from perfmodel.prediction import predict

    use_lean_import()  # one-shot process: keep the cold start fast

    if config is None and not set_:
        raise typer.BadParameter("give --config FILE (or describe the run with --set keys)", param_hint="--config")
    if model_uri is not None:
        if model_dir is not None:
            raise typer.BadParameter("give --model-dir or --model-uri, not both", param_hint="--model-uri")
        model_dir = registered_model_dir(model_uri)
    workload = load_workload(
        config,
        overrides=set_,
        gpu=gpu,
        num_gpus=num_gpus,
        tokens=tokens,
        rows=rows,
        dataset=dataset,
    )
    from perfmodel.decide.cost import with_price

    workload = with_price(workload, price)
    prediction = predict(workload, confidence=confidence, model_dir=model_dir, use_learned=not analytic)
    fit_report = None
    if not prediction.fits_in_memory:
        from perfmodel.decide.fit import suggest_fits

        fit_report = suggest_fits(workload, confidence=confidence, model_dir=model_dir, use_learned=not analytic, config=config)
    if json_out:
        _common.print_json({**prediction.to_json(), "fit_suggestions": fit_report.to_json() if fit_report else []})
        return
    from perfmodel.cli.render import render_fit_suggestions, render_prediction

    render_prediction(prediction, _common.stdout_console())
    render_fit_suggestions(fit_report, _common.stdout_console())


def registry_cache_dir() -> Path:
    """Where registered models are kept once downloaded: $XDG_CACHE_HOME/perfmodel/registry
    (default ~/.cache/perfmodel/registry)."""
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perfmodel" / "registry"


def registered_model_dir(model_uri: str) -> Path:
    """The model folder of a registered version (`models:/NAME@ALIAS`: the alias is looked up on
    every call; `models:/NAME/VERSION`), from the registry at $MLFLOW_TRACKING_URI. A version is
    downloaded once (mlflow.artifacts.download_artifacts), verified, stamped with its registry
    version and kept under `registry_cache_dir()/<tracking URI hash>/NAME/vVERSION`."""
    import hashlib
    import shutil
    import tempfile

    from perfmodel.learn import model_files
    from perfmodel.learn.metadata import read_model_folder, write_model_folder
    from perfmodel.service.model_source import parse_model_uri
    from perfmodel.tracking import MlflowTracker, TrackingError

    name, alias, version = parse_model_uri(model_uri)
    tracker = MlflowTracker(model_name=name)
    tracker.check()
    try:
        client = tracker.client
        found = client.get_model_version_by_alias(name, alias) if alias else client.get_model_version(name, version)
    except Exception as exc:  # mlflow raises RestException, MlflowException ...: one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise TrackingError(f"{model_uri} is not in the registry at {tracker.uri}: {first}") from None
    version = str(found.version)
    key = hashlib.sha256(tracker.uri.encode()).hexdigest()[:12]
    folder = registry_cache_dir() / key / name / f"v{version}"
    if model_files.has_model(folder):
        try:
            model_files.read_model_dir(folder)
            return folder
        except model_files.ModelFileError:
            pass  # damaged: download it again
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".download-", dir=folder.parent))
    try:
        meta, text = read_model_folder(tracker.download_model(version, scratch))
        # The artifacts hold what was logged before registration: record the registry's version.
        write_model_folder(folder, meta.registered_as(version, name, found.run_id), text, atomically=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder
