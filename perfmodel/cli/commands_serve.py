"""`perfmodel serve`: the HTTP API and the web page (perfmodel/service/), with uvicorn."""

from __future__ import annotations

import os
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)


def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    model_dir: Path = typer.Option(
        None, "--model-dir", help="Learned model folder (default: the shipped models/)."
    ),
    model_uri: str = typer.Option(
        None,
        "--model-uri",
        help="Serve a registered model and follow it: models:/perfmodel-throughput@champion (or models:/NAME/VERSION).",
    ),
    tracking_uri: str = typer.Option(
        None,
        "--tracking-uri",
        help="MLflow store for --model-uri and --calibrations runs:/ (default: $MLFLOW_TRACKING_URI, else mlflow.db).",
    ),
    poll_interval_s: float = typer.Option(
        30.0, "--poll-interval-s", help="Seconds between looks at the registry alias."
    ),
    request_timeout_s: float = typer.Option(
        30.0, "--request-timeout-s", help="Longest a request may compute (then 503)."
    ),
    concurrency: int = typer.Option(
        4, "--concurrency", help="Predictions computed at once per process (worker threads)."
    ),
    workers: int = typer.Option(
        1,
        "--workers",
        help="Server processes (one per core serves the most; each loads the model and keeps its own cache).",
    ),
    data_dir: Path = typer.Option(
        None,
        "--data-dir",
        help="The one folder whose files requests may name (dataset, training.dataset, model.path), relative to it; default: none are read.",
    ),
    allowed_host: list[str] = typer.Option(
        None,
        "--allowed-host",
        help="A Host name to answer besides localhost, 127.0.0.1, ::1 and --host (repeatable; *.example.com, or * for any).",
    ),
    calibrations: str = typer.Option(
        None,
        "--calibrations",
        help="Calibrations to apply: a folder, or runs:/RUN_ID (the MLflow run that logged them, in --tracking-uri's store; downloaded at start). Default: $PERFMODEL_CALIBRATION_DIR, else this user's calibration folder.",
    ),
    access_log: bool = typer.Option(
        True, "--access-log/--no-access-log", help="Log every request on stderr."
    ),
) -> None:
    """Serve predictions over HTTP (POST /v1/predict, /v1/sweep, ...; docs at /docs) and a web page at /."""
    # Requests run in parallel threads, each predicting one row: LightGBM's OpenMP team per call
    # costs more than the prediction (measured 16 ms vs 2.6 ms a call on a loaded 2-core host).
    # Set before LightGBM is first imported; an OMP_NUM_THREADS already set is kept.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # uvicorn: only perfmodel serve needs it; loaded when the command runs (CLI start-up)
    import uvicorn

    from perfmodel.errors import ConfigError
    from perfmodel.service.settings import ENV_VAR, ServiceSettings

    if model_dir is not None and model_uri is not None:
        raise typer.BadParameter("give --model-dir or --model-uri, not both", param_hint="--model-uri")
    if not 0 < port < 65536:
        raise typer.BadParameter(f"must be 1-65535, got {port}", param_hint="--port")
    if workers < 1:
        raise typer.BadParameter(f"must be >= 1, got {workers}", param_hint="--workers")
    calibration_source = calibrations
    if calibrations is not None:
        # loaded when the command runs; a run is downloaded once here, before the workers start,
        # and a bad run id or folder is a one-line error before the server starts
        from perfmodel.calibration.tracked import calibrations_folder

        calibrations = str(calibrations_folder(calibrations, tracking_uri=tracking_uri))
    try:
        settings = ServiceSettings(
            model_dir=model_dir,
            model_uri=model_uri,
            tracking_uri=tracking_uri,
            poll_interval_s=poll_interval_s,
            request_timeout_s=request_timeout_s,
            concurrency=concurrency,
            data_dir=data_dir,
            allowed_hosts=allowed_hosts(host, allowed_host or []),
            calibrations=calibrations,
            calibration_source=calibration_source,
        )
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from None
    if model_uri is not None:
        # loaded when the command runs (CLI start-up)
        from perfmodel.learn.registry import parse_model_uri

        parse_model_uri(model_uri)  # a malformed URI is a one-line error before the server starts
    if host in ("0.0.0.0", "::") and not allowed_host:
        typer.echo(
            f"perfmodel serve: answering the Host names {', '.join(settings.allowed_hosts)} only; "
            "add --allowed-host NAME for each name clients use",
            err=True,
        )
    # Every process, the only one or one of N, builds its app from the settings in the environment.
    os.environ[ENV_VAR] = settings.to_json()
    uvicorn.run(
        "perfmodel.service.app:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        access_log=access_log,
        log_level="info",
    )


def allowed_hosts(host: str, extra: list[str]) -> tuple[str, ...]:
    """The Host names a server bound to `host` answers: loopback names, `host` itself (unless a
    wildcard address: 0.0.0.0 or ::, where clients use a name given with --allowed-host), then `extra`."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.service.settings import LOOPBACK_HOSTS

    names = [*LOOPBACK_HOSTS]
    for name in (host.strip("[]"), *extra):
        if name and name not in ("0.0.0.0", "::") and name not in names:
            names.append(name)
    return tuple(names)
