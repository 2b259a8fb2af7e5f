"""Catalogs as data: one YAML file per accelerator (`gpus/`) and per model architecture (`models/`).

The file name is the key users type. Files are read lazily on first lookup, never at import.
Lookups are case-insensitive and accept aliases and Hugging Face ids; unknown names raise
`CatalogError` with close matches and how to give dimensions instead.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
from pathlib import Path
from typing import Any

from perfmodel.errors import CatalogError, ConfigError
from perfmodel.workload import GPUSpec, ModelSpec

CATALOG_DIR = Path(__file__).parent
_MODEL_FIELDS = set(ModelSpec.__dataclass_fields__)
_GPU_FIELDS = set(GPUSpec.__dataclass_fields__)


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    with path.open() as fh:
        data = yaml.safe_load(fh)
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: a catalog file must hold a mapping")
    return data


@functools.cache
def _gpu_entries() -> dict[str, dict[str, Any]]:
    return {p.stem: _read_yaml(p) for p in sorted((CATALOG_DIR / "gpus").glob("*.yaml"))}


@functools.cache
def _model_entries() -> dict[str, dict[str, Any]]:
    return {p.stem: _read_yaml(p) for p in sorted((CATALOG_DIR / "models").glob("*.yaml"))}


@functools.cache
def _gpu_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for key, entry in _gpu_entries().items():
        for alias in [key, *entry.get("aliases", [])]:
            index[_norm(str(alias))] = key
    return index


@functools.cache
def _model_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for key, entry in _model_entries().items():
        for alias in [key, entry.get("hf_id") or key, *entry.get("aliases", [])]:
            index[_norm(str(alias))] = key
    return index


def _unknown(kind: str, name: str, choices: list[str], hint: str) -> CatalogError:
    close = difflib.get_close_matches(_norm(name), [_norm(c) for c in choices], n=3, cutoff=0.5)
    lookup = {_norm(c): c for c in choices}
    suggestion = f"; did you mean {', '.join(lookup[c] for c in close)}?" if close else ""
    return CatalogError(f"unknown {kind} {name!r}{suggestion} {hint}")


def gpu_names() -> list[str]:
    """Catalog keys of every accelerator (plus 'cpu')."""
    return [*_gpu_entries(), "cpu"]


def model_names() -> list[str]:
    """Catalog keys of every model architecture."""
    return list(_model_entries())


def resolve_gpu_key(name: str) -> str | None:
    """The catalog key for a name or alias, or None (no error). 'cpu' resolves to 'cpu'."""
    if _norm(name) == "cpu":
        return "cpu"
    return _gpu_index().get(_norm(name))


def get_gpu(name: str) -> GPUSpec:
    """The accelerator called `name` (key or alias; 'cpu' describes this machine)."""
    if _norm(name) == "cpu":
        return describe_local_cpu()
    key = resolve_gpu_key(name)
    if key is None:
        raise _unknown("GPU", name, gpu_names(), "(`perfmodel gpus` lists them all)")
    return gpu_from_entry(_gpu_entries()[key])


def gpu_from_entry(entry: dict[str, Any]) -> GPUSpec:
    data = {k: v for k, v in entry.items() if k in _GPU_FIELDS}
    data["aliases"] = tuple(str(a).lower() for a in data.get("aliases", ()))
    data["peak_tflops"] = {k: float(v) for k, v in (data.get("peak_tflops") or {}).items() if v}
    return GPUSpec(**data)


def gpu_entry(name: str) -> dict[str, Any]:
    """The raw catalog mapping (with sources) for display."""
    key = resolve_gpu_key(name)
    if key is None or key == "cpu":
        raise _unknown("GPU", name, gpu_names(), "(`perfmodel gpus` lists them all)")
    return dict(_gpu_entries()[key])


def resolve_model_key(name: str) -> str | None:
    """The catalog key for a name, alias or Hugging Face id, or None."""
    return _model_index().get(_norm(name))


def get_model(name: str) -> ModelSpec:
    """The model called `name`: catalog key, alias, Hugging Face id, or a local path to a
    directory or file holding a Hugging Face config.json."""
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        return model_from_hf_config(path / "config.json")
    if path.is_file() and path.suffix == ".json":
        return model_from_hf_config(path)
    key = resolve_model_key(name)
    if key is None:
        raise _unknown(
            "model",
            name,
            model_names(),
            "(`perfmodel models` lists them; or give model.hidden_size, model.num_layers, "
            "model.num_heads, model.ffn_hidden_size and model.vocab_size, or a path to a "
            "Hugging Face config.json)",
        )
    return model_from_entry(_model_entries()[key])


def model_entry(name: str) -> dict[str, Any]:
    key = resolve_model_key(name)
    if key is None:
        raise _unknown("model", name, model_names(), "(`perfmodel models` lists them)")
    return dict(_model_entries()[key])


def model_from_entry(entry: dict[str, Any]) -> ModelSpec:
    data = {k: v for k, v in entry.items() if k in _MODEL_FIELDS}
    return ModelSpec(**data)


# --- Hugging Face config.json --------------------------------------------------------------

_HF_KEYS = {
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads"),
    "head_dim": ("head_dim",),
    "ffn_hidden_size": ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size", "hidden_dim"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok", "moe_top_k", "top_k"),
}
_GATED_ACTIVATIONS = ("silu", "swiglu", "geglu", "gelu_pytorch_tanh", "gelu_new_gated")
_ENCODER_TYPES = ("bert", "roberta", "distilbert", "deberta", "deberta-v2", "electra", "xlm-roberta", "albert")
_ENCDEC_TYPES = ("t5", "mt5", "bart", "mbart", "pegasus", "marian")


def model_from_hf_config(path: Path) -> ModelSpec:
    """Read a Hugging Face config.json into a ModelSpec."""
    try:
        cfg = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read Hugging Face config {path}: {exc}") from exc
    if "text_config" in cfg and "hidden_size" not in cfg:  # multimodal wrappers
        cfg = {**cfg["text_config"], "model_type": cfg.get("model_type", "")}
    values: dict[str, Any] = {}
    for field_name, keys in _HF_KEYS.items():
        for key in keys:
            if cfg.get(key) is not None:
                values[field_name] = int(cfg[key])
                break
    model_type = str(cfg.get("model_type", "")).lower()
    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or cfg.get("hidden_activation") or "")
    gated = act in _GATED_ACTIVATIONS and model_type not in _ENCODER_TYPES + ("gpt2", "opt", "gpt_neox", "falcon")
    if model_type in _ENCDEC_TYPES:
        arch = "encoder-decoder"
        values["num_layers"] = int(cfg.get("num_layers", 0)) + int(cfg.get("num_decoder_layers", cfg.get("num_layers", 0)))
        gated = str(cfg.get("feed_forward_proj", "")).startswith("gated")
    elif model_type in _ENCODER_TYPES:
        arch = "encoder"
    else:
        arch = "decoder"
    missing = [k for k in ("hidden_size", "num_layers", "num_heads") if k not in values]
    if missing:
        raise ConfigError(f"Hugging Face config {path} has no {missing[0]} (looked for {', '.join(_HF_KEYS[missing[0]])})")
    return ModelSpec(
        name=str(cfg.get("_name_or_path") or Path(path).parent.name or "hf-model"),
        family=model_type.split("_")[0] or "custom",
        arch=arch,
        gated_mlp=gated,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", arch != "decoder")),
        learned_pos_embeddings=int(cfg.get("max_position_embeddings") or cfg.get("n_positions") or 0)
        if model_type in _ENCODER_TYPES + ("gpt2", "opt")
        else 0,
        source=f"Hugging Face config.json at {path}",
        **values,
    )


# --- CPUs (the local machine and measured hosts) ---------------------------------------------

RAW_DIR = Path(__file__).resolve().parents[2] / "datasets" / "raw"
"""Where the collectors keep their shards and host fingerprints."""


def local_cpu_facts() -> tuple[str, int, float]:
    """(CPU model name, usable cores, host memory in GB) of this machine."""
    import os
    import platform

    model = platform.processor() or platform.machine()
    mem_gb = 0.0
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal"):
                    mem_gb = int(line.split()[1]) * 1024 / 1e9
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return model, cores, round(mem_gb, 1)


def cpu_spec(model: str, cores: int, memory_gb: float, measured: dict[str, float]) -> GPUSpec:
    """A CPU as an accelerator entry. Peaks are rough (cores x clock x SIMD width); measured
    ceilings from the collectors' micro-benchmarks take precedence in the roofline."""
    # AVX2 FMA: 2 FMA units x 8 fp32 lanes x 2 FLOPs at ~2.5 GHz = 80 GFLOP/s per core.
    fp32 = cores * 0.08
    return GPUSpec(
        name="cpu",
        vendor="cpu",
        generation=model,
        memory_gb=memory_gb,
        hbm_bandwidth_gb_per_s=measured.get("hbm_copy_gb_per_s", 20.0),
        peak_tflops={"fp32": fp32, "tf32": fp32, "bf16": fp32, "fp16": fp32 / 2},
        intra_node_bandwidth_gb_per_s=10.0,
        inter_node_bandwidth_gb_per_s=1.25,
        sm_count=cores,
        sources={"peak_tflops": f"estimate: {cores} cores x 80 GFLOP/s (AVX2 FMA at ~2.5 GHz)"},
        measured=measured,
    )


@functools.cache
def describe_local_cpu() -> GPUSpec:
    """This machine's CPU, with the measured ceilings of a host with the same CPU model and core
    count if the collectors have measured one (datasets/raw/fingerprint__*.json)."""
    model, cores, mem_gb = local_cpu_facts()
    measured: dict[str, float] = {}
    for fp in _fingerprints():
        if fp.get("kind") == "cpu" and fp.get("cpu_model") == model and int(fp.get("cpu_cores", 0)) == cores:
            measured = measured_ceilings(str(fp["hardware_id"]))
            break
    return cpu_spec(model, cores, mem_gb, measured)


@functools.cache
def _fingerprints() -> tuple[dict[str, Any], ...]:
    out = []
    for path in sorted(RAW_DIR.glob("fingerprint__*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return tuple(out)


@functools.cache
def measured_ceilings(hardware_id: str) -> dict[str, float]:
    """Best achieved matmul TFLOP/s per dtype and memory-copy GB/s of one measured host, from its
    micro-benchmark shards (keys 'matmul_<dtype>_tflops', 'hbm_copy_gb_per_s')."""
    shards = sorted(RAW_DIR.glob(f"microbench__{hardware_id}__*.parquet"))
    if not shards:
        return {}
    import pandas as pd

    frame = pd.concat([pd.read_parquet(p) for p in shards], ignore_index=True)
    frame = frame[frame["status"] == "ok"]
    out: dict[str, float] = {}
    for dtype, value in frame[frame["bench"] == "matmul"].groupby("dtype")["achieved_tflops"].max().items():
        if value == value:  # not NaN
            out[f"matmul_{dtype}_tflops"] = float(value)
    copy = frame.loc[frame["bench"] == "hbm_copy", "achieved_gb_per_s"].max()
    if copy == copy:
        out["hbm_copy_gb_per_s"] = float(copy)
    return out


def get_measured_host(hardware_id: str) -> GPUSpec:
    """The accelerator a measured host had, with that host's measured ceilings (own rows are
    rebuilt with the host that measured them, not with the machine reading them)."""
    fp = next((f for f in _fingerprints() if f.get("hardware_id") == hardware_id), None)
    if fp is None:
        raise CatalogError(f"no fingerprint for host {hardware_id!r} in {RAW_DIR}")
    measured = measured_ceilings(hardware_id)
    if fp.get("kind") != "cpu":
        base = get_gpu(str(fp.get("gpu")))
        return dataclasses.replace(base, measured={**base.measured, **measured})
    return cpu_spec(str(fp.get("cpu_model", "")), int(fp.get("cpu_cores") or 1), float(fp.get("host_memory_gb") or 0.0), measured)
