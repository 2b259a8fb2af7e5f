"""One real Ludwig training, measured phase by phase, as a user would run it.

Run with the Ludwig venv (one training at a time; the machine is shared):
    .venv-ludwig/bin/python run_ludwig.py --config configs/X.yaml --dataset data/D.csv --name RUN

Writes runs/RUN.json. What is measured (wall clock time.perf_counter unless noted; CPU = this
process's user+sys from resource.getrusage, which on a shared machine is steadier than wall):
- process start -> before `import ludwig` (interpreter + this script), `import ludwig.api` time
  (includes torch, transformers),
- LudwigModel(config) (config validation + backend init),
- train() phases via Ludwig's own callbacks (ludwig/callbacks/__init__.py: Callback):
  preprocess (on_preprocess_start/end), train_init -> train_start (model build + batch-size tuning;
  LudwigModel.create_model and Trainer.tune_batch_size are wrapped to time them separately),
  trainer setup (on_trainer_train_setup) -> first on_batch_start, each step (on_batch_start ->
  on_batch_end), each evaluation (on_eval_start -> on_eval_end), the gap eval_end -> next batch
  (checkpoint save), teardown -> return of train() (calibration, final save),
- what Ludwig decided: steps, epochs, steps_per_epoch, total_steps, batch size (and the tuner's
  choice when auto), eval batch size, gradient accumulation, optimizer steps (sync_step),
- text: per-feature vocabulary size, max sequence length and tokens per sample after Ludwig's
  preprocessing (non-padding ids in the preprocessed training set).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

T_SCRIPT = time.perf_counter()
WALL_SCRIPT = time.time()


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def runq_wait_s() -> float:
    """Seconds this process's live threads have spent runnable but waiting for a CPU
    (/proc/<pid>/task/*/schedstat, 2nd field): the contention this run suffered."""
    total = 0
    for t in Path("/proc/self/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--set", action="append", default=[], help="trainer.KEY=VALUE (yaml value)")
    ap.add_argument("--keep-cache", action="store_true", help="reuse Ludwig's preprocessed-data cache")
    args = ap.parse_args()

    # Ludwig caches preprocessed data beside the dataset (<stem>.meta.json, <stem>.training.parquet,
    # .split.parquet, ...; hdf5 in older versions) and reuses it when the meta file's checksum
    # matches (ludwig/data/cache/manager.py: DatasetCache.get): remove it unless asked to keep it.
    ds = Path(args.dataset)
    cache_files = [
        p
        for pat in (".*.hdf5", ".*.parquet", ".*.shapes.json", ".meta.json")
        for p in sorted(ds.parent.glob(ds.stem + pat))
    ]
    if not args.keep_cache:
        for p in cache_files:
            p.unlink()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import psutil
    import yaml

    proc_start = psutil.Process().create_time()
    rec: dict = {
        "name": args.name,
        "config": args.config,
        "dataset": args.dataset,
        "load_avg_start": loadavg(),
        "cpu_count": os.cpu_count(),
        "process_start_to_script_s": round(WALL_SCRIPT - proc_start, 3),
        "cache_files_before": [p.name for p in cache_files],
        "kept_cache": bool(args.keep_cache),
    }

    t = time.perf_counter()
    c0 = cpu_s()
    import torch

    rec["import_torch_s"] = round(time.perf_counter() - t, 3)
    import ludwig
    import ludwig.api
    from ludwig.callbacks import Callback

    rec["import_total_s"] = round(time.perf_counter() - t, 3)
    rec["import_cpu_s"] = round(cpu_s() - c0, 3)
    rec["ludwig_version"] = ludwig.__version__
    rec["torch_version"] = torch.__version__
    rec["torch_threads"] = torch.get_num_threads()

    config = yaml.safe_load(Path(args.config).read_text())
    for kv in args.set:
        k, v = kv.split("=", 1)
        sect, key = k.split(".", 1)
        config.setdefault(sect, {})[key] = yaml.safe_load(v)
    rec["config_used"] = config

    ev: dict = {"steps": [], "evals": [], "epochs": [], "tune": [], "create_model_s": None}
    marks: dict[str, float] = {}

    runq: dict[str, float] = {}

    def mark(name: str) -> None:
        marks.setdefault(name, time.perf_counter())
        marks.setdefault(name + "_cpu", cpu_s())
        runq.setdefault(name, runq_wait_s())

    # time model construction and batch-size tuning separately
    from ludwig.trainers.trainer import Trainer

    orig_create = ludwig.api.LudwigModel.create_model
    orig_tune = Trainer.tune_batch_size

    def timed_create(config_obj, random_seed=42):
        t0 = time.perf_counter()
        m = orig_create(config_obj, random_seed=random_seed)
        ev["create_model_s"] = round(time.perf_counter() - t0, 4)
        try:
            ev["model_params"] = int(sum(p.numel() for p in m.parameters()))
            ev["model_trainable_params"] = int(sum(p.numel() for p in m.parameters() if p.requires_grad))
        except Exception as e:  # noqa: BLE001
            ev["model_params_error"] = repr(e)
        return m

    def timed_tune(self, *a, **kw):
        t0 = time.perf_counter()
        bs = orig_tune(self, *a, **kw)
        ev["tune"].append(
            {
                "for_training": kw.get("tune_for_training", True),
                "chosen": bs,
                "s": round(time.perf_counter() - t0, 4),
            }
        )
        return bs

    ludwig.api.LudwigModel.create_model = staticmethod(timed_create)
    Trainer.tune_batch_size = timed_tune

    class Probe(Callback):
        def __init__(self):
            self.batch_t0 = None
            self.eval_t0 = None
            self.last_eval_end = None

        def on_preprocess_start(self, config, **kw):
            mark("preprocess_start")

        def on_preprocess_end(self, *a, **kw):
            mark("preprocess_end")

        def on_build_metadata_start(self, df, mode, **kw):
            mark("build_metadata_start")

        def on_build_metadata_end(self, df, mode, **kw):
            mark("build_metadata_end")

        def on_build_data_start(self, df, mode, **kw):
            mark("build_data_start")

        def on_build_data_end(self, df, mode, **kw):
            mark("build_data_end")

        def on_train_init(self, *a, **kw):
            mark("train_init")

        def on_train_start(self, *a, **kw):
            mark("train_start")

        def on_trainer_train_setup(self, trainer, save_path, is_coordinator, **kw):
            mark("trainer_setup")

        def on_epoch_start(self, trainer, progress_tracker, save_path, **kw):
            ev["epochs"].append({"epoch": progress_tracker.epoch, "t_start": time.perf_counter()})

        def on_epoch_end(self, trainer, progress_tracker, save_path, **kw):
            if ev["epochs"]:
                ev["epochs"][-1]["t_end"] = time.perf_counter()
                ev["epochs"][-1]["steps_at_end"] = progress_tracker.steps

        def on_batch_start(self, trainer, progress_tracker, save_path, **kw):
            mark("first_batch_start")
            now = time.perf_counter()
            if self.last_eval_end is not None:
                ev["evals"][-1]["gap_to_next_batch_s"] = round(now - self.last_eval_end, 5)
                self.last_eval_end = None
            self.batch_t0 = now
            self.batch_c0 = cpu_s()

        def on_batch_end(self, trainer, progress_tracker, save_path, sync_step=True, **kw):
            now = time.perf_counter()
            ev["steps"].append(
                [round(now - self.batch_t0, 6), round(cpu_s() - self.batch_c0, 4), bool(sync_step)]
            )
            marks["last_batch_end"] = now

        def on_eval_start(self, trainer, progress_tracker, save_path, **kw):
            self.eval_t0 = time.perf_counter()

        def on_eval_end(self, trainer, progress_tracker, save_path, **kw):
            now = time.perf_counter()
            ev["evals"].append(
                {"step": progress_tracker.steps, "s": round(now - self.eval_t0, 4), "t_start_abs": self.eval_t0}
            )
            self.last_eval_end = now

        def on_trainer_train_teardown(self, trainer, progress_tracker, save_path, is_coordinator, **kw):
            mark("trainer_teardown")
            ev["progress"] = {
                "steps": progress_tracker.steps,
                "epoch": progress_tracker.epoch,
                "steps_per_epoch": getattr(trainer, "steps_per_epoch", None),
                "total_steps": getattr(trainer, "total_steps", None),
                "epochs_after_adjust": getattr(trainer, "epochs", None),
                "batch_size": getattr(trainer, "batch_size", None),
                "eval_batch_size": getattr(trainer, "eval_batch_size", None),
                "gradient_accumulation_steps": getattr(trainer, "gradient_accumulation_steps", None),
            }
            if self.last_eval_end is not None:
                ev["evals"][-1]["gap_to_teardown_s"] = round(time.perf_counter() - self.last_eval_end, 5)
                self.last_eval_end = None

        def on_train_end(self, output_directory, **kw):
            mark("train_end")

    # the batch-size tuner's own log lines (ludwig/utils/batch_size_tuner.py), whatever the log level
    import logging

    tuner_lines: list[str] = []

    class _ListHandler(logging.Handler):
        def emit(self, record):
            tuner_lines.append(f"{time.perf_counter() - T_SCRIPT:.3f} {record.getMessage()}")

    tl = logging.getLogger("ludwig.utils.batch_size_tuner")
    tl.setLevel(logging.INFO)
    tl.addHandler(_ListHandler())
    tl.propagate = False

    out_dir = Path("runs_out") / args.name
    shutil.rmtree(out_dir, ignore_errors=True)

    t = time.perf_counter()
    c_ctor = cpu_s()
    model = ludwig.api.LudwigModel(config, callbacks=[Probe()], logging_level=30)
    rec["ludwig_model_ctor_s"] = round(time.perf_counter() - t, 3)
    rec["ludwig_model_ctor_cpu_s"] = round(cpu_s() - c_ctor, 3)
    rec["resolved_trainer"] = {
        k: v
        for k, v in model.config_obj.trainer.to_dict().items()
        if k
        in (
            "batch_size",
            "eval_batch_size",
            "epochs",
            "train_steps",
            "early_stop",
            "steps_per_checkpoint",
            "checkpoints_per_epoch",
            "gradient_accumulation_steps",
            "effective_batch_size",
            "learning_rate",
            "max_batch_size",
        )
    }
    rec["combiner"] = getattr(getattr(model.config_obj, "combiner", None), "type", None)

    t_train = time.perf_counter()
    c_train = cpu_s()
    rq_train = runq_wait_s()
    result = model.train(dataset=args.dataset, output_directory=str(out_dir))
    t_end = time.perf_counter()
    c_end = cpu_s()
    rq_end = runq_wait_s()

    ts = t_train
    rec["train_call_s"] = round(t_end - t_train, 3)
    rec["train_call_cpu_s"] = round(c_end - c_train, 3)
    rec["total_wall_s"] = round(time.time() - proc_start, 3)  # process start -> train() returned
    rec["total_cpu_s"] = round(c_end, 3)
    rec["marks_rel_train_s"] = {k: round(v - ts, 4) for k, v in marks.items() if not k.endswith("_cpu")}
    rec["runq_wait_s"] = {
        "train_call": round(rq_end - rq_train, 3),
        "train_call_fraction_of_wall": round((rq_end - rq_train) / (t_end - t_train), 3),
        "to_first_batch": round(runq.get("first_batch_start", rq_train) - rq_train, 3),
        "first_batch_to_teardown": round(runq.get("trainer_teardown", 0) - runq.get("first_batch_start", 0), 3),
        "process_total": round(rq_end, 3),
    }
    rec["marks_cpu_rel_train_s"] = {
        k[:-4]: round(v - c_train, 4) for k, v in marks.items() if k.endswith("_cpu")
    }
    m = rec["marks_rel_train_s"]

    def span(a: str, b: str) -> float | None:
        return round(m[b] - m[a], 4) if a in m and b in m else None

    steps = ev["steps"]
    step_s = [s[0] for s in steps]
    eval_s = [e["s"] for e in ev["evals"]]
    gaps = [e.get("gap_to_next_batch_s", e.get("gap_to_teardown_s", 0.0)) for e in ev["evals"]]
    loop_s = (m.get("last_batch_end", 0) - m.get("first_batch_start", 0)) if steps else 0.0
    last_be = marks.get("last_batch_end", float("inf"))
    in_loop = [e for e in ev["evals"] if e["t_start_abs"] < last_be]
    for e in ev["evals"]:
        e["t_start_rel_train_s"] = round(e.pop("t_start_abs") - ts, 4)
        e["inside_loop"] = e in in_loop
    in_loop_s = sum(e["s"] + e.get("gap_to_next_batch_s", 0.0) for e in in_loop)
    rec["phases_s"] = {
        "pre_preprocess": m.get("preprocess_start"),  # description, data load start
        "preprocess": span("preprocess_start", "preprocess_end"),
        "build_metadata": span("build_metadata_start", "build_metadata_end"),
        "build_data": span("build_data_start", "build_data_end"),
        "preprocess_end_to_train_init": span("preprocess_end", "train_init"),
        "train_init_to_train_start": span("train_init", "train_start"),
        "create_model": ev["create_model_s"],
        "tune_batch_size_total": round(sum(x["s"] for x in ev["tune"]), 4),
        "train_start_to_first_batch": span("train_start", "first_batch_start"),
        "train_call_to_first_batch": m.get("first_batch_start"),
        "steps_sum": round(sum(step_s), 4),
        "evals_sum": round(sum(eval_s), 4),
        "post_eval_gaps_sum": round(sum(gaps), 4),
        "loop_span": round(loop_s, 4),
        "loop_other": round(loop_s - sum(step_s) - in_loop_s, 4) if steps else None,
        "after_loop_to_return": round(t_end - ts - m.get("last_batch_end", t_end - ts), 4),
        "teardown_to_return": round(t_end - ts - m["trainer_teardown"], 4) if "trainer_teardown" in m else None,
    }
    import statistics as st

    rec["steps"] = {
        "count": len(steps),
        "optimizer_steps": sum(1 for s in steps if s[2]),
        "first_s": step_s[0] if step_s else None,
        "median_s": round(st.median(step_s), 6) if step_s else None,
        "median_excl_first_s": round(st.median(step_s[1:]), 6) if len(step_s) > 1 else None,
        "p10_s": round(sorted(step_s)[len(step_s) // 10], 6) if step_s else None,
        "p90_s": round(sorted(step_s)[(len(step_s) * 9) // 10], 6) if step_s else None,
        "median_cpu_s": round(st.median([s[1] for s in steps]), 5) if steps else None,
        "all_s": step_s,
    }
    rec["evals"] = ev["evals"]
    rec["tune"] = ev["tune"]
    rec["tuner_log"] = tuner_lines
    rec["progress"] = ev.get("progress")
    rec["model_params"] = ev.get("model_params")
    rec["model_trainable_params"] = ev.get("model_trainable_params")
    rec["epochs_seen"] = [
        {
            "epoch": e["epoch"],
            "s": round(e.get("t_end", t_end) - e["t_start"], 4),
            "steps_at_end": e.get("steps_at_end"),
        }
        for e in ev["epochs"]
    ]

    # data sizes after Ludwig's split and preprocessing
    pre = result.preprocessed_data
    meta = pre.training_set_metadata
    rec["rows"] = {
        "train": len(pre.training_set),
        "validation": len(pre.validation_set) if pre.validation_set is not None else 0,
        "test": len(pre.test_set) if pre.test_set is not None else 0,
    }
    text = {}
    import numpy as np

    feats = list(model.config_obj.input_features) + list(model.config_obj.output_features)
    for f in feats:
        if f.type != "text":
            continue
        fm = meta.get(f.name, {})
        info = {
            "vocab_size": fm.get("vocab_size"),
            "max_sequence_length": fm.get("max_sequence_length"),
            "max_sequence_length_99ptile": fm.get("max_sequence_length_99ptile"),
            "pad_idx": fm.get("pad_idx"),
            "tokenizer": getattr(f.preprocessing, "tokenizer", None),
            "config_max_sequence_length": getattr(f.preprocessing, "max_sequence_length", None),
            "most_common": getattr(f.preprocessing, "most_common", None),
        }
        try:
            col = pre.training_set.dataset[f.proc_column]
            arr = np.stack([np.asarray(x) for x in col])
            pad = fm.get("pad_idx", 0)
            lens = (arr != pad).sum(axis=1)
            info.update(
                padded_length=int(arr.shape[1]),
                tokens_per_sample_mean=round(float(lens.mean()), 3),
                tokens_per_sample_p50=float(np.median(lens)),
                tokens_per_sample_max=int(lens.max()),
            )
        except Exception as e:  # noqa: BLE001
            info["tokens_error"] = repr(e)[:300]
        text[f.name] = info
    rec["text"] = text
    rec["load_avg_end"] = loadavg()
    rec["output_dir_bytes"] = sum(p.stat().st_size for p in out_dir.rglob("*") if p.is_file())

    Path("runs").mkdir(exist_ok=True)
    Path("runs", f"{args.name}.json").write_text(json.dumps(rec, indent=1, default=str))
    shutil.rmtree(out_dir, ignore_errors=True)
    print(
        f"{args.name}: total {rec['total_wall_s']}s (import {rec['import_total_s']}s, train() {rec['train_call_s']}s, "
        f"first batch at {rec['phases_s']['train_call_to_first_batch']}s), steps {len(steps)}, "
        f"median step {rec['steps']['median_s']}s, evals {len(eval_s)} sum {sum(eval_s):.2f}s, "
        f"load {rec['load_avg_start']}->{rec['load_avg_end']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
