"""`perfmodel sweep`, `perfmodel compare` and `perfmodel advise`: predictions over alternatives.

Each command parses flags, calls the library function in perfmodel/decide/, and renders the
result (Rich tables, or --json / --csv)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import typer

from perfmodel.cli import _common
from perfmodel.errors import ConfigError
from perfmodel.request import RunRequest

_DURATION_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_command)
    app.command("compare")(compare_command)
    app.command("advise")(advise_command)


def parse_duration(text: str, flag: str = "--deadline") -> float:
    """'24h' -> 86400.0; units s, m/min, h, d, w; a bare number is hours; combinations like 1d12h."""
    cleaned = text.strip().lower().replace(" ", "")
    if re.fullmatch(r"\d+(\.\d+)?", cleaned):
        return float(cleaned) * 3600.0
    parts = re.findall(r"(\d+(?:\.\d+)?)(sec|min|hr|s|m|h|d|w)", cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned:
        raise ConfigError(
            f"{flag} {text!r} is not a duration: write e.g. 24h, 90m, 2d or 1d12h (a bare number is hours)"
        )
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def parse_usd(text: str, flag: str = "--budget") -> float:
    cleaned = text.strip().lower().replace(",", "").replace("$", "").replace("usd", "").strip()
    try:
        return float(cleaned)
    except ValueError:
        raise ConfigError(f"{flag} {text!r} is not an amount in USD: write e.g. 500 or $1200") from None


def _lean() -> None:
    # loaded when the command runs (CLI start-up)
    from perfmodel.learn.lean_import import use_lean_import

    use_lean_import()  # one-shot process: keep the cold start fast


_JSON = typer.Option(False, "--json", help="Machine-readable output.")


# --- sweep -----------------------------------------------------------------------------------------


@_common.run_options()
def sweep_command(
    request: RunRequest,
    vary: list[str] = typer.Option(
        [], "--vary", help="KEY=V1,V2,... (repeatable): native keys, or Ludwig keys for a Ludwig config."
    ),
    json_out: bool = _JSON,
    csv_out: bool = typer.Option(False, "--csv", help="One CSV row per point on stdout."),
    plot: Path = typer.Option(
        None, "--plot", help="Draw time and cost against the first key into FILE.png or FILE.svg."
    ),
    raw: bool = typer.Option(
        False, "--raw", help="The model's own predictions, not projected onto the physics along micro-batch and GPU count."
    ),
) -> None:
    """Predict a config over a grid of values of any config keys: time, throughput, cost, memory, fits and MFU."""
    if not vary:
        raise typer.BadParameter("give at least one --vary KEY=V1,V2,...", param_hint="--vary")
    if json_out and csv_out:
        raise typer.BadParameter("give --json or --csv, not both", param_hint="--csv")
    _lean()
    # loaded when the command runs (CLI start-up)
    from perfmodel.decide.sweep import sweep

    result = sweep(request, vary, physics=not raw)
    if plot is not None:
        # loaded when the command runs (CLI start-up)
        from perfmodel.decide.plot import plot_sweep

        plot_sweep(result, plot)
        _common.stderr_console().print(f"wrote {plot}")
    if json_out:
        _common.print_json(result.to_json())
        return
    if csv_out:
        sys.stdout.write(result.to_csv())
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render_decide import render_sweep

    render_sweep(result, _common.stdout_console())


# --- compare ---------------------------------------------------------------------------------------


@_common.run_options(exclude=("config",))
def compare_command(
    request: RunRequest,
    configs: list[Path] = typer.Argument(None, help="Configs (native or Ludwig); ratios are to the first."),
    variant: list[str] = typer.Option(
        [], "--variant", help="The first config with keys changed: KEY=V[,KEY=V...] (repeatable)."
    ),
    json_out: bool = _JSON,
    plot: Path = typer.Option(
        None, "--plot", help="Draw times and paired ratio intervals into FILE.png or FILE.svg."
    ),
    calibrate_pairs: bool = typer.Option(
        False,
        "--calibrate-pairs",
        help="Re-measure the paired error correlations from held-out measured pairs (minutes) and write them.",
    ),
    pairs_file: Path = typer.Option(
        None, "--pairs-file", help="With --calibrate-pairs: write here (default: the shipped file)."
    ),
    features: Path = typer.Option(
        None, "--features", help="With --calibrate-pairs: feature table (default: datasets/features.parquet)."
    ),
    raw: bool = typer.Option(
        False, "--raw", help="The model's own predictions, not projected onto the physics along micro-batch and GPU count."
    ),
) -> None:
    """Configs side by side, with the ratio of times (and costs) to the first and whether one is faster (paired interval)."""
    configs = list(configs or [])
    if calibrate_pairs:
        if configs or variant:
            raise typer.BadParameter("--calibrate-pairs takes no configs or variants", param_hint="--calibrate-pairs")
        _calibrate_pairs(pairs_file, features, json_out)
        return
    if pairs_file is not None or features is not None:
        raise typer.BadParameter("--pairs-file and --features go with --calibrate-pairs", param_hint="--pairs-file")
    if len(configs) + len(variant) < 2:
        raise typer.BadParameter(
            "give at least two configs, or a config and a --variant", param_hint="CONFIGS"
        )
    _lean()
    # loaded when the command runs (CLI start-up)
    from perfmodel.decide.compare import compare

    result = compare(configs, variants=variant, request=request, physics=not raw)
    if plot is not None:
        # loaded when the command runs (CLI start-up)
        from perfmodel.decide.plot import plot_compare

        plot_compare(result, plot)
        _common.stderr_console().print(f"wrote {plot}")
    if json_out:
        _common.print_json(result.to_json())
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render_decide import render_compare

    render_compare(result, _common.stdout_console())


def _calibrate_pairs(pairs_file: Path | None, features: Path | None, json_out: bool) -> None:
    """Held-out predictions of the training data, the pair correlations from them, written."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.decide.pairs import calibrate, held_out_predictions, write_artifact
    from perfmodel.learn.data import load_training_data
    from perfmodel.learn.shipped import load_shipped_model

    err = _common.stderr_console()
    data = load_training_data(features)
    err.print(f"[dim]{len(data.y):,} training rows; leave-one-source-out predictions (a few minutes)[/dim]")
    oof = held_out_predictions(data, progress=lambda m: err.print(f"[dim]{m}[/dim]", highlight=False))
    shipped = load_shipped_model()
    model = f"folds refitted by this checkout's pipeline; shipped model {shipped.version}" if shipped else ""
    artifact, _ = calibrate(data, oof, model=model)
    where = write_artifact(artifact, pairs_file)
    if json_out:
        _common.print_json(artifact)
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render_decide import render_pair_calibration

    render_pair_calibration(artifact, _common.stdout_console())
    _common.stdout_console().print(f"wrote {where}")


# --- advise ----------------------------------------------------------------------------------------


@_common.run_options()
def advise_command(
    request: RunRequest,
    deadline: str = typer.Option(
        None, "--deadline", help="Finish within this time: 24h, 90m, 2d (a bare number is hours)."
    ),
    budget: str = typer.Option(
        None, "--budget", "--max-cost", help="Cost at most this many USD (also the limit of the fastest ranking)."
    ),
    gpus: str = typer.Option(
        None,
        "--gpus",
        help="Accelerators to consider, comma-separated (default: the config's and common rentable ones).",
    ),
    max_gpus: int = typer.Option(64, "--max-gpus", help="Largest GPU count to consider."),
    top: int = typer.Option(3, "--top", help="Options shown per ranking."),
    conservative: bool = typer.Option(
        False, "--conservative", help="Apply deadline and budget to the intervals' high ends."
    ),
    json_out: bool = _JSON,
    write: Path = typer.Option(
        None, "--write", help="Write the chosen option as a config (the config's own dialect) to FILE.yaml."
    ),
    choose: str = typer.Option(
        "fastest", "--choose", help="With --write: the fastest or the cheapest option (the first of its ranking)."
    ),
    raw: bool = typer.Option(
        False, "--raw", help="The model's own predictions, not projected onto the physics along micro-batch and GPU count."
    ),
) -> None:
    """Search precision, micro-batch, checkpointing, strategy, GPU type and count; rank what fits the deadline and budget by time and by cost."""
    if choose not in ("fastest", "cheapest"):
        raise typer.BadParameter("--choose takes fastest or cheapest", param_hint="--choose")
    _lean()
    # loaded when the command runs (CLI start-up)
    from perfmodel.decide.advise import advise

    result = advise(
        request,
        deadline_s=parse_duration(deadline) if deadline is not None else None,
        budget_usd=parse_usd(budget) if budget is not None else None,
        gpus=[g.strip() for g in gpus.split(",") if g.strip()] if gpus else None,
        max_gpus=max_gpus,
        conservative=conservative,
        top=top,
        physics=not raw,
    )
    if write is not None:
        # loaded when the command runs (CLI start-up)
        from perfmodel.config.source import ConfigSource
        from perfmodel.decide.write import write_option

        ranking = result.by_time if choose == "fastest" else result.by_cost
        if not ranking:
            raise ConfigError(f"--write: no {choose} option meets the constraints, nothing to write")
        where = write_option(ConfigSource.of(request), ranking[0], write, result.confidence_level)
        _common.stderr_console().print(f"wrote the {choose} option to {where}")
    if json_out:
        _common.print_json(result.to_json())
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render_decide import render_advice

    render_advice(result, _common.stdout_console())
