"""The part of `perfmodel validate` that runs inside the Ludwig venv (Python 3.12, ludwig 0.17):
one real Ludwig training of the user's config on the data it is given, timed phase by phase.

Standard library at import time, Ludwig inside `train` (run as a script by its path, so it needs
nothing of perfmodel in Ludwig's venv):

    LUDWIG_PY perfmodel/run/ludwig_validate_child.py SPEC.json OUT.json

SPEC: {"config": {...}, "training_set": CSV, "validation_set": CSV | null, "test_set": CSV | null,
"output_dir": DIR, "small": {"training_set": CSV, ...} | null}. With "small", the same config's
preprocessing alone is timed once more on those (smaller) files after training: the two sizes
separate preprocessing's fixed cost from its cost per row.

Timed with Ludwig's own callbacks (ludwig/callbacks/__init__.py, 0.17.10): preprocessing
(on_preprocess_start/end), every batch (on_batch_start/end: seconds, and whether the optimizer
stepped), every evaluation pass (on_eval_start/end: Ludwig saves the best model inside it) and
every checkpoint (on_eval_end, or the last batch, to on_checkpoint: Trainer.save_checkpoint).
The rest of the process's wall time (interpreter, imports, LudwigModel construction, model
creation, batch-size tuning, teardown, saving) is the fixed start-up.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

WALL_SCRIPT = time.time()


def _process_start() -> float:
    """Unix time at which this process started (Linux /proc; else this script's start)."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        start = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19]) / ticks
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - uptime + start
    except (OSError, ValueError, IndexError):
        return WALL_SCRIPT


def _clear_cache(csv: str | None) -> None:
    """Ludwig caches preprocessed data beside the CSV: removed, so every run preprocesses afresh."""
    if not csv:
        return
    p = Path(csv)
    for pattern in (
        ".*.hdf5",
        ".*.parquet",
        ".*.shapes.json",
        ".meta.json",
        ".training.*",
        ".validation.*",
        ".test.*",
    ):
        for f in p.parent.glob(p.stem + pattern):
            f.unlink()


def train(spec: dict[str, Any]) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sets = {k: spec.get(k) for k in ("training_set", "validation_set", "test_set")}
    for csv in sets.values():
        _clear_cache(csv)
    t_import = time.perf_counter()
    # Ludwig: only in its own environment (this script runs there)
    from ludwig.api import LudwigModel
    from ludwig.callbacks import Callback

    import_s = time.perf_counter() - t_import
    ev: dict[str, Any] = {"batches": [], "evals": [], "checkpoints": [], "preprocess": []}

    class Timer(Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.t_batch = self.t_eval = self.t_pre = 0.0
            self.t_ckpt_from: float | None = None

        def on_preprocess_start(self, config: Any, **kw: Any) -> None:
            self.t_pre = time.perf_counter()

        def on_preprocess_end(self, *a: Any, **kw: Any) -> None:
            ev["preprocess"].append(time.perf_counter() - self.t_pre)

        def on_batch_start(self, trainer: Any, progress_tracker: Any, save_path: str, **kw: Any) -> None:
            self.t_batch = time.perf_counter()

        def on_batch_end(
            self, trainer: Any, progress_tracker: Any, save_path: str, sync_step: bool = True, **kw: Any
        ) -> None:
            now = time.perf_counter()
            ev["batches"].append([now - self.t_batch, bool(sync_step)])
            self.t_ckpt_from = now

        def on_eval_start(self, trainer: Any, progress_tracker: Any, save_path: str, **kw: Any) -> None:
            self.t_eval = time.perf_counter()

        def on_eval_end(self, trainer: Any, progress_tracker: Any, save_path: str, **kw: Any) -> None:
            now = time.perf_counter()
            ev["evals"].append({"step": int(progress_tracker.steps), "s": now - self.t_eval})
            self.t_ckpt_from = now

        def on_checkpoint(self, trainer: Any, progress_tracker: Any, **kw: Any) -> None:
            if self.t_ckpt_from is not None:
                ev["checkpoints"].append(
                    {"step": int(progress_tracker.steps), "s": time.perf_counter() - self.t_ckpt_from}
                )
            self.t_ckpt_from = None

        def on_trainer_train_teardown(
            self, trainer: Any, progress_tracker: Any, save_path: str, is_coordinator: bool, **kw: Any
        ) -> None:
            ev["trainer"] = {
                k: getattr(trainer, k, None)
                for k in (
                    "steps_per_epoch",
                    "total_steps",
                    "batch_size",
                    "eval_batch_size",
                    "gradient_accumulation_steps",
                )
            }
            ev["trainer"].update(steps=int(progress_tracker.steps), epoch=int(progress_tracker.epoch))

    out_dir = Path(spec["output_dir"])
    shutil.rmtree(out_dir, ignore_errors=True)
    load_start = os.getloadavg()
    model = LudwigModel(spec["config"], callbacks=[Timer()], logging_level=30)
    trainer_cfg = model.config_obj.trainer.to_dict()
    t_train = time.perf_counter()
    result = model.train(
        training_set=sets["training_set"],
        validation_set=sets["validation_set"],
        test_set=sets["test_set"],
        output_directory=str(out_dir),
    )
    train_call_s = time.perf_counter() - t_train
    wall_s = time.time() - _process_start()
    pre = result.preprocessed_data
    rows = {
        "training": len(pre.training_set),
        "validation": len(pre.validation_set) if pre.validation_set is not None else 0,
        "test": len(pre.test_set) if pre.test_set is not None else 0,
    }
    small = spec.get("small")
    small_point = None
    if small:  # preprocessing alone, once more, on smaller files (after training: imports are warm)
        for csv in small.values():
            _clear_cache(csv)
        t0 = time.perf_counter()
        done = model.preprocess(
            training_set=small.get("training_set"),
            validation_set=small.get("validation_set"),
            test_set=small.get("test_set"),
            skip_save_processed_input=True,
        )
        small_point = {
            "s": time.perf_counter() - t0,
            "rows": sum(
                len(d) for d in (done.training_set, done.validation_set, done.test_set) if d is not None
            ),
        }
    shutil.rmtree(out_dir, ignore_errors=True)
    return {
        "wall_s": wall_s,
        "train_call_s": train_call_s,
        "import_s": import_s,
        "preprocess_s": sum(ev["preprocess"]),
        "rows": rows,
        "batches": ev["batches"],
        "evals": ev["evals"],
        "checkpoints": ev["checkpoints"],
        "trainer": ev.get("trainer"),
        "resolved_trainer": {
            k: trainer_cfg.get(k)
            for k in (
                "batch_size",
                "epochs",
                "train_steps",
                "early_stop",
                "steps_per_checkpoint",
                "checkpoints_per_epoch",
                "evaluate_training_set",
                "skip_all_evaluation",
            )
        },
        "small_preprocess": small_point,
        "load_avg_start": [round(x, 2) for x in load_start],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python ludwig_validate_child.py SPEC.json OUT.json\n")
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    Path(argv[1]).write_text(json.dumps(train(spec)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
