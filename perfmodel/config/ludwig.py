"""Ludwig configs -> a native Draft (explicit values + Ludwig's defaults as soft defaults).

A config is Ludwig's when it has any of DETECT_KEYS. A config Ludwig 0.17 rejects is refused
with Ludwig's reason (ludwig_schema.py), except `model_type: gbm` (removed after Ludwig 0.10:
predicted with a warning). `model_type` (default ecd) picks the path: `llm` (base_model + adapter
/ quantization), `ecd` (ludwig_ecd.py) or `gbm` (LightGBM). The legacy `training:` section is read
as `trainer:`. The workload's framework is `ludwig` (its measured start-up and per-batch work, and
Ludwig's step counting: perfmodel/analytic/totals.py), `deepspeed` under a DeepSpeed backend.

Ludwig's defaults come from ludwig_defaults.py (the table pinned to Ludwig 0.17.10, or the installed
Ludwig's resolved config); what Ludwig learns from the data from ludwig_data.py (`--dataset`).
Relied on here: ECD batch_size "auto" (tuned at run time: the largest size the tuner may reach,
with the interval covering batch size 1; ludwig_trainer.py), LLM fine-tuning batch_size 1,
use_mixed_precision false (ECD trains in fp32), num_boost_round 1000, LoRA r 8, quantization bits
4 computing in float16. An unquantized LLM is loaded without a dtype; perfmodel assumes the
checkpoint's bf16.

Hardware: a Ludwig config never names it, so perfmodel assumes an A100-80GB for ECD and LLM models
(and this machine's CPU for GBM, which LightGBM trains on the CPU) and says so; --gpu / --num-gpus /
--set hardware.gpu=NAME choose another. Data: Ludwig configs do not say how much data there is;
--rows (dataset rows before the split), --dataset or --tokens must (unless trainer.train_steps).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from perfmodel.config.dataset_size import measure_dataset
from perfmodel.config.ludwig_data import hf_token_counts, local_tokenizer, measure_ludwig_data
from perfmodel.config.ludwig_ecd import ludwig_columns, map_ecd
from perfmodel.config.ludwig_features import DETECT_KEYS, LudwigConfig, apply_adapter, read_ludwig
from perfmodel.config.ludwig_schema import gbm_warning
from perfmodel.config.ludwig_trainer import (
    dataset_rows,
    map_amount,
    map_backend,
    map_eval,
    map_trainer,
    note_early_stop,
    train_rows_of,
)
from perfmodel.config.native import DataFlags, Draft
from perfmodel.errors import ConfigError, UnsupportedError, quote

DEFAULT_GPU = "A100-80GB"
ECD_BATCH, LLM_BATCH, BOOST_ROUNDS, LLM_SEQ_LEN = 128, 1, 1000, 512
MISSING_AMOUNT = (
    "the dataset size is required for a Ludwig config: pass --rows N (dataset rows, before Ludwig's "
    "train/validation/test split), --dataset FILE or --tokens N (or set trainer.train_steps)"
)
KEYS_READ: dict[str, str] = {
    "model_type": "ecd (default), llm or gbm: which translation applies",
    "base_model": "model.name (llm): catalog name, Hugging Face id or a path relative to the config's folder",
    "is_multimodal": "true is refused (vision-language fine-tuning is not modelled)",
    "adapter.type / adapter.r / adapter.target_modules": "training.lora_r (default 8) and training.lora_target_modules",
    "quantization.bits / quantization.bnb_4bit_compute_dtype": "training.quantization_bits (default 4) and training.precision (default fp16)",
    "input_features / output_features (name, type, column, encoder, preprocessing)": "the model (ECD encoders; LLM text columns) and the columns a --dataset is read from",
    "input_features[].encoder (type, pretrained_model_name_or_path, trainable, adapter, layer sizes)": "the carrying pretrained model (relative paths from the config's folder) or the estimated layers",
    "defaults.<type>.encoder / defaults.<type>.preprocessing": "encoder and preprocessing defaults per feature type",
    "preprocessing.global_max_sequence_length / max_sequence_length": "training.seq_len (an upper bound)",
    "preprocessing.split.probabilities / split_probabilities / sample_ratio": "the training share of --rows (default 0.7)",
    "prompt.template": "text columns and template tokens counted per row (llm with --dataset)",
    "trainer.type": "finetune (llm; none and preference trainers are refused)",
    "trainer.batch_size / max_batch_size": "training.micro_batch_size (ECD auto: the largest size Ludwig's tuner may reach, "
    "<= 128 and 0.2 x training rows; LLM default 1)",
    "trainer.gradient_accumulation_steps": "training.grad_accum_steps (default auto = 1); steps stay batches, as Ludwig counts them",
    "trainer.epochs / train_steps": "training.epochs (default 100) / training.steps",
    "trainer.optimizer.type / momentum / max_iter": "training.optimizer (same state-size class); lbfgs max_iter passes per step",
    "trainer.use_mixed_precision": "training.precision amp_fp16 (else fp32 for ECD)",
    "trainer.enable_gradient_checkpointing": "training.activation_checkpointing",
    "trainer.checkpoints_per_epoch / steps_per_checkpoint / evaluate_training_set / skip_all_evaluation": "training.eval_fraction",
    "trainer.num_boost_round": "training.gbm_rounds (gbm; default 1000)",
    "training": "legacy name of trainer",
    "combiner.type": "concat, tabnet or ft_transformer (estimated models); none given: Ludwig's default (ft_transformer "
    "with >= 3 input features, else concat)",
    "trainer.early_stop": "the total-time interval's low end (Ludwig stops after early_stop evaluations without "
    "improvement; default 5, -1 never)",
    "input_features[].preprocessing.tokenizer / most_common": "text vocabulary and padded length from --dataset (Ludwig's "
    "own tokenizers); category vocabularies likewise",
    "backend.type": "local (1 GPU), ray, horovod or deepspeed",
    "backend.trainer.num_workers / use_gpu / strategy": "hardware.num_gpus, hardware.gpu cpu, hardware.strategy",
    "backend(.trainer.strategy).zero_optimization.stage / offload_optimizer / offload_param": "hardware.strategy zero1-3 (default zero3) and hardware.cpu_offload",
}
"""Every Ludwig key perfmodel reads, and what it becomes (docs/config.md lists them)."""
_DTYPES = {
    "float16": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float32": "fp32",
    "fp32": "fp32",
}


def is_ludwig(cfg: dict[str, Any]) -> bool:
    return any(k in cfg for k in DETECT_KEYS)


def translate_ludwig(cfg: dict[str, Any], *, data: DataFlags, base_dir: Path | None = None) -> Draft:
    """The native Draft of a Ludwig config; --tokens/--rows/--dataset are consumed here. Model
    names that are paths (a Hugging Face config.json or its folder) are relative to `base_dir`.
    The raw dict is read and checked once (read_ludwig); everything below reads the record."""
    config = read_ludwig(cfg)
    draft = Draft(missing_amount=MISSING_AMOUNT)
    if config.model_type == "gbm":
        draft.note(gbm_warning())
        _gbm(config, draft, data)
        return draft
    draft.default(
        "hardware.gpu",
        DEFAULT_GPU,
        f"hardware.gpu not given (Ludwig configs never name hardware): assumed "
        f"{DEFAULT_GPU}; pass --gpu NAME (`perfmodel gpus` lists them)",
    )
    draft.default(
        "framework",
        "ludwig",
        "framework: ludwig (Ludwig's trainer around eager PyTorch: its measured "
        "start-up, per-batch work and step counting apply)",
    )
    draft.base_dir = base_dir  # model names that are paths are read relative to it (native.resolve_model)
    map_backend(config, draft)
    if config.model_type == "llm":
        _llm(config, draft, data)
    else:
        _ecd(config, draft, data)
    return draft


# --- model types -------------------------------------------------------------------------------


def _llm(config: LudwigConfig, draft: Draft, data: DataFlags) -> None:
    trainer, tpath, base = config.trainer, config.trainer_path, config.base_model
    if not base:
        raise ConfigError("base_model is required for model_type: llm (a catalog name or Hugging Face id)")
    if config.is_multimodal:
        raise UnsupportedError(
            "is_multimodal: vision-language fine-tuning is not supported (image tokens are not "
            "modelled); perfmodel supports text-only model_type: llm"
        )
    if "type" not in trainer:
        raise ConfigError(
            f"{tpath}.type not given: Ludwig's default for model_type llm is none, zero-shot inference: "
            f"nothing to train (set {tpath}.type: finetune)"
        )
    kind = str(trainer["type"]).lower()
    if kind == "none":
        raise ConfigError(
            f"{tpath}.type none means zero-shot inference: nothing to train (perfmodel predicts training; "
            f"use {tpath}.type: finetune)"
        )
    if kind != "finetune":
        raise UnsupportedError(
            f"{tpath}.type {kind} is not supported: perfmodel models supervised fine-tuning "
            f"({tpath}.type: finetune); preference and RL trainers run extra forward passes it does not model"
        )
    draft.set("model.name", base)
    lora = apply_adapter(draft, config.adapter, "adapter")
    quant = config.quantization
    if quant:
        q = quant if isinstance(quant, dict) else {}
        if q.get("bits") is not None:
            draft.set("training.quantization_bits", q["bits"])
        else:
            draft.default("training.quantization_bits", 4, "quantization.bits not given: Ludwig's default 4")
        dtype = q.get("bnb_4bit_compute_dtype") or q.get("compute_dtype")
        if dtype is not None:
            if str(dtype).lower() not in _DTYPES:
                raise ConfigError(
                    f"quantization compute dtype must be one of float16, bfloat16, float32; got {quote(dtype)}"
                )
            draft.set("training.precision", _DTYPES[str(dtype).lower()])
        else:
            draft.default(
                "training.precision",
                "fp16",
                "quantization: Ludwig computes in float16 (bnb_4bit_compute_dtype default): training.precision assumed fp16",
            )
    elif trainer.get("use_mixed_precision"):
        draft.set("training.precision", "amp_fp16")
    else:
        draft.default(
            "training.precision",
            "bf16",
            "training.precision: Ludwig loads an unquantized base model without a "
            "dtype; assumed the checkpoint's bf16 (older transformers load fp32: --set training.precision=fp32)",
        )
    inputs, outputs = config.inputs, config.outputs
    cap = config.preprocessing.get("global_max_sequence_length")
    in_cap, out_cap = (
        inputs[0].preprocessing.get("max_sequence_length"),
        outputs[0].preprocessing.get("max_sequence_length"),
    )
    if not cap and in_cap and out_cap:
        cap = int(in_cap) + int(out_cap)
    stats = None
    rows = data.rows
    if data.dataset is not None:
        template = config.prompt_template
        names = [n for n in re.findall(r"\{(\w+)\}", template) if not n.startswith("__")]
        cols = names if names and "{__sample__}" not in template else [f.column for f in inputs]
        cols += [f.column for f in outputs if f.type_given == "text"]
        extra = len(re.sub(r"\{[^{}]*\}", "", template)) / 4 + 2  # template text, BOS and EOS
        stats = measure_dataset(
            data.dataset,
            text_columns=cols,
            tokens_cap=cap,
            extra_tokens_per_row=extra,
            column_origin="input_features / output_features / prompt.template",
        )
        rows = stats.rows
    train_rows = train_rows_of(config, rows)
    batch, _ = map_trainer(
        config,
        draft,
        batch=config.defaults.trainer("llm").get("batch_size", LLM_BATCH),
        why="Ludwig's default for LLM fine-tuning",
        train_rows=train_rows,
    )
    if stats is not None:
        level = batch / (batch + 1)
        tok = local_tokenizer(base, draft.base_dir)
        if tok is not None and not template:
            counts = hf_token_counts(stats.path, tok, cols)
            per_row = sorted(sum(c) for c in zip(*counts, strict=True))
            seq = max(1, per_row[min(len(per_row) - 1, int(level * len(per_row)))] if per_row else 1)
            how = (
                f"tokens per row by the base model's own tokenizer ({', '.join(cols)}: "
                + ", ".join(f"{sum(c) / max(len(c), 1):.1f}" for c in counts)
                + " on average)"
            )
        else:
            draft.note(stats.describe())
            seq = max(1, math.ceil(stats.row_tokens_quantile(level)))
            how = "tokens per row (characters / 4: the base model's tokenizer is not on disk)"
        seq = min(seq, int(cap)) if cap else seq
        draft.set("training.seq_len", seq)
        draft.note(
            f"sequence length {seq}: the {level:.0%} quantile of {how} (Ludwig pads each batch of {batch} "
            f"to its longest sample){f', capped at {cap}' if cap else ''}"
        )
    elif cap:
        draft.set("training.seq_len", int(cap))
        draft.note(
            f"sequence length {cap} from the config's maximum (an upper bound: Ludwig pads each batch to its "
            f"longest sample; pass --dataset to estimate it)"
        )
    else:
        draft.default(
            "training.seq_len",
            LLM_SEQ_LEN,
            f"sequence length not given (Ludwig takes it from the data): assumed "
            f"{LLM_SEQ_LEN} tokens; pass --dataset FILE or --set training.seq_len=N",
        )
    amount_rows = map_amount(config, draft, data, dataset_rows(data, stats), tokens_ok=True)
    # evaluation generates the output: 0.67-0.73 x a training row's time measured (tiny Llama, LoRA)
    map_eval(config, draft, cost_ratio=0.7 if lora else 1 / 3, train_rows=amount_rows, batch=batch)
    note_early_stop(config, draft, batch=batch, train_rows=amount_rows)


def _ecd(config: LudwigConfig, draft: Draft, data: DataFlags) -> None:
    trainer, tpath = config.trainer, config.trainer_path
    stats = ldata = None
    if data.dataset is not None:
        cols = [f.column for f in config.inputs if f.type in ("text", "sequence")]
        stats = measure_dataset(data.dataset, text_columns=cols, column_origin="input_features")
        draft.note(f"dataset {stats.path.name}: {stats.rows:,} rows")
        cats, texts = ludwig_columns(config)
        if cats or texts:
            ldata = measure_ludwig_data(data.dataset, categories=cats, texts=texts)
    cand = map_ecd(config, draft, stats, data.dataset, ldata)
    draft.native["model"] = cand.model
    if cand.seq_len is not None:
        if cand.seq_is_default:
            draft.default("training.seq_len", cand.seq_len, cand.seq_line or "")
        else:
            draft.set("training.seq_len", cand.seq_len)
            if cand.seq_line:
                draft.note(cand.seq_line)
    lora = apply_adapter(draft, cand.adapter, f"{cand.label}: adapter")
    frozen = not cand.trainable and not lora
    if frozen:
        if cand.trainable_line:
            draft.default("training.trainable_fraction", 0.0, cand.trainable_line)
        else:
            draft.set("training.trainable_fraction", 0.0)
    if cand.checkpointing is not None:
        draft.set("training.activation_checkpointing", cand.checkpointing)
    if trainer.get("use_mixed_precision"):
        draft.set("training.precision", "amp_fp16")
    else:
        draft.default(
            "training.precision",
            "fp32",
            f"{tpath}.use_mixed_precision not set: Ludwig trains ECD models in fp32",
        )
    train_rows = train_rows_of(config, dataset_rows(data, stats))
    batch, optimizer = map_trainer(
        config,
        draft,
        batch=config.defaults.trainer("ecd").get("batch_size", "auto"),
        why="Ludwig's default",
        train_rows=train_rows,
    )
    iters = 1
    if optimizer == "lbfgs":
        opt = trainer.get("optimizer")
        iters = int(opt.get("max_iter") or 20) if isinstance(opt, dict) else 20
        draft.note(
            f"{tpath}.optimizer lbfgs: each step runs up to max_iter={iters} forward/backward passes; counted as {iters} steps"
        )
    train_rows = map_amount(
        config,
        draft,
        data,
        dataset_rows(data, stats),
        tokens_ok=cand.seq_len is not None,
        iters=iters,
    )
    images = any(f.type == "image" for f in config.inputs)  # lazy decoding per batch: eval ~ a training row (0.95)
    ratio = 1.0 if frozen or images else (0.5 if lora else 1 / 3)
    map_eval(config, draft, cost_ratio=ratio, train_rows=train_rows, batch=batch)
    note_early_stop(config, draft, batch=batch, train_rows=train_rows)


def _gbm(config: LudwigConfig, draft: Draft, data: DataFlags) -> None:
    trainer, tpath = config.trainer, config.trainer_path
    draft.native["model"] = {
        "name": "lightgbm",
        "family": "lightgbm",
        "arch": "gbm",
        "source": "Ludwig model_type: gbm (LightGBM)",
    }
    draft.native["framework"] = "lightgbm"
    draft.set("training.gbm_features", len(config.inputs))
    if trainer.get("num_boost_round") is not None:
        draft.set("training.gbm_rounds", trainer["num_boost_round"])
    else:
        draft.default(
            "training.gbm_rounds",
            BOOST_ROUNDS,
            f"{tpath}.num_boost_round not given: Ludwig's default {BOOST_ROUNDS}",
        )
    draft.default(
        "hardware.gpu",
        "cpu",
        "hardware.gpu not given: Ludwig trains GBM models with LightGBM on the CPU: "
        "assumed cpu (this machine's CPU; pass --gpu to choose another)",
    )
    draft.default("hardware.num_gpus", 1, "")
    if data.tokens is not None:
        raise ConfigError("--tokens does not apply to a gbm model: pass --rows N or --dataset FILE")
    rows = data.rows
    if data.dataset is not None:
        rows = measure_dataset(data.dataset).rows
        draft.note(f"dataset {Path(data.dataset).name}: {rows:,} rows")
    if rows is not None:
        train, ratio, how = config.split.train_fraction, config.split.sample_ratio, config.split.how
        draft.set("training.gbm_rows", max(1, round(rows * ratio * train)))
        draft.note(f"training rows: {rows:,} x {train:g} ({how}) = {max(1, round(rows * ratio * train)):,}")
