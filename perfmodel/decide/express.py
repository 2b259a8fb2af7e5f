"""A change of native keys written in the user's own config dialect.

For a native config the keys are the native keys. For a Ludwig config (Ludwig's schema: trainer,
backend, quantization) they become:

  training.micro_batch_size         -> trainer.batch_size
  training.grad_accum_steps         -> trainer.gradient_accumulation_steps
  training.activation_checkpointing -> trainer.enable_gradient_checkpointing
  training.quantization_bits        -> quantization.bits (a quantized base, LLM configs)
  training.precision                -> trainer.use_mixed_precision (amp_fp16 on / off), or for a
                                       quantized LLM quantization.bnb_4bit_compute_dtype
  hardware.num_gpus, .strategy      -> backend: {type: ray, trainer: {num_workers: N, strategy:
                                       ddp | fsdp | {type: deepspeed, zero_optimization: {stage: K}}}}
  hardware.gpu, hardware.num_nodes  -> not Ludwig keys (Ludwig configs never name hardware): given
                                       to perfmodel as flags (--gpu NAME, --set hardware.num_nodes=N)

Ludwig's legacy `training:` section name is kept where the config uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perfmodel.config import workload_to_native
from perfmodel.config.source import ConfigSource, get_dotted
from perfmodel.errors import PerfModelError

_QUANT_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def trainer_path(raw: Mapping[str, Any]) -> str:
    return "training" if "training" in raw and "trainer" not in raw else "trainer"


def ludwig_precision(raw: Mapping[str, Any], precision: str) -> dict[str, Any] | None:
    """The Ludwig keys that give `precision`, or None when Ludwig cannot express it."""
    tpath = trainer_path(raw)
    model_type = str(raw.get("model_type") or "ecd").lower()
    if model_type == "llm" and raw.get("quantization"):
        dtype = _QUANT_DTYPES.get(precision)
        return {"quantization.bnb_4bit_compute_dtype": dtype} if dtype else None
    if precision == "amp_fp16":
        return {f"{tpath}.use_mixed_precision": True}
    if (model_type == "llm" and precision == "bf16") or (model_type == "ecd" and precision == "fp32"):
        return {f"{tpath}.use_mixed_precision": False}
    return None


def ludwig_strategy(strategy: str, current: Any = None) -> Any:
    """Ludwig's Ray strategy for a native one; a DeepSpeed stage keeps the rest of a DeepSpeed
    strategy already configured (offload, buckets)."""
    if strategy in ("ddp", "fsdp"):
        return strategy
    stage = {"zero1": 1, "zero2": 2, "zero3": 3}[strategy]
    if isinstance(current, dict) and str(current.get("type", "")).lower() == "deepspeed":
        zero = dict(current.get("zero_optimization") or {})
        return {**current, "zero_optimization": {**zero, "stage": stage}}
    return {"type": "deepspeed", "zero_optimization": {"stage": stage}}


def express(
    changes: Mapping[str, Any], source: ConfigSource, base_gpus: int, base_strategy: str
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(config changes in the source's dialect, native keys to give as perfmodel flags), or None
    when the change cannot be written in the dialect."""
    if source.dialect == "native":
        return dict(changes), {}
    raw = source.raw
    tpath = trainer_path(raw)
    config: dict[str, Any] = {}
    flags: dict[str, Any] = {}
    simple = {
        "training.micro_batch_size": f"{tpath}.batch_size",
        "training.grad_accum_steps": f"{tpath}.gradient_accumulation_steps",
        "training.activation_checkpointing": f"{tpath}.enable_gradient_checkpointing",
    }
    for key, value in changes.items():
        if key in simple:
            config[simple[key]] = value
        elif key == "training.precision":
            mapped = ludwig_precision(raw, str(value))
            if mapped is None:
                return None
            config.update(mapped)
        elif key == "training.quantization_bits":
            if value is None:
                return None  # removing a Ludwig quantization section is not an option advise writes
            config["quantization.bits"] = value
        elif key in ("hardware.num_gpus", "hardware.strategy"):
            continue
        else:
            flags[key] = value
    if "hardware.num_gpus" in changes or "hardware.strategy" in changes:
        n = int(changes.get("hardware.num_gpus", base_gpus))
        strategy = str(changes.get("hardware.strategy", base_strategy))
        backend_type = get_dotted(raw, "backend.type")
        if n == 1 and backend_type in (None, "local"):
            pass  # one GPU: the local backend, as configured
        else:
            if backend_type != "ray":
                config["backend.type"] = "ray"
            config["backend.trainer.num_workers"] = n
            if "hardware.strategy" in changes or backend_type != "ray":
                config["backend.trainer.strategy"] = ludwig_strategy(
                    strategy, get_dotted(raw, "backend.trainer.strategy")
                )
    return config, flags


def flag_text(key: str, value: Any) -> str:
    """How a native key is given on perfmodel's command line."""
    if key == "hardware.gpu":
        return f"--gpu {value}"
    if key == "hardware.num_gpus":
        return f"--num-gpus {value}"
    return f"--set {key}={value}"


def current_value(source: ConfigSource, key: str) -> Any:
    """The value `key` has now: as written in the config, else as resolved (native keys)."""
    written = get_dotted(source.raw, key)
    if written is not None:
        return written

    try:
        resolved = workload_to_native(source.base())
    except PerfModelError:
        return None
    return get_dotted(resolved, key)
