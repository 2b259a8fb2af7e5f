"""Time `perfmodel train` (library: fit_and_log) on the whole feature table, pinned to 2 CPU cores.

Target: < 180 s on 2 cores. Tracks into a throwaway MLflow store, saves the local run folder into
a temp folder and exports nothing, so the bench never touches mlflow.db, runs/ or models/.
Prints one JSON line.

    python bench/bench_train.py [--features datasets/features.parquet]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 180.0


def pin_two_cores() -> list[int]:
    """Restrict this process (and LightGBM's threads) to two cores where the OS allows it."""
    try:
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) > 2:
            os.sched_setaffinity(0, set(cores[:2]))
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def cpu_model() -> str:
    """The host CPU's model name (/proc/cpuinfo; the platform's processor string elsewhere): the
    same code's train time differs by host, so a published figure says which one measured it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sys.path.insert(0, str(ROOT))
    from perfmodel.paths import features_path

    parser.add_argument("--features", default=str(features_path()))
    args = parser.parse_args()
    features = Path(args.features)
    if not features.is_file():
        print(
            json.dumps(
                {
                    "bench": "train",
                    "skipped": f"no feature table at {features} (run `make dataset`)",
                    "target_s": TARGET_S,
                }
            )
        )
        return 0
    cores = pin_two_cores()
    from perfmodel.learn.data import load_training_data
    from perfmodel.learn.train import fit_and_log
    from perfmodel.tracking import MlflowTracker

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = fit_and_log(
            load_training_data(features),
            tracker=MlflowTracker(f"sqlite:///{Path(tmp) / 'mlflow.db'}"),
            runs_dir=Path(tmp) / "runs",
        )
        seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "bench": "train",
                "seconds": round(seconds, 2),
                "fit_and_evaluate_seconds": round(result.train_seconds, 2),
                "target_s": TARGET_S,
                "ok": seconds < TARGET_S,
                "rows": result.rows_trained,
                "cores": cores,
                "cpu_model": cpu_model(),
                "loadavg_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
