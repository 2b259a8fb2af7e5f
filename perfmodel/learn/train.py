"""`fit_and_log`: evaluate by the protocol, fit and calibrate the model, save it locally, then log
it to a `Tracker`, register it, decide whether it becomes the champion, and (only when asked)
export the champion into a model folder such as models/.

Order, so that no failure costs a fit and nothing is replaced by accident:
  1. evaluate and fit (the expensive part; nothing is logged yet);
  2. save the model, plots and tables into the local run folder `<root>/runs/<run name>-<UTC time>/`
     (git-ignored) - from here on the work survives a tracking failure;
  3. read the current champion and, only when the new model is better on the same rows, measure
     the seed-to-seed spread (`decide_champion` needs it);
  4. log the run (dated from the start of step 1, so its duration is the training's), register
     the model, and move the `champion` alias when `decide_champion` says so;
  5. with `export_dir`, write the champion there - again only when it beats, by the same rule,
     the model already in that folder (`perfmodel.learn.export`).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from perfmodel import paths
from perfmodel.kernels.evaluate import held_out_accelerators, held_out_predictions, tables_of_rows
from perfmodel.learn import run_record
from perfmodel.learn.champion import Candidate, ChampionDecision, Incumbent, decide_champion, needs_spread
from perfmodel.learn.data import TrainingData
from perfmodel.learn.evaluate import EvalConfig, Evaluation, evaluate_all, refitted_accelerators
from perfmodel.learn.export import export_champion
from perfmodel.learn.fit import fit_learned_model
from perfmodel.learn.metrics import HEADLINE_METRIC, TARGETS, kernel_alone_headline
from perfmodel.learn.spread import HeadlineSpread, headline_spread
from perfmodel.schema import SCHEMA_VERSION
from perfmodel.tracking import ChampionInfo, Tracker, TrackingError

Progress = Callable[[str], None]
SPREAD_SEEDS = 3
"""Seeds of the spread measured when a decision needs one (seed 0 is the run's own evaluation)."""


def local_runs_dir() -> Path:
    """Where every training saves its model and evaluation before logging (perfmodel.paths.runs_dir)."""
    return paths.runs_dir()


@dataclass(frozen=True, kw_only=True)
class TrainResult:
    """What one training did."""

    run_id: str | None
    run_name: str
    tracking_uri: str
    local_dir: str
    """The local run folder (model/, plots, tables, result.json)."""
    features_path: str
    dataset_sha256: str
    rows_total: int
    rows_trained: int
    rows_skipped: dict[str, int]
    headline_metric: str
    headline: float | None
    """Leave-one-hardware-out median APE, percent."""
    metrics: dict[str, float]
    registered_version: str | None
    champion_version: str | None
    became_champion: bool
    decision: dict[str, Any] | None
    """`ChampionDecision` as a dict (promote, reason, gain_pct, spread_pct, same_rows)."""
    previous_champion_metric: float | None
    seed_spread: dict[str, Any] | None
    """The spread measured for a decision (`HeadlineSpread.as_dict()`), if one was needed."""
    exported_to: str | None
    export_note: str
    """What happened to the export folder, in words."""
    train_seconds: float
    """Evaluation and fit, seconds (the run's duration also covers saving and logging)."""
    evaluation: Evaluation | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "evaluation"}
        data["targets"] = TARGETS
        if self.evaluation is not None:
            data["evaluation"] = self.evaluation.summary.to_dict("records")
            data["skipped_splits"] = self.evaluation.skipped
        return data


@dataclass(frozen=True, kw_only=True)
class _Fitted:
    evaluation: Evaluation
    model: Any
    """The `LearnedModel` fitted on every row."""
    splitter: str
    """How its calibration folds were formed."""
    metrics: dict[str, float]
    train_seconds: float
    kernel_heldout: Any = None
    """Kernel-level errors with each accelerator held out (perfmodel.kernels), when measured."""


class _SpreadMeter:
    """Measures the headline's seed spread on the training data once, and only if asked."""

    def __init__(
        self, data: TrainingData, config: EvalConfig, seeds: int, seed0_pct: float | None, say: Progress
    ):
        self.data, self.config, self.seeds, self.seed0_pct, self.say = data, config, seeds, seed0_pct, say
        self.measured: HeadlineSpread | None = None

    @property
    def available(self) -> bool:
        return self.seeds >= 2

    def range_pct(self) -> float:
        if self.measured is None:
            self.say(f"measuring the seed-to-seed spread ({self.seeds} seeds) to judge the gain")
            d = self.data
            self.measured = headline_spread(
                d.X,
                d.y,
                d.kept,
                seeds=self.seeds,
                config=self.config,
                seed0_pct=self.seed0_pct,
                progress=self.say,
                kernel_table=d.kernel_table,
            )
        return self.measured.range_pct


def _alongside(data: TrainingData, config: EvalConfig, refitted: tuple[str, ...]) -> tuple[Any, Any]:
    """The fit on every row and the kernel-level predictions of every held-out accelerator but
    `refitted` (the evaluation's folds fit those: `_kernel_table`): what this process computes while
    the evaluation's worker processes fit the folds (it only waits on them otherwise)."""
    model, calibration = fit_learned_model(
        data.X, data.y, data.kept, config=config.lgbm, max_splits=config.final_max_splits
    )
    if data.kernel_table is None:
        return (model, calibration), None
    others = [g for g in held_out_accelerators(data.kernel_table) if g not in refitted]
    return (model, calibration), held_out_predictions(data.kernel_table, gpus=others)


def _kernel_table(data: TrainingData, rows: Any, evaluation: Evaluation) -> Any:
    """The kernel-level held-out table (kind x implementation): `rows` (`_alongside`) and the
    accelerators left to the evaluation, priced with the efficiencies its folds fitted without them
    (`Evaluation.kernel_refits`; any it did not fit are fitted here)."""
    if rows is None:
        return None
    rest = [g for g in held_out_accelerators(data.kernel_table) if g not in set(rows["held_out"])]
    more = held_out_predictions(data.kernel_table, gpus=rest, fitted=evaluation.kernel_refits)
    return tables_of_rows(pd.concat([rows, more], ignore_index=True))["by_kind"]


def _prepare_quietly(tracker: Tracker) -> None:
    """`tracker.prepare()` beside the folds; a store that fails is left to the first call after the
    fit, which reports it once the fitted model is saved (`fit_and_log`)."""
    try:
        tracker.prepare()
    except Exception:  # noqa: BLE001 - reported by the call after the fit, with the saved folder
        return


def _fit(data: TrainingData, config: EvalConfig, say: Progress, tracker: Tracker | None = None) -> _Fitted:
    t0 = time.perf_counter()
    say("fitting and calibrating the model on every row (alongside the evaluation)")
    if data.kernel_table is not None:
        say("kernel level: each accelerator's kernel rows predicted from the other accelerators'")
    # One thread of this process, one LightGBM fit at a time in it (concurrent fits in one process
    # are not safe: perfmodel.learn.evaluate.run_splits), while the folds run in worker processes.
    # Sequential evaluations (n_jobs 1) keep everything in order in this thread.
    refitted = refitted_accelerators(data.kept, config, data.X, data.kernel_table)
    with ThreadPoolExecutor(max_workers=1) as pool:
        side = pool.submit(_alongside, data, config, refitted) if config.n_jobs > 1 else None
        if tracker is not None and config.n_jobs > 1:
            pool.submit(_prepare_quietly, tracker)  # after the fit, in the same thread
        evaluation = evaluate_all(data.X, data.y, data.kept, config, progress=say, kernel_table=data.kernel_table)
        (model, calibration), kernel_rows = side.result() if side is not None else _alongside(data, config, refitted)
    kernel_heldout = _kernel_table(data, kernel_rows, evaluation)
    seconds = time.perf_counter() - t0
    metrics = {**evaluation.metrics(), "train_seconds": seconds, "rows_trained": float(len(data.y))}
    metrics["num_trees"] = float(model.booster.num_trees())
    metrics["transfer_share"] = float(calibration.transfer)  # the residual share an unseen source keeps
    if calibration.transfer_approximate is not None:
        metrics["transfer_share_approximate_plans"] = float(calibration.transfer_approximate)
    for c, q in model.metadata.conformal.hardware.quantiles_log.items():
        if q is not None:
            metrics[f"conformal_q{round(float(c) * 100)}_log"] = float(q)
    if kernel_heldout is not None:
        for rec in kernel_heldout.to_dict("records"):
            if str(rec.get("impl")) == "all":
                metrics[f"kernels_{rec['kernel_kind']}_median_ape_pct"] = float(rec["median_ape"]) * 100.0
    model.metadata = model.metadata.replace(
        dataset_sha256=data.sha256,
        schema_version=SCHEMA_VERSION,
        trained_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        rows_by_source=run_record.rows_by_source(data.kept),
        evaluation={k: round(v, 4) for k, v in metrics.items()},
        headline_metric=HEADLINE_METRIC,
    )
    return _Fitted(
        evaluation=evaluation,
        model=model,
        splitter=calibration.splitter,
        metrics=metrics,
        train_seconds=seconds,
        kernel_heldout=kernel_heldout,
    )


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def _decide(
    tracker: Tracker, candidate: Candidate, *, force: bool, meter: _SpreadMeter
) -> tuple[ChampionInfo | None, ChampionDecision]:
    champion = tracker.champion(HEADLINE_METRIC)
    incumbent = None
    if champion is not None:
        incumbent = Incumbent(
            label=f"champion version {champion.version}",
            headline_pct=champion.metric,
            dataset_sha256=champion.dataset_sha256,
        )
    judge = needs_spread(candidate, incumbent, force=force) and meter.available
    decision = decide_champion(
        candidate, incumbent, spread_pct=meter.range_pct() if judge else None, force=force
    )
    return champion, decision


def _log_run(
    tracker: Tracker,
    data: TrainingData,
    config: EvalConfig,
    fitted: _Fitted,
    *,
    local: Path,
    artifacts: list[Path],
    decision: ChampionDecision | None,
    register: bool,
    started_ms: int,
) -> tuple[str, str | None, bool]:
    """Log the run and its model; register it and move the alias. (run id, version, champion?)"""
    # mlflow: seconds to import (pyfunc imports it), only tracking needs it
    from perfmodel.learn.pyfunc import input_example

    verdict = decision.reason if decision else "not registered"
    metrics, model = fitted.metrics, fitted.model
    tags = {**run_record.headline_tags(metrics), "dataset_sha256": data.sha256, "champion.decision": verdict}
    description = run_record.describe_run(data, metrics, verdict)
    became = False
    with tracker.run(
        run_record.run_name(data), description=description, tags=tags, start_time_ms=started_ms
    ) as run_id:
        model.metadata = model.metadata.replace(version=f"run-{run_id[:8]}", run_id=run_id)
        model.save(local / "model")
        tracker.log_params(run_record.run_params(data, config, fitted.splitter))
        tracker.log_metrics({**metrics, **run_record.headline_metrics(metrics)})
        tracker.log_dataset(run_record.dataset_input(data))
        for path in artifacts:
            tracker.log_artifact(path)
        for name, frame in run_record.mlflow_tables(fitted.evaluation, fitted.kernel_heldout).items():
            tracker.log_table(frame, name)
        version = tracker.log_model(
            local / "model", register=register, input_example=input_example(data.kept)
        )
        if version is not None:
            version_tags: dict[str, Any] = {
                HEADLINE_METRIC: metrics.get(HEADLINE_METRIC),
                "dataset_sha256": data.sha256,
            }
            if "seed_spread_range_pct" in metrics:
                version_tags["seed_spread_range_pct"] = metrics["seed_spread_range_pct"]
            tracker.set_version_tags(version, version_tags)
            if decision is not None and decision.promote:
                tracker.set_champion(version)
                became = True
    return run_id, version, became


def fit_and_log(
    data: TrainingData,
    *,
    tracker: Tracker,
    config: EvalConfig | None = None,
    register: bool = True,
    export_dir: str | Path | None = None,
    force_champion: bool = False,
    spread_seeds: int = SPREAD_SEEDS,
    runs_dir: str | Path | None = None,
    progress: Progress | None = None,
) -> TrainResult:
    """Train on `data` and record the run in `tracker` (see the module docstring for the order).

    `export_dir=None` (the default) never touches any model folder. Raises TrackingError when the
    tracker fails after the fit; the message names the local folder holding the saved work."""
    say = progress or (lambda _msg: None)
    config = config or EvalConfig()
    started_ms = int(time.time() * 1000)
    say(f"{len(data.y)} trainable rows of {len(data.table)} ({data.kept['gpu'].nunique()} GPUs)")
    fitted = _fit(data, config, say, tracker)  # 1
    headline = fitted.metrics.get(HEADLINE_METRIC)

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")  # 2
    local = (
        Path(runs_dir) if runs_dir is not None else local_runs_dir()
    ) / f"{run_record.run_name(data)}-{stamp}"
    artifacts = run_record.write_artifacts(fitted.evaluation, fitted.model.booster, local)
    fitted.model.save(local / "model")
    _write_json(local / "result.json", {"status": "fitted, not logged yet", "metrics": fitted.metrics})
    say(f"model and evaluation saved in {local}")

    seed0 = headline if config.seed == 0 and config.lgbm.seed == 0 else None
    meter = _SpreadMeter(data, config, spread_seeds, seed0, say)
    candidate = Candidate(
        label="this run",
        headline_pct=headline,
        dataset_sha256=data.sha256,
        kernel_alone_pct=kernel_alone_headline(fitted.metrics),
    )
    champion: ChampionInfo | None = None
    decision: ChampionDecision | None = None
    try:
        if register:  # 3
            champion, decision = _decide(tracker, candidate, force=force_champion, meter=meter)
            say(f"champion decision: {decision.reason}")
        if meter.measured is not None:
            fitted.model.metadata = fitted.model.metadata.replace(seed_spread=meter.measured.as_dict())
            fitted.metrics["seed_spread_range_pct"] = meter.measured.range_pct
        run_id, version, became = _log_run(  # 4
            tracker, data, config, fitted, local=local, artifacts=artifacts, decision=decision,
            register=register, started_ms=started_ms,
        )  # fmt: skip
    except Exception as exc:
        raise TrackingError(
            f"tracking at {tracker.uri} failed after training ({type(exc).__name__}: {exc}); "
            f"nothing is lost: the model and its evaluation are saved in {local}"
        ) from exc
    champion_version = version if became else (champion.version if champion else None)

    exported, note = None, "no export asked (models/ untouched)"  # 5
    if export_dir is not None and champion_version is None:
        note = "no registered champion to export (--no-register)"
    elif export_dir is not None and champion_version is not None:

        def spread_for(dataset_sha256: str, recorded: list[float | None]) -> float | None:
            known = [s for s in recorded if s is not None]
            if dataset_sha256 == data.sha256 and meter.available:
                known.append(meter.range_pct())
            return max(known) if known else None

        done, note = export_champion(
            tracker, export_dir, champion_version, force=force_champion, spread_for=spread_for
        )
        exported = str(export_dir) if done else None
        say(note if done else f"not exported: {note}")
    result = TrainResult(
        run_id=run_id,
        run_name=run_record.run_name(data),
        tracking_uri=tracker.uri,
        local_dir=str(local),
        features_path=str(data.path),
        dataset_sha256=data.sha256,
        rows_total=len(data.table),
        rows_trained=len(data.y),
        rows_skipped=dict(data.skipped),
        headline_metric=HEADLINE_METRIC,
        headline=headline,
        metrics=fitted.metrics,
        registered_version=version,
        champion_version=champion_version,
        became_champion=became,
        decision=None if decision is None else asdict(decision),
        previous_champion_metric=champion.metric if champion else None,
        seed_spread=None if meter.measured is None else meter.measured.as_dict(),
        exported_to=exported,
        export_note=note,
        train_seconds=fitted.train_seconds,
        evaluation=fitted.evaluation,
    )
    _write_json(local / "result.json", result.to_dict())
    return result
