"""Hugging Face `TrainingArguments` (and TRL `SFTConfig`) keys in a native `training` section.

A key that maps one-to-one onto a native key is read as that key, and the mapping is listed in
the assumptions. `bf16: true` is Hugging Face's *mixed* precision (fp32 master weights, bf16
autocast), so it becomes `amp_bf16`, not the native `bf16` (pure bf16 weights and optimizer
state). A Hugging Face key without a one-to-one native meaning is refused naming the native key
to use; hyperparameters that change neither speed nor memory (learning rate, seeds, logging) are
accepted and ignored, and say so.
"""

from __future__ import annotations

from typing import Any

from perfmodel.errors import quote

RENAMES = {
    "per_device_train_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "grad_accum_steps",
    "num_train_epochs": "epochs",
    "max_steps": "steps",
    "gradient_checkpointing": "activation_checkpointing",
    "max_seq_length": "seq_len",
}
"""Hugging Face key -> native training key, read as is."""

PRECISION_FLAGS = ("bf16", "fp16", "tf32")
"""Hugging Face precision switches, read into training.precision."""

OPTIMIZERS = {
    "adamw_torch": ("adamw", "fp32"),
    "adamw_torch_fused": ("adamw", "fp32"),
    "adamw_hf": ("adamw", "fp32"),
    "adamw_apex_fused": ("adamw", "fp32"),
    "adamw_torch_xla": ("adamw", "fp32"),
    "adamw_torch_npu_fused": ("adamw", "fp32"),
    "adamw_bnb_8bit": ("adamw", "8bit"),
    "adamw_8bit": ("adamw", "8bit"),
    "adamw_torch_8bit": ("adamw", "8bit"),
    "paged_adamw_8bit": ("adamw", "paged-8bit"),
    "paged_adamw_32bit": ("adamw", "paged-fp32"),
    "paged_adamw": ("adamw", "paged-fp32"),
    "adafactor": ("adafactor", "fp32"),
    "sgd": ("sgd", "fp32"),
    "lion_32bit": ("lion", "fp32"),
    "lion_8bit": ("lion", "8bit"),
    "paged_lion_32bit": ("lion", "paged-fp32"),
    "paged_lion_8bit": ("lion", "paged-8bit"),
}
"""Hugging Face `optim` values (transformers/training_args.py OptimizerNames) -> native
(training.optimizer, training.optimizer_state): bitsandbytes' 8-bit states (adamw_bnb_8bit,
adamw_8bit) and torchao's AdamW8bit (adamw_torch_8bit) are block-wise 8-bit; the paged ones live
in CUDA managed memory (bitsandbytes PagedAdamW / PagedAdamW8bit / PagedLion)."""

REFUSED = {
    "deepspeed": "hardware.strategy (zero1, zero2 or zero3) with framework: deepspeed",
    "fsdp": "hardware.strategy: fsdp",
    "per_device_eval_batch_size": "training.eval_fraction (evaluation time as a fraction of training compute)",
    "eval_steps": "training.eval_fraction (evaluation time as a fraction of training compute)",
    "eval_strategy": "training.eval_fraction (evaluation time as a fraction of training compute)",
    "evaluation_strategy": "training.eval_fraction (evaluation time as a fraction of training compute)",
    "auto_find_batch_size": "training.micro_batch_size (the batch size that fits: `perfmodel predict` says whether it does)",
    "half_precision_backend": "training.precision",
    "fp16_opt_level": "training.precision",
    "bf16_full_eval": "training.precision",
    "fp16_full_eval": "training.precision",
    "torch_compile_backend": "training.torch_compile",
    "torch_compile_mode": "training.torch_compile",
}
"""Hugging Face keys with no one-to-one native key -> the native key to use instead."""

IGNORED = (
    "learning_rate",
    "weight_decay",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "max_grad_norm",
    "warmup_steps",
    "warmup_ratio",
    "lr_scheduler_type",
    "seed",
    "data_seed",
    "logging_steps",
    "logging_strategy",
    "logging_dir",
    "save_steps",
    "save_strategy",
    "save_total_limit",
    "output_dir",
    "overwrite_output_dir",
    "report_to",
    "run_name",
    "push_to_hub",
)
"""Hugging Face hyperparameters that change neither step time nor memory: accepted, ignored."""

KEYS = (*RENAMES, *PRECISION_FLAGS, "optim", *REFUSED, *IGNORED)
"""Every Hugging Face key the training section accepts (mapped, refused with a hint, or ignored)."""


def native_alternates(native_key: str) -> tuple[str, ...]:
    """Hugging Face keys that set the same thing as the native training key (a --set of the
    native key replaces them)."""
    if native_key == "precision":
        return PRECISION_FLAGS
    if native_key == "optimizer":
        return ("optim",)
    return tuple(hf for hf, native in RENAMES.items() if native == native_key)


def replaced_by(key: str) -> tuple[str, ...]:
    """Training keys (native or Hugging Face) that a --set of `key` replaces: the other spellings
    of the same setting, so that the flag beats the file whichever spelling each uses."""
    if key in PRECISION_FLAGS or key == "precision":
        return tuple(k for k in ("precision", *PRECISION_FLAGS) if k != key)
    if key in ("optim", "optimizer"):
        return ("optimizer",) if key == "optim" else ("optim",)
    if key in RENAMES:
        return (RENAMES[key],)
    return native_alternates(key)


def translate(training: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """(the section with Hugging Face keys replaced by native ones, assumption lines, problems).
    Values are passed on unchecked: the native key's type and range checks apply to them."""
    out = {k: v for k, v in training.items() if k not in KEYS}
    notes: list[str] = []
    problems: list[str] = []
    for hf in IGNORED:
        if hf in training:
            notes.append(
                f"training.{hf} (Hugging Face TrainingArguments) changes neither speed nor memory: ignored"
            )
    for hf, hint in REFUSED.items():
        if hf in training:
            problems.append(
                f"training.{hf} (Hugging Face TrainingArguments) has no one-to-one native key: use {hint}"
            )
    steps = training.get("max_steps")
    for hf, native in RENAMES.items():
        if hf not in training or training[hf] is None:
            continue
        value = training[hf]
        if (
            hf == "max_steps"
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and value < 0
        ):
            notes.append(f"training.max_steps {value:g} (Hugging Face: not set) ignored")
            continue
        if (
            hf == "num_train_epochs"
            and isinstance(steps, (int, float))
            and not isinstance(steps, bool)
            and steps > 0
        ):
            notes.append(
                "training.num_train_epochs not applied: training.max_steps overrides it (as in transformers)"
            )
            continue
        if native in training:
            problems.append(f"training.{hf} and training.{native} set the same thing: give one")
            continue
        out[native] = value
        notes.append(
            f"training.{hf} (Hugging Face TrainingArguments) read as training.{native} = {quote(value)}"
        )
    _precision(training, out, notes, problems)
    _optimizer(training, out, notes, problems)
    return out, notes, problems


def _precision(training: dict[str, Any], out: dict[str, Any], notes: list[str], problems: list[str]) -> None:
    given = {k: training[k] for k in PRECISION_FLAGS if training.get(k) is not None}
    if not given:
        return
    bad = [k for k, v in given.items() if not isinstance(v, bool)]
    if bad:
        problems.extend(f"training.{k} must be true or false, got {quote(given[k])}" for k in bad)
        return
    if "precision" in training:
        problems.append(f"training.{next(iter(given))} and training.precision set the same thing: give one")
        return
    if given.get("bf16") and given.get("fp16"):
        problems.append("training.bf16 and training.fp16 are both true: choose one")
        return
    flags = ", ".join(f"{k}: {str(v).lower()}" for k, v in given.items())
    if given.get("bf16") or given.get("fp16"):
        half = "bf16" if given.get("bf16") else "fp16"
        out["precision"] = f"amp_{half}"
        notes.append(
            f"training {flags} (Hugging Face TrainingArguments: {half} mixed precision, fp32 master weights) "
            f"read as training.precision = amp_{half} (the native {half} means pure {half} weights and optimizer state)"
        )
    elif given.get("tf32"):
        out["precision"] = "tf32"
        notes.append(f"training {flags} (Hugging Face TrainingArguments) read as training.precision = tf32")
    else:
        out["precision"] = "fp32"
        notes.append(
            f"training {flags} (Hugging Face TrainingArguments: fp32 unless bf16 or fp16 is true) "
            f"read as training.precision = fp32"
        )


def _optimizer(training: dict[str, Any], out: dict[str, Any], notes: list[str], problems: list[str]) -> None:
    if training.get("optim") is None:
        return
    raw = training["optim"]
    if "optimizer" in training:
        problems.append("training.optim and training.optimizer set the same thing: give one")
        return
    name = str(raw).strip().lower() if isinstance(raw, str) else ""
    mapped = OPTIMIZERS.get(name)
    if mapped is not None and "optimizer_state" in training:
        problems.append("training.optim and training.optimizer_state set the same thing: give one")
    elif mapped is not None:
        native, state = mapped
        out["optimizer"] = native
        out["optimizer_state"] = state
        notes.append(
            f"training.optim {name} (Hugging Face TrainingArguments) read as training.optimizer = {native}, "
            f"training.optimizer_state = {state}"
        )
    elif "4bit" in name:
        problems.append(
            f"training.optim {quote(raw)}: 4-bit optimizer state is not modelled; use training.optimizer_state: "
            f"8bit (an upper bound on its memory)"
        )
    else:
        problems.append(
            f"training.optim {quote(raw)} has no one-to-one native optimizer; accepted: "
            f"{', '.join(OPTIMIZERS)}; or use training.optimizer"
        )
