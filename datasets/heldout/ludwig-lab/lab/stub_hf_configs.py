"""Put config.json (only) of the base models named by the shared LLM configs into a lab-local
Hugging Face cache (hf_home/), so Ludwig's offline validation can reach them.

Ludwig 0.17 validates `base_model` with transformers.AutoConfig.from_pretrained
(ludwig/schema/llms/base_model.py: BaseModelDataclassField.validate); nothing else about the
model is read at validation time. The values below are the published config.json values of those
repositories (architecture dims only; no weights, no tokenizer). Use with HF_HOME=hf_home.
"""

from __future__ import annotations

import json
from pathlib import Path

COMMIT = "0" * 40

LLAMA_COMMON = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_act": "silu",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "initializer_range": 0.02,
    "torch_dtype": "bfloat16",
    "use_cache": True,
}

CONFIGS = {
    "meta-llama/Llama-2-7b-hf": {
        **LLAMA_COMMON,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-05,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "float16",
    },
    "meta-llama/Llama-3.1-8B": {
        **LLAMA_COMMON,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "bos_token_id": 128000,
        "eos_token_id": 128001,
    },
    "meta-llama/Llama-3.2-1B": {
        **LLAMA_COMMON,
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_attention_heads": 32,
        "num_hidden_layers": 16,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "tie_word_embeddings": True,
        "bos_token_id": 128000,
        "eos_token_id": 128001,
    },
}


def main() -> None:
    hub = Path(__file__).resolve().parent / "hf_home" / "hub"
    for repo, cfg in CONFIGS.items():
        d = hub / ("models--" + repo.replace("/", "--"))
        (d / "refs").mkdir(parents=True, exist_ok=True)
        (d / "refs" / "main").write_text(COMMIT)
        snap = d / "snapshots" / COMMIT
        snap.mkdir(parents=True, exist_ok=True)
        (snap / "config.json").write_text(json.dumps(cfg, indent=2))
        print(f"stubbed {repo} -> {snap / 'config.json'}")


if __name__ == "__main__":
    main()
