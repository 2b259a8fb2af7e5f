"""Ludwig trainer and backend sections -> native training / hardware keys (shared by ECD and LLM).

Ludwig defaults relied on (ludwig/schema/trainer.py): epochs 100 (train_steps overrides epochs),
batch_size "auto" (Ludwig's tuner: `tuned_batch`, stated as an assumption the total-time interval
widens for), gradient_accumulation_steps "auto" (1), optimizer adam, early_stop 5, random split
0.7/0.1/0.2 with the training share rounded up; validation and test are evaluated once per epoch
(or checkpoints_per_epoch / steps_per_checkpoint times). Steps are Ludwig's batches (totals.py). Backends: local = one GPU; ray / horovod /
deepspeed with their strategy (DeepSpeed ZeRO stage 3 by default).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from perfmodel.analytic.conventions import LUDWIG_TUNER_MAX_CPU_BATCH
from perfmodel.analytic.totals import BATCH_TUNED_AT_RUN_TIME, EARLY_STOP_PHRASE
from perfmodel.config.dataset_size import DatasetStats
from perfmodel.config.ludwig_features import LudwigConfig, section
from perfmodel.config.native import DataFlags, Draft
from perfmodel.errors import ConfigError, UnsupportedError, quote

EPOCHS = 100
EARLY_STOP = 5
"""Ludwig's trainer.early_stop default: stop after 5 evaluations without improvement (-1: never)."""
_OPTIMIZERS = {
    "adam": "adam",
    "adamw": "adamw",
    "sgd": "sgd",
    "lbfgs": "lbfgs",
    "adafactor": "adafactor",
    "lion": "lion",
    "adamax": "adam",
    "nadam": "adam",
    "rmsprop": "sgd_momentum",
    "adagrad": "sgd_momentum",
    "adadelta": "adam",
    "ftrl": "sgd_momentum",
}


def dataset_rows(data: DataFlags, stats: DatasetStats | None) -> int | None:
    if data.rows is not None:
        return int(data.rows)
    return stats.rows if stats is not None else None


def train_rows_of(config: LudwigConfig, rows: int | None) -> int | None:
    """Ludwig's training rows: ceil(train fraction x rows x sample_ratio) (ludwig/data/split.py:
    _split_divisions_with_min_rows rounds the training share up)."""
    if rows is None:
        return None
    split = config.split
    return math.ceil(split.train_fraction * round(rows * split.sample_ratio) - 1e-9)


def tuned_batch(trainer: Mapping[str, Any], train_rows: int | None) -> int:
    """The largest batch size Ludwig's tuner may choose on a CPU: powers of two from 1, at most
    MAX_CPU_BATCH_SIZE (128), max_batch_size and 0.2 x training rows
    (ludwig/utils/batch_size_tuner.py: BatchSizeEvaluator.select_best_batch_size)."""
    cap = LUDWIG_TUNER_MAX_CPU_BATCH
    if isinstance(trainer.get("max_batch_size"), int) and trainer["max_batch_size"] > 0:
        cap = min(cap, int(trainer["max_batch_size"]))
    if train_rows is not None:
        cap = min(cap, max(1, int(0.2 * train_rows)))
    return 1 << (max(cap, 1).bit_length() - 1)


def map_trainer(
    config: LudwigConfig,
    draft: Draft,
    *,
    batch: int | str,
    why: str,
    train_rows: int | None = None,
) -> tuple[int, str]:
    """batch size, accumulation, optimizer, checkpointing; returns (micro batch, optimizer).
    `batch`: Ludwig's default ('auto': its tuner; or a number). A Ludwig step is one batch, so the
    workload keeps grad_accum_steps 1 and the accumulation is stated (optimizer steps vs batches)."""
    trainer, tpath = config.trainer, config.trainer_path
    bs = trainer.get("batch_size", batch)
    if isinstance(bs, int) and not isinstance(bs, bool):
        if "batch_size" in trainer:
            draft.set("training.micro_batch_size", bs)
        else:
            draft.default(
                "training.micro_batch_size",
                bs,
                f"{tpath}.batch_size not given: Ludwig's default {bs} ({why})",
            )
        batch = bs
    else:
        batch = tuned_batch(trainer, train_rows)
        state = "is auto" if "batch_size" in trainer else "not given (Ludwig's default auto)"
        draft.default(
            "training.micro_batch_size",
            batch,
            f"{tpath}.batch_size {state}: {BATCH_TUNED_AT_RUN_TIME} (from 1, doubling while its 5-step throughput "
            f"grows, at most {LUDWIG_TUNER_MAX_CPU_BATCH} on a CPU and 0.2 x training rows): assumed {batch}, the "
            f"largest it may reach; on a CPU it often stops early on noise (batch size 1 in 5 of 6 real runs of a "
            f"small tabular model), which the total-time interval covers. For a predictable run set "
            f"{tpath}.batch_size in the config, or --set training.micro_batch_size=N",
        )
    ga = trainer.get("gradient_accumulation_steps")
    if isinstance(ga, int) and not isinstance(ga, bool):
        draft.set("training.grad_accum_steps", ga)
    else:
        draft.default(
            "training.grad_accum_steps",
            1,
            f"{tpath}.gradient_accumulation_steps "
            f"{'auto' if ga == 'auto' else 'not given (auto)'}: 1 (what Ludwig's auto gives without an "
            f"effective_batch_size)",
        )
    opt = trainer.get("optimizer")
    spec = opt if isinstance(opt, dict) else ({"type": opt} if opt else {})
    raw = str(spec.get("type") or "adam").lower()
    name = re.sub(r"^paged_|_(8|32)bit$", "", raw)
    mapped = _OPTIMIZERS.get(name)
    if mapped is None:
        raise UnsupportedError(
            f"{tpath}.optimizer.type {raw} is not supported; supported: {', '.join(_OPTIMIZERS)}"
        )
    if mapped == "sgd" and spec.get("momentum"):
        mapped = "sgd_momentum"
    if "type" in spec:
        draft.set("training.optimizer", mapped)
        if mapped != name or raw != name:
            draft.note(f"{tpath}.optimizer {raw} counted as {mapped} (same optimizer-state size class)")
    else:
        draft.default("training.optimizer", "adam", "")
    if isinstance(trainer.get("enable_gradient_checkpointing"), bool):
        draft.set("training.activation_checkpointing", trainer["enable_gradient_checkpointing"])
    else:
        draft.default("training.activation_checkpointing", False, "")
    clipping = trainer.get("gradient_clipping")
    if isinstance(clipping, dict) and "clipglobalnorm" in clipping:  # Ludwig's default: clipglobalnorm 0.5
        draft.set("training.gradient_clipping", any(clipping.get(k) for k in ("clipglobalnorm", "clipnorm")))
    return batch, mapped


def map_amount(
    config: LudwigConfig,
    draft: Draft,
    data: DataFlags,
    rows: int | None,
    *,
    tokens_ok: bool,
    iters: int = 1,
) -> int | None:
    """training.tokens / steps / samples+epochs; returns the training rows (or None)."""
    trainer, tpath = config.trainer, config.trainer_path
    train, ratio, how = config.split.train_fraction, config.split.sample_ratio, config.split.how
    train_rows = train_rows_of(config, rows)
    if data.tokens is not None:
        if not tokens_ok:
            raise ConfigError(
                "--tokens applies to token models; this Ludwig config trains a non-token model: pass --rows N or --dataset FILE"
            )
        draft.set("training.tokens", float(data.tokens))
        draft.note(
            f"--tokens {data.tokens:g}: the total over all epochs ({tpath}.epochs and train_steps not applied)"
        )
        return train_rows
    steps = trainer.get("train_steps")
    if steps:
        draft.set("training.steps", int(steps) * iters)
        if "epochs" in trainer:
            draft.note(f"{tpath}.train_steps {steps} overrides {tpath}.epochs (as in Ludwig)")
        return train_rows
    if train_rows is None:
        return None
    if train_rows < 1:
        raise ConfigError(f"{rows} dataset rows leave no training rows after the split ({how})")
    sampled = f" x sample_ratio {ratio:g}" if ratio != 1 else ""
    draft.set("training.samples", train_rows)
    draft.note(
        f"training samples per epoch: ceil({rows:,} rows{sampled} x {train:g}) ({how}; Ludwig rounds the "
        f"training share up) = {train_rows:,}; steps per epoch = ceil(training rows / batch size)"
    )
    epochs = trainer.get("epochs")
    if epochs is not None:
        draft.set("training.epochs", float(epochs) * iters)
    else:
        draft.default(
            "training.epochs",
            float(EPOCHS * iters),
            f"{tpath}.epochs not given: Ludwig's default {EPOCHS} "
            f"(an upper bound: early stopping usually ends training sooner)",
        )
    return train_rows


def note_early_stop(
    config: LudwigConfig,
    draft: Draft,
    *,
    batch: int,
    train_rows: float | None,
) -> None:
    """State Ludwig's early stopping: after `early_stop` evaluations without improvement of the
    validation metric it stops (ludwig/trainers/trainer.py: Trainer.check_progress_on_validation),
    so the earliest stop is after early_stop + 1 evaluations; the total-time interval's low end."""
    trainer, tpath = config.trainer, config.trainer_path
    early = trainer.get("early_stop", EARLY_STOP)
    if (
        trainer.get("train_steps")
        or trainer.get("skip_all_evaluation")
        or not isinstance(early, int)
        or early < 0
    ):
        return
    per_epoch = _evals_per_epoch(trainer, train_rows, batch)
    earliest = (early + 1) / per_epoch
    epochs = float(trainer.get("epochs") or EPOCHS)
    if earliest >= epochs:
        return
    given = (
        f"{tpath}.early_stop {early}"
        if "early_stop" in trainer
        else f"{tpath}.early_stop not given: Ludwig's default {early}"
    )
    draft.note(
        f"{given}: Ludwig stops after {early} evaluations without improvement; {EARLY_STOP_PHRASE} "
        f"{earliest:g} epochs ({early + 1} evaluations, {per_epoch:g} per epoch): the total-time interval's low end"
    )


def _evals_per_epoch(trainer: Mapping[str, Any], train_rows: float | None, batch: int) -> float:
    """Evaluations per epoch: steps_per_checkpoint, else checkpoints_per_epoch, else one
    (ludwig/utils/trainer_utils.py: get_final_steps_per_checkpoint; capped at one per step)."""
    spc = trainer.get("steps_per_checkpoint")
    if spc and train_rows:
        steps_per_epoch = math.ceil(train_rows / batch)
        return max(1.0, steps_per_epoch / min(float(spc), steps_per_epoch))
    return float(trainer.get("checkpoints_per_epoch") or 1)


def map_eval(
    config: LudwigConfig,
    draft: Draft,
    *,
    cost_ratio: float,
    train_rows: float | None,
    batch: int,
) -> None:
    """training.eval_fraction: Ludwig evaluates validation and test (forward only) at each checkpoint."""
    trainer = config.trainer
    if trainer.get("skip_all_evaluation"):
        draft.set("training.eval_fraction", 0.0)
        return
    train = config.split.train_fraction
    evals = _evals_per_epoch(trainer, train_rows, batch)
    rows_ratio = (1 - train) / train + (1.0 if trainer.get("evaluate_training_set") else 0.0)
    fraction = round(evals * rows_ratio * cost_ratio, 3)
    what = "validation and test splits" + (
        " and the training set" if trainer.get("evaluate_training_set") else ""
    )
    draft.default(
        "training.eval_fraction",
        fraction,
        f"evaluation: Ludwig runs the {what} through the model "
        f"{evals:g}x per epoch (forward only): training.eval_fraction={fraction:g}",
    )


def map_backend(config: LudwigConfig, draft: Draft) -> None:
    """backend -> hardware.num_gpus / gpu / strategy / cpu_offload (and framework deepspeed)."""
    b = config.backend
    if b is None:
        draft.default("hardware.num_gpus", 1, "")
        return
    spec = {"type": b} if isinstance(b, str) else b
    if not isinstance(spec, dict):
        raise ConfigError(f"backend must be a mapping or a backend type, got {quote(b)}")
    kind = str(spec.get("type", "local")).lower()
    if kind == "local":
        draft.default("hardware.num_gpus", 1, "")
        return
    if kind not in ("ray", "horovod", "deepspeed"):
        raise ConfigError(f"backend.type must be one of local, ray, horovod, deepspeed; got {quote(kind)}")
    trainer = section(spec, "trainer", "backend.trainer") if kind == "ray" else {}
    if trainer.get("num_workers"):
        draft.set("hardware.num_gpus", int(trainer["num_workers"]))
    else:
        who = "Ray uses every GPU of the cluster" if kind == "ray" else "the launcher decides"
        draft.default(
            "hardware.num_gpus",
            1,
            f"backend {kind}: GPU count not in the config ({who}): assumed 1; pass --num-gpus N",
        )
    if trainer.get("use_gpu") is False:
        draft.set("hardware.gpu", "cpu")
    strategy = (
        trainer.get("strategy")
        if kind == "ray"
        else ({**spec, "type": "deepspeed"} if kind == "deepspeed" else "horovod")
    )
    if strategy is not None:
        _strategy(strategy, draft, "backend.trainer.strategy" if kind == "ray" else "backend")


def _strategy(strategy: Any, draft: Draft, path: str) -> None:
    spec = {"type": strategy} if isinstance(strategy, str) else strategy
    if not isinstance(spec, dict):
        raise ConfigError(f"{path} must be a strategy name or a mapping, got {quote(strategy)}")
    kind = str(spec.get("type", "ddp")).lower()
    if kind in ("ddp", "horovod", "fsdp"):
        draft.set("hardware.strategy", "fsdp" if kind == "fsdp" else "ddp")
        return
    if kind != "deepspeed":
        raise ConfigError(f"{path} type must be one of ddp, fsdp, horovod, deepspeed; got {quote(kind)}")
    draft.native["framework"] = "deepspeed"
    zero = section(spec, "zero_optimization", f"{path}.zero_optimization")
    stages = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
    if zero.get("stage") is not None:
        if zero["stage"] not in stages:
            raise ConfigError(
                f"{path}.zero_optimization.stage must be 0, 1, 2 or 3; got {quote(zero['stage'])}"
            )
        draft.set("hardware.strategy", stages[zero["stage"]])
    else:
        draft.default(
            "hardware.strategy",
            "zero3",
            f"{path}.zero_optimization.stage not given: assumed ZeRO stage 3 (Ludwig's DeepSpeed default)",
        )
    for key in ("offload_optimizer", "offload_param"):
        device = section(zero, key, f"{path}.zero_optimization.{key}").get("device")
        if device and str(device).lower() != "none":
            draft.set("hardware.cpu_offload", True)
