"""Release: write a registered champion into a model folder (models/ is what `perfmodel predict`
ships), only when it beats the model already there by the rule of `decide_champion` (same rows,
a gain beyond the seed-to-seed spread) or when forced. The write replaces the folder as one unit
(`model_files.write_model_dir_atomically`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from perfmodel.errors import DataError
from perfmodel.learn.champion import Candidate, Incumbent, decide_champion, needs_spread
from perfmodel.learn.metadata import ModelMetadata, read_model_folder, write_model_folder
from perfmodel.learn.metrics import HEADLINE_METRIC, kernel_alone_headline
from perfmodel.tracking import Tracker

SpreadFor = Callable[[str, list[float | None]], float | None]
"""(dataset hash, spreads recorded with the two models) -> the spread to judge a gain by, or None."""


def folder_metadata(folder: Path) -> ModelMetadata | None:
    """Verified metadata of the model in `folder`; None when there is none or it is unusable."""
    try:
        meta, _ = read_model_folder(folder)
    except DataError:
        return None
    return meta


def recorded_spread(meta: ModelMetadata | None) -> float | None:
    """The seed-spread range (points) a model's metadata records, if any."""
    value = ((meta.seed_spread if meta else None) or {}).get("range_pct")
    return None if value is None else float(value)


def _headline(meta: ModelMetadata) -> float | None:
    value = (meta.evaluation or {}).get(HEADLINE_METRIC)
    return None if value is None else float(value)


def export_champion(
    tracker: Tracker,
    dest: str | Path,
    version: str,
    *,
    force: bool = False,
    spread_for: SpreadFor | None = None,
) -> tuple[bool, str]:
    """Export registered `version` into `dest` when it beats the model there (or `force`).
    Returns (exported?, what happened in words)."""
    dest = Path(dest)
    with tempfile.TemporaryDirectory() as tmp:
        meta, text = read_model_folder(tracker.download_model(version, Path(tmp)))
    there = folder_metadata(dest)
    if there is not None and there.model_sha256 == meta.model_sha256 and there.run_id == meta.run_id:
        # the same trees and the same run (another run's trees can match while its calibration differs)
        return False, f"{dest} already holds champion version {version}"
    candidate = Candidate(
        label=f"champion version {version}",
        headline_pct=_headline(meta),
        dataset_sha256=str(meta.dataset_sha256),
        kernel_alone_pct=kernel_alone_headline(meta.evaluation),
    )
    incumbent = None
    if there is not None:
        incumbent = Incumbent(
            label=f"{dest} (version {there.version})",
            headline_pct=_headline(there),
            dataset_sha256=there.dataset_sha256,
        )
    spread_pct = None
    if spread_for is not None and needs_spread(candidate, incumbent, force=force):
        spread_pct = spread_for(candidate.dataset_sha256, [recorded_spread(meta), recorded_spread(there)])
    decision = decide_champion(candidate, incumbent, spread_pct=spread_pct, force=force)
    if not decision.promote:
        return False, decision.reason
    meta = meta.replace(version=str(version), registered_model=tracker.model_name)
    write_model_folder(dest, meta, text, atomically=True)
    return True, f"exported champion version {version} to {dest}: {decision.reason}"
