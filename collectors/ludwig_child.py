"""The part of the `ludwig` collector that runs inside the Ludwig venv (Python 3.12, ludwig 0.17):
synthetic datasets and one real Ludwig training, measured phase by phase.

Standard library at import time; numpy, pandas, PIL, psutil, yaml, torch and ludwig only inside
the functions (all present in the Ludwig venv, `make ludwig-env`). Run by collectors/ludwig_profile.py:

    LUDWIG_PY -m collectors.ludwig_child data WORK_DIR           # datasets + a tiny local Llama
    LUDWIG_PY -m collectors.ludwig_child run SPEC.json OUT.json  # one training -> one record
    LUDWIG_PY -m collectors.ludwig_child callback CONFIG DATA OUT  # a training with perfmodel's ETA callback

One training is one process, as a user runs it: `LudwigModel(config).train(dataset=...)` with
Ludwig's default output saving and logging off, timed with Ludwig's own callbacks
(ludwig/callbacks/__init__.py: Callback: preprocess, train_init/start, batch start/end, eval
start/end, teardown), plus wrappers on `LudwigModel.create_model` and `Trainer.tune_batch_size`,
CPU time (getrusage) and the run-queue wait of the process's threads (/proc/self/task/*/schedstat:
seconds runnable without a CPU, the contention the run suffered). Ludwig's preprocessed-data cache
beside the dataset is deleted first, so every run preprocesses afresh (ludwig/data/cache/
manager.py: DatasetCache.get). The measurement follows datasets/heldout/ludwig-lab/lab/run_ludwig.py (issue 16,
phase 1), whose 18 runs are the held-out set of docs/ludwig.md.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import string
import sys
import threading
import time
from pathlib import Path
from typing import Any

T_SCRIPT = time.perf_counter()
WALL_SCRIPT = time.time()
SEED = 20261130
"""Seed of the synthetic data: not the lab's (1234), so the profile's runs are other data."""


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def runq_wait_s() -> float:
    """Seconds this process's live threads spent runnable but waiting for a CPU (schedstat field 2)."""
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return total / 1e9


def thread_cpu_s() -> tuple[float, float]:
    """(seconds on a CPU of the main thread, of all live threads) of this process (schedstat field 1).
    On a shared host these do not count the time a thread waited for a CPU: the main thread's on-CPU
    time per batch approximates the batch's time on a quiet host (the intra-op worker runs beside it);
    with OMP_WAIT_POLICY=PASSIVE the workers do not spin at barriers, so the sum is their work."""
    main = threading.get_native_id()
    own = total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            ns = int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue
        total += ns
        if task.name == str(main):
            own = ns
    return own / 1e9, total / 1e9


# --- synthetic data (the lab's generators, gen_data.py) -----------------------------------------

WORD_LEN_P = (0.032, 0.170, 0.210, 0.160, 0.110, 0.085, 0.080, 0.060, 0.045, 0.025, 0.013, 0.010)
"""Share of running English words of 1..12 letters (Brown-corpus-like; mean ~4.7 letters)."""


def _vocab(rng: Any) -> dict[int, list[str]]:
    letters = list(string.ascii_lowercase)
    vocab: dict[int, list[str]] = {}
    for k in range(1, 13):
        want = 26 if k == 1 else (300 if k == 2 else 600)
        seen: set[str] = set()
        while len(seen) < want:
            seen.add("".join(rng.choice(letters, size=k)))
        vocab[k] = sorted(seen)
    return vocab


def _text(rng: Any, vocab: dict[int, list[str]], labels: Any, lo: int, hi: int) -> list[str]:
    # numpy: kept out of import time (the CLI's cold start)
    import numpy as np

    len_p = np.array(WORD_LEN_P) / sum(WORD_LEN_P)
    zipf = {}
    for k, words in vocab.items():
        p = 1.0 / np.arange(1, len(words) + 1, dtype=float) ** 1.07
        zipf[k] = p / p.sum()
    markers = {0: ["bad", "awful"], 1: ["good", "great"], 2: ["okay", "fine"]}
    rows = []
    for y in labels:
        n = int(rng.integers(lo, hi + 1))
        lens = rng.choice(np.arange(1, 13), size=n, p=len_p)
        words = [vocab[k][int(rng.choice(len(vocab[k]), p=zipf[k]))] for k in lens]
        for _ in range(2):
            words[int(rng.integers(0, n))] = markers[int(y) % 3][int(rng.integers(0, 2))]
        rows.append(" ".join(words))
    return rows


def make_data(work: Path, sizes: dict[str, list[int]]) -> dict[str, str]:
    """CSV files `{kind}_{rows}.csv` (tabular, text, images, llm) and models/tiny-llama under
    `work`; returns {file stem: path}. Existing files are kept (same seed, same content)."""
    # numpy: kept out of import time (the CLI's cold start); pandas: 0.3-0.8 s of a cold start, not on the prediction path
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(SEED)
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    vocab = _vocab(rng)
    out: dict[str, str] = {}
    for n in sizes.get("tabular", []):
        p = data / f"tabular_{n}.csv"
        r = np.random.default_rng(SEED + n)
        df = pd.DataFrame(
            {
                "age": r.integers(18, 90, n),
                "income": r.lognormal(10, 1, n).round(2),
                "hours": r.normal(40, 10, n).round(1),
                "score": r.normal(0, 1, n).round(4),
                "workclass": r.choice([f"w{i}" for i in range(8)], n),
                "education": r.choice([f"e{i}" for i in range(16)], n),
                "region": r.choice([f"r{i}" for i in range(40)], n),
                "flag": r.choice(["yes", "no"], n),
            }
        )
        logit = 0.03 * (df.age - 50) + 0.5 * df.score + (df.flag == "yes") * 0.7
        df["label"] = (r.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
        if not p.exists():
            df.to_csv(p, index=False)
        out[p.stem] = str(p)
    for kind in sorted(k for k in sizes if k.startswith("wide")):
        for n in sizes[kind]:
            p = data / f"{kind}_{n}.csv"
            if not p.exists():
                wide_frame(int(kind[4:]), n, np.random.default_rng(SEED + 5 + n + int(kind[4:]))).to_csv(p, index=False)
            out[p.stem] = str(p)
    for kind, (lo, hi) in (("midtext", (30, 120)), ("longtext", (60, 240))):
        for n in sizes.get(kind, []):
            p = data / f"{kind}_{n}.csv"
            r = np.random.default_rng(SEED + 7 + n + hi)
            y = r.integers(0, 3, n)
            if not p.exists():
                pd.DataFrame({"review": _text(r, vocab, y, lo, hi), "label": [f"l{v}" for v in y]}).to_csv(
                    p, index=False
                )
            out[p.stem] = str(p)
    if sizes.get("images"):
        # Pillow: only image work needs it
        from PIL import Image

        n_max = max(sizes["images"])
        r = np.random.default_rng(SEED + 1)
        img_dir = data / "images"
        img_dir.mkdir(exist_ok=True)
        labels = r.integers(0, 10, n_max)
        paths = []
        for i, y in enumerate(labels):
            a = (r.random((28, 28)) * 60).astype(np.uint8)
            a[4 : 8 + int(y), 4 : 8 + int(y)] = 230  # a bright square whose size encodes the label
            p = img_dir / f"img_{i:05d}.png"
            if not p.exists():
                Image.fromarray(a, mode="L").save(p)
            paths.append(str(p))
        frame = pd.DataFrame({"image_path": paths, "label": [f"c{y}" for y in labels]})
        for n in sizes["images"]:
            p = data / f"images_{n}.csv"
            if not p.exists():
                frame.iloc[:n].to_csv(p, index=False)
            out[p.stem] = str(p)
    for n in sizes.get("text", []):
        p = data / f"text_{n}.csv"
        r = np.random.default_rng(SEED + 2 + n)
        y = r.integers(0, 3, n)
        if not p.exists():
            pd.DataFrame({"review": _text(r, vocab, y, 15, 60), "label": [f"l{v}" for v in y]}).to_csv(
                p, index=False
            )
        out[p.stem] = str(p)
    corpus: list[str] = []
    for n in sizes.get("llm", []):
        p = data / f"llm_{n}.csv"
        r = np.random.default_rng(SEED + 3 + n)
        y = r.integers(0, 3, n)
        frame = pd.DataFrame({"instruction": _text(r, vocab, y, 10, 30), "output": _text(r, vocab, y, 5, 15)})
        if not p.exists():
            frame.to_csv(p, index=False)
        corpus += list(frame["instruction"]) + list(frame["output"])
        out[p.stem] = str(p)
    if corpus:
        out["tiny-llama"] = str(_tiny_llama(work / "models" / "tiny-llama", corpus))
    return out


def wide_columns(k: int) -> tuple[list[str], list[tuple[str, int]]]:
    """The columns of a `wide{k}` table: k - k // 4 numbers x0.. and k // 4 categories c0.. (with 5
    to 40 distinct values), plus a binary `label`."""
    cats = k // 4
    return [f"x{j}" for j in range(k - cats)], [(f"c{j}", 5 + (11 * j) % 36) for j in range(cats)]


def wide_frame(k: int, n: int, r: Any) -> Any:
    """`n` rows of the `wide{k}` table (seeded by `r`): a label that depends on a few columns."""
    # numpy, pandas: the Ludwig venv's, only when data is made (this module imports the standard library only)
    import numpy as np
    import pandas as pd

    numbers, cats = wide_columns(k)
    cols: dict[str, Any] = {x: r.normal(0, 1, n).round(4) for x in numbers}
    cols.update({c: r.choice([f"{c}v{i}" for i in range(m)], n) for c, m in cats})
    frame = pd.DataFrame(cols)
    logit = frame[numbers[0]] - 0.5 * frame[numbers[1]] + (frame[cats[0][0]] == f"{cats[0][0]}v0") * 0.8
    frame["label"] = (r.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return frame


def _tiny_llama(out: Path, corpus: list[str]) -> Path:
    """A random 2-layer Llama (hidden 64) with a word-level tokenizer trained on `corpus` (no network)."""
    if (out / "config.json").exists():
        return out
    # torch, tokenizers, transformers: heavy and optional, only this tiny model needs them
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        corpus,
        trainer=trainers.WordLevelTrainer(vocab_size=2000, special_tokens=["<unk>", "<s>", "</s>", "<pad>"]),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>"
    )
    fast.save_pretrained(out)
    torch.manual_seed(SEED)
    cfg = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


# --- one training -------------------------------------------------------------------------------


def run_training(spec: dict[str, Any]) -> dict[str, Any]:
    """Train `spec['config']` on `spec['dataset']` once; the measured record (see the module doc)."""
    ds = Path(spec["dataset"])
    for pattern in (".*.hdf5", ".*.parquet", ".*.shapes.json", ".meta.json"):
        for p in ds.parent.glob(ds.stem + pattern):
            p.unlink()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # psutil: optional, only utilisation sampling needs it
    import psutil

    rec: dict[str, Any] = {
        "name": spec["name"],
        "dataset": str(ds),
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "process_start_to_script_s": round(WALL_SCRIPT - psutil.Process().create_time(), 3),
    }
    t, c0 = time.perf_counter(), cpu_s()
    # torch: seconds to import, only measuring needs it
    import torch

    rec["import_torch_s"] = round(time.perf_counter() - t, 3)
    # Ludwig: optional, only in its own environment
    import ludwig
    import ludwig.api
    from ludwig.callbacks import Callback
    from ludwig.trainers.trainer import Trainer

    rec["import_total_s"] = round(time.perf_counter() - t, 3)
    rec["import_cpu_s"] = round(cpu_s() - c0, 3)
    rec["ludwig_version"], rec["torch_version"] = ludwig.__version__, torch.__version__
    rec["torch_threads"] = torch.get_num_threads()
    config = spec["config"]
    rec["config_used"] = config
    ev: dict[str, Any] = {"steps": [], "steps_cpu": [], "evals": [], "tune": [], "create_model_s": None}
    marks: dict[str, float] = {}
    runq: dict[str, float] = {}

    def mark(name: str) -> None:
        marks.setdefault(name, time.perf_counter())
        runq.setdefault(name, runq_wait_s())

    orig_create, orig_tune = ludwig.api.LudwigModel.create_model, Trainer.tune_batch_size

    def timed_create(config_obj: Any, random_seed: int = 42) -> Any:
        t0 = time.perf_counter()
        model = orig_create(config_obj, random_seed=random_seed)
        ev["create_model_s"] = round(time.perf_counter() - t0, 4)
        ev["model_params"] = int(sum(p.numel() for p in model.parameters()))
        ev["model_trainable_params"] = int(sum(p.numel() for p in model.parameters() if p.requires_grad))
        by_module: dict[str, int] = {}
        for name, p in model.named_parameters():
            key = ".".join(name.split(".")[:2])
            by_module[key] = by_module.get(key, 0) + int(p.numel())
        ev["params_by_module"] = by_module
        return model

    def timed_tune(self: Any, *a: Any, **kw: Any) -> Any:
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

    class Probe(Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.t0 = 0.0
            self.cpu0 = (0.0, 0.0)
            self.eval_t0 = 0.0
            self.last_eval_end: float | None = None

        def on_preprocess_start(self, config: Any, **kw: Any) -> None:
            mark("preprocess_start")

        def on_preprocess_end(self, *a: Any, **kw: Any) -> None:
            mark("preprocess_end")

        def on_train_init(self, *a: Any, **kw: Any) -> None:
            mark("train_init")

        def on_train_start(self, *a: Any, **kw: Any) -> None:
            mark("train_start")

        def on_batch_start(self, trainer: Any, progress_tracker: Any, save_path: str, **kw: Any) -> None:
            mark("first_batch_start")
            now = time.perf_counter()
            if self.last_eval_end is not None:
                ev["evals"][-1]["gap_to_next_batch_s"] = round(now - self.last_eval_end, 5)
                self.last_eval_end = None
            self.t0 = now
            self.cpu0 = thread_cpu_s()

        def on_batch_end(
            self, trainer: Any, progress_tracker: Any, save_path: str, sync_step: bool = True, **kw: Any
        ) -> None:
            now = time.perf_counter()
            main, total = thread_cpu_s()
            ev["steps"].append([round(now - self.t0, 6), bool(sync_step)])
            ev["steps_cpu"].append([round(main - self.cpu0[0], 6), round(total - self.cpu0[1], 6)])
            marks["last_batch_end"] = now

        def on_eval_start(self, trainer: Any, progress_tracker: Any, save_path: str, **kw: Any) -> None:
            self.eval_t0 = time.perf_counter()

        def on_eval_end(self, trainer: Any, progress_tracker: Any, save_path: str, **kw: Any) -> None:
            now = time.perf_counter()
            ev["evals"].append({"step": progress_tracker.steps, "s": round(now - self.eval_t0, 4)})
            self.last_eval_end = now

        def on_trainer_train_teardown(
            self, trainer: Any, progress_tracker: Any, save_path: str, is_coordinator: bool, **kw: Any
        ) -> None:
            mark("trainer_teardown")
            ev["progress"] = {
                k: getattr(trainer, k, None)
                for k in (
                    "steps_per_epoch",
                    "total_steps",
                    "batch_size",
                    "eval_batch_size",
                    "gradient_accumulation_steps",
                )
            }
            ev["progress"].update(steps=progress_tracker.steps, epoch=progress_tracker.epoch)

    out_dir = Path(spec.get("output_dir") or (ds.parent / "runs_out" / spec["name"]))
    shutil.rmtree(out_dir, ignore_errors=True)
    t, c_ctor = time.perf_counter(), cpu_s()
    model = ludwig.api.LudwigModel(config, callbacks=[Probe()], logging_level=30)
    rec["ludwig_model_ctor_s"] = round(time.perf_counter() - t, 3)
    rec["ludwig_model_ctor_cpu_s"] = round(cpu_s() - c_ctor, 3)
    trainer_cfg = model.config_obj.trainer.to_dict()
    rec["resolved_trainer"] = {
        k: trainer_cfg.get(k)
        for k in (
            "batch_size",
            "eval_batch_size",
            "epochs",
            "train_steps",
            "early_stop",
            "steps_per_checkpoint",
            "checkpoints_per_epoch",
            "gradient_accumulation_steps",
            "effective_batch_size",
        )
    }
    rec["combiner"] = getattr(getattr(model.config_obj, "combiner", None), "type", None)
    t_train, c_train, rq_train = time.perf_counter(), cpu_s(), runq_wait_s()
    result = model.train(dataset=str(ds), output_directory=str(out_dir))
    t_end, c_end, rq_end = time.perf_counter(), cpu_s(), runq_wait_s()
    rec["train_call_s"] = round(t_end - t_train, 3)
    rec["train_call_cpu_s"] = round(c_end - c_train, 3)
    rec["total_wall_s"] = round(
        time.time() - psutil.Process().create_time(), 3
    )  # process start -> train() returned
    rec["total_cpu_s"] = round(c_end, 3)
    m = {k: round(v - t_train, 4) for k, v in marks.items()}
    rec["marks_rel_train_s"] = m
    rec["runq_wait_s"] = {
        "train_call": round(rq_end - rq_train, 3),
        "train_call_fraction_of_wall": round((rq_end - rq_train) / (t_end - t_train), 3),
        "process_total": round(rq_end, 3),
    }
    step_s = [s[0] for s in ev["steps"]]
    eval_s = [e["s"] for e in ev["evals"]]
    rec["phases_s"] = {
        "preprocess": round(m["preprocess_end"] - m["preprocess_start"], 4)
        if "preprocess_end" in m
        else None,
        "create_model": ev["create_model_s"],
        "tune_batch_size_total": round(sum(x["s"] for x in ev["tune"]), 4),
        "train_call_to_first_batch": m.get("first_batch_start"),
        "steps_sum": round(sum(step_s), 4),
        "evals_sum": round(sum(eval_s), 4),
        "after_loop_to_return": round(t_end - t_train - m.get("last_batch_end", t_end - t_train), 4),
    }
    srt = sorted(step_s)
    rec["steps"] = {
        "count": len(step_s),
        "optimizer_steps": sum(1 for s in ev["steps"] if s[1]),
        "first_s": step_s[0] if step_s else None,
        "median_s": round(statistics.median(step_s), 6) if step_s else None,
        "median_excl_first_s": round(statistics.median(step_s[1:]), 6) if len(step_s) > 1 else None,
        "std_excl_first_s": round(statistics.pstdev(step_s[1:]), 6) if len(step_s) > 2 else None,
        "p10_s": round(srt[len(srt) // 10], 6) if srt else None,
        "p90_s": round(srt[(len(srt) * 9) // 10], 6) if srt else None,
        "all_s": step_s,
        "main_thread_cpu_s": [c[0] for c in ev["steps_cpu"]],
        "all_threads_cpu_s": [c[1] for c in ev["steps_cpu"]],
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    }
    rec["evals"], rec["tune"], rec["progress"] = ev["evals"], ev["tune"], ev.get("progress")
    rec["model_params"], rec["model_trainable_params"] = (
        ev.get("model_params"),
        ev.get("model_trainable_params"),
    )
    rec["params_by_module"] = ev.get("params_by_module")
    pre = result.preprocessed_data
    rec["rows"] = {
        "train": len(pre.training_set),
        "validation": len(pre.validation_set) if pre.validation_set is not None else 0,
        "test": len(pre.test_set) if pre.test_set is not None else 0,
    }
    rec["text"] = _text_stats(model, pre)
    rec["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    rec["collected_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    shutil.rmtree(out_dir, ignore_errors=True)
    return rec


def _text_stats(model: Any, pre: Any) -> dict[str, Any]:
    """Vocabulary, padded length and real tokens per sample of each text feature after preprocessing."""
    # numpy: kept out of import time (the CLI's cold start)
    import numpy as np

    meta = pre.training_set_metadata
    out: dict[str, Any] = {}
    for f in [*model.config_obj.input_features, *model.config_obj.output_features]:
        if f.type != "text":
            continue
        fm = meta.get(f.name, {})
        info: dict[str, Any] = {
            "vocab_size": fm.get("vocab_size"),
            "max_sequence_length": fm.get("max_sequence_length"),
            "tokenizer": getattr(f.preprocessing, "tokenizer", None),
        }
        try:
            arr = np.stack([np.asarray(x) for x in pre.training_set.dataset[f.proc_column]])
            lens = (arr != fm.get("pad_idx", 0)).sum(axis=1)
            info.update(
                padded_length=int(arr.shape[1]),
                tokens_per_sample_mean=round(float(lens.mean()), 3),
                tokens_per_sample_max=int(lens.max()),
            )
        except Exception as exc:  # noqa: BLE001 - a statistic, not the measurement
            info["tokens_error"] = repr(exc)[:300]
        out[f.name] = info
    return out


def train_with_callback(config_path: str, dataset: str, out_dir: str) -> dict[str, Any]:
    """One real Ludwig training with perfmodel's live-ETA callback (perfmodel.monitor.ludwig; perfmodel
    must be importable here: run from the repository root, lightgbm installed for the learned prior)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # yaml, Ludwig and the Ludwig callback: only the child running Ludwig needs them
    import yaml
    from ludwig.api import LudwigModel

    from perfmodel.monitor.ludwig import LUDWIG_AVAILABLE, PerfmodelLudwigCallback

    config = yaml.safe_load(Path(config_path).read_text())
    cb = PerfmodelLudwigCallback(report_every_s=1.0, sampler=False)
    t0 = time.perf_counter()
    model = LudwigModel(config, callbacks=[cb], logging_level=30)
    model.train(dataset=dataset, output_directory=out_dir)
    info, final = cb.session.info, cb.final
    prior = info.prior
    return {
        "ludwig_callback_base": "ludwig.callbacks.Callback" if LUDWIG_AVAILABLE else "stand-in",
        "prior_step_s": None
        if prior is None
        else [round(prior.low_s, 5), round(prior.estimate_s, 5), round(prior.high_s, 5)],
        "prior_notes": list(info.notes),
        "total_steps_after_first_batch": final.total_steps if final else None,
        "steps_timed": final.steps_done if final else None,
        "finished": final.finished if final else None,
        "observed_median_step_s": round(final.observed.median_s, 5) if final and final.observed else None,
        "record": str(cb.session.record) if cb.session.record else None,
        "train_wall_s": round(time.perf_counter() - t0, 2),
    }


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "callback":
        print(json.dumps(train_with_callback(argv[1], argv[2], argv[3]), indent=1))
        return 0
    if len(argv) >= 2 and argv[0] == "data":
        sizes = json.loads(argv[2]) if len(argv) > 2 else {}
        print(json.dumps(make_data(Path(argv[1]), sizes)))
        return 0
    if len(argv) == 3 and argv[0] == "run":
        spec = json.loads(Path(argv[1]).read_text())
        rec = run_training(spec)
        Path(argv[2]).write_text(json.dumps(rec, default=str))
        s = rec["steps"]
        print(
            f"{rec['name']}: total {rec['total_wall_s']} s, steps {s['count']}, median step {s['median_s']} s, "
            f"contention {rec['runq_wait_s']['train_call_fraction_of_wall']}"
        )
        return 0
    sys.stderr.write(
        "usage: python -m collectors.ludwig_child data WORK [SIZES_JSON] | run SPEC.json OUT.json | "
        "callback CONFIG.yaml DATASET OUT_DIR\n"
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
