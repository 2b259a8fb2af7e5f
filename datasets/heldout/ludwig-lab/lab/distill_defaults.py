"""Distil Ludwig 0.17's resolved defaults into the table perfmodel needs: ludwig_defaults_0_17.json.

Run with the Ludwig venv:  .venv-ludwig/bin/python distill_defaults.py

Every value under "features", "combiner", "trainer" and "preprocessing" comes from Ludwig itself:
a minimal config per feature type is resolved with ModelConfig.from_dict (the validator
LudwigModel uses) and the resolved encoder / decoder / preprocessing is read back. The "rules"
section (batch-size tuner, step counting, splits) is read from Ludwig's source and cites
file:function; constants quoted there are read from the installed package at run time.
The full resolved configs of the probes are also written to defaults/probe_*.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SIZE_KEYS = (
    "type",
    "embedding_size",
    "output_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "transformer_output_size",
    "num_fc_layers",
    "fc_layers",
    "num_filters",
    "filter_size",
    "conv_layers",
    "num_conv_layers",
    "pool_function",
    "state_size",
    "cell_type",
    "bidirectional",
    "reduce_output",
    "max_sequence_length",
    "vocab_size",
    "representation",
    "embeddings_trainable",
    "pretrained_model_name_or_path",
    "use_pretrained",
    "trainable",
    "dropout",
    "norm",
    "activation",
    "bias_initializer",
    "num_channels",
    "height",
    "width",
)

PREPROC_KEYS = (
    "tokenizer",
    "max_sequence_length",
    "most_common",
    "lowercase",
    "vocab_file",
    "padding",
    "padding_symbol",
    "unknown_symbol",
    "ngram_size",
    "missing_value_strategy",
    "normalization",
    "height",
    "width",
    "num_channels",
    "resize_method",
    "infer_image_dimensions",
    "infer_image_max_height",
    "infer_image_max_width",
    "infer_image_sample_size",
    "in_memory",
    "num_processes",
    "datetime_format",
    "audio_file_length_limit_in_s",
    "type",
    "window_size_in_s",
    "num_filter_bands",
    "timeseries_length_limit",
    "cache_encoder_embeddings",
    "sequence_length",
    "fill_value",
    "mode",
    "prefetch_size",
)

INPUT_TYPES = ["binary", "number", "category", "set", "bag", "sequence", "text", "vector", "timeseries", "image",
               "audio", "date", "h3"]
OUTPUT_TYPES = ["binary", "number", "category", "set", "sequence", "text", "vector"]


def pick(d: dict, keys) -> dict:
    return {k: d[k] for k in keys if k in d}


def main() -> None:
    import ludwig
    from ludwig import constants
    from ludwig.schema.model_types.base import ModelConfig
    from ludwig.utils import batch_size_tuner

    Path("defaults").mkdir(exist_ok=True)
    out: dict = {
        "ludwig_version": ludwig.__version__,
        "how": "resolved with ludwig.schema.model_types.base.ModelConfig.from_dict (Ludwig's validator)",
        "features": {"input": {}, "output": {}},
    }

    for t in INPUT_TYPES:
        cfg = {"input_features": [{"name": "x", "type": t}], "output_features": [{"name": "y", "type": "binary"}]}
        if t == "vector":
            cfg["input_features"][0]["preprocessing"] = {"vector_size": 8}
        try:
            r = ModelConfig.from_dict(cfg).to_dict()
            f = r["input_features"][0]
            out["features"]["input"][t] = {
                "encoder": pick(f.get("encoder", {}), SIZE_KEYS),
                "preprocessing": pick(f.get("preprocessing", {}), PREPROC_KEYS),
            }
            Path(f"defaults/probe_input_{t}.json").write_text(json.dumps(r, indent=1, default=str))
        except Exception as e:  # noqa: BLE001
            out["features"]["input"][t] = {"error": f"{type(e).__name__}: {e}"[:500]}

    for t in OUTPUT_TYPES:
        cfg = {"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "y", "type": t}]}
        if t == "vector":
            cfg["output_features"][0]["preprocessing"] = {"vector_size": 8}
        if t in ("text", "sequence"):
            cfg["input_features"] = [{"name": "x", "type": "sequence"}]
        try:
            r = ModelConfig.from_dict(cfg).to_dict()
            f = r["output_features"][0]
            out["features"]["output"][t] = {
                "decoder": pick(f.get("decoder", {}), SIZE_KEYS + ("num_fc_layers", "fc_output_size")),
                "loss": f.get("loss", {}).get("type"),
                "preprocessing": pick(f.get("preprocessing", {}), PREPROC_KEYS),
            }
        except Exception as e:  # noqa: BLE001
            out["features"]["output"][t] = {"error": f"{type(e).__name__}: {e}"[:500]}

    # combiner: absent section with 1, 2, 3 inputs
    comb = {}
    for n in (1, 2, 3):
        cfg = {
            "input_features": [{"name": f"x{i}", "type": "number"} for i in range(n)],
            "output_features": [{"name": "y", "type": "binary"}],
        }
        r = ModelConfig.from_dict(cfg).to_dict()
        comb[f"{n}_inputs_no_combiner_section"] = r["combiner"]
    cfg_concat = {
        "input_features": [{"name": f"x{i}", "type": "number"} for i in range(3)],
        "output_features": [{"name": "y", "type": "binary"}],
        "combiner": {"type": "concat"},
    }
    comb["explicit_concat"] = ModelConfig.from_dict(cfg_concat).to_dict()["combiner"]
    comb["rule"] = (
        "no `combiner:` section and model_type ecd and >= 3 input features -> {type: ft_transformer} "
        "(ludwig/schema/model_types/base.py: ModelConfig.from_dict); otherwise the ECD schema default "
        "`concat`. Note: from_dict counts input features, so 3+ inputs of any type get an FT-Transformer "
        "(1 layer, hidden 256, 8 heads, output 256)."
    )
    out["combiner"] = comb

    # trainer / preprocessing defaults (ECD and LLM)
    ecd = ModelConfig.from_dict(
        {"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}]}
    ).to_dict()
    out["trainer"] = {"ecd": {k: v for k, v in ecd["trainer"].items() if not isinstance(v, dict) or k == "optimizer"}}
    out["preprocessing"] = {"global": ecd["preprocessing"]}
    llm_dir = Path("models/tiny-llama").resolve()
    if llm_dir.is_dir():
        llm = ModelConfig.from_dict(
            {
                "model_type": "llm",
                "base_model": str(llm_dir),
                "adapter": {"type": "lora"},
                "input_features": [{"name": "p", "type": "text"}],
                "output_features": [{"name": "o", "type": "text"}],
                "trainer": {"type": "finetune"},
            }
        ).to_dict()
        out["trainer"]["llm_finetune"] = {
            k: v for k, v in llm["trainer"].items() if not isinstance(v, dict) or k == "optimizer"
        }
        out["adapter_lora"] = llm.get("adapter")
        out["llm_text_preprocessing"] = {
            "input": pick(llm["input_features"][0]["preprocessing"], PREPROC_KEYS + ("pretrained_model_name_or_path",)),
            "output": pick(llm["output_features"][0]["preprocessing"], PREPROC_KEYS),
            "global": llm["preprocessing"],
            "generation_max_new_tokens": llm.get("generation", {}).get("max_new_tokens"),
        }
        Path("defaults/probe_llm_lora.json").write_text(json.dumps(llm, indent=1, default=str))

    out["rules"] = {
        "batch_size_auto": {
            "where": "ludwig/api.py: LudwigModel._tune_batch_size_and_grad_accum -> "
            "ludwig/trainers/trainer.py: Trainer.tune_batch_size -> "
            "ludwig/utils/batch_size_tuner.py: BatchSizeEvaluator.select_best_batch_size / evaluate",
            "when": "trainer.batch_size == 'auto' (the ECD default) -> tune for training; "
            "trainer.eval_batch_size in {auto, null} (the ECD default null) -> a second tuning run for "
            "prediction (forward only, no_grad)",
            "start": constants.MIN_POSSIBLE_BATCH_SIZE,
            "growth": "double each trial",
            "trial": f"{batch_size_tuner.TOTAL_STEPS} train steps on synthetic inputs "
            "(feature.create_sample_input), throughput = batch_size / median step time",
            "stop": "first batch size whose throughput is lower than the best so far (keep the best), "
            "or max_trials=20, or a CUDA OOM, or the next size is invalid",
            "valid_if": f"batch_size <= {constants.MAX_BATCH_SIZE_DATASET_FRACTION} x training rows and "
            "<= max_batch_size",
            "cap_on_cpu": f"min(trainer.max_batch_size, MAX_CPU_BATCH_SIZE={constants.MAX_CPU_BATCH_SIZE}) "
            "when torch.cuda.is_available() is False (Trainer.tune_batch_size)",
            "cap_effective": "also <= effective_batch_size when that is set",
            "fallback": "MIN_POSSIBLE_BATCH_SIZE (1) if no size could be evaluated; "
            "FALLBACK_BATCH_SIZE for backends without tuning support",
            "weights": "model and optimizer state are snapshotted before and restored after tuning",
            "consequence": "timing-based, so noisy: on a loaded CPU a throughput dip at 2 stops the search "
            "at batch size 1 (seen in this lab)",
        },
        "steps": {
            "steps_per_epoch": "ceil(train_rows / batch_size) "
            "(ludwig/data/batcher/random_access.py: RandomAccessBatcher._compute_steps_per_epoch)",
            "total_steps": "train_steps if set, else epochs x steps_per_epoch "
            "(ludwig/utils/trainer_utils.py: get_total_steps); epochs are then recomputed as "
            "ceil(total_steps / steps_per_epoch) (ludwig/trainers/trainer.py: Trainer.train)",
            "unit": "a step is one batch (forward+backward); the optimizer steps every "
            "gradient_accumulation_steps batches or at a checkpoint step "
            "(Trainer._train_loop: should_step); train_steps counts batches",
            "last_batch_of_1_dropped": "ignore_last=True: a final batch with exactly 1 sample is dropped "
            "(RandomAccessBatcher.last_batch); the loop then continues into another epoch until "
            "total_steps batches have run",
            "checkpoint_every": "steps_per_checkpoint if set, else steps_per_epoch / checkpoints_per_epoch "
            "if set, else steps_per_epoch; capped at steps_per_epoch and total_steps "
            "(ludwig/utils/trainer_utils.py: get_final_steps_per_checkpoint)",
            "evaluation": "at every checkpoint: validation and test sets (and the training set when "
            "evaluate_training_set) with eval_batch_size (Trainer.run_evaluation)",
            "early_stop": "stop after early_stop checkpoints without improvement of the validation metric "
            "(default 5; -1 disables) (Trainer.check_progress_on_validation)",
        },
        "split": {
            "default": "random 0.7 / 0.1 / 0.2 (ludwig/data/split.py: RandomSplitter)",
            "train_rows": "ceil(0.7 x rows) (ludwig/data/split.py: _split_divisions_with_min_rows), "
            "validation int(0.1 x rows), test the rest",
        },
        "after_training": "probability calibration pass on the validation set when a feature asks for it "
        "and model save (ludwig/api.py: LudwigModel.train -> _run_calibration, model.save)",
        "image_decoding": "image preprocessing mode defaults to 'lazy': files are decoded per batch during "
        "training, every epoch (ludwig/schema/features/preprocessing/image.py: mode; "
        "ludwig/features/image_feature.py: _make_lazy_decode_fn); 'lazy_cached' caches after epoch 1, "
        "'eager' decodes in preprocessing",
        "eval_batch_size_effective": "max(eval_batch_size, training batch_size) at every evaluation "
        "(ludwig/trainers/trainer.py: Trainer.run_evaluation)",
        "cache": "preprocessed data is cached beside the dataset (<stem>.meta.json, <stem>.training.parquet, "
        ".split.parquet, ...) and reused by the next run whose config checksum matches "
        "(ludwig/data/cache/manager.py: DatasetCache.get; skip_save_processed_input=False default)",
    }
    Path("ludwig_defaults_0_17.json").write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps(out["features"], default=str)[:3000])


if __name__ == "__main__":
    main()
