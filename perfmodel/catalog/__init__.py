"""Catalogs as data: one YAML file per accelerator (`gpus/`) and per model architecture (`models/`).

Layers: `data.py` reads the files (lazily, on first lookup, never at import) and maps names to
keys; `hardware.py` builds accelerators (catalog entries, extras for tests via
`use_extra_gpus`, this machine's CPU, measured hosts); `models.py` builds models (catalog
entries, Hugging Face config.json files, the local Hugging Face cache). Lookups are
case-insensitive and accept aliases; unknown names raise `CatalogError` suggesting the family
('A100' -> A100-40GB, A100-80GB, ...) and close matches.
"""

from __future__ import annotations

from perfmodel.catalog.data import CATALOG_DIR, suggestions
from perfmodel.catalog.hardware import (
    cpu_spec,
    describe_local_cpu,
    get_gpu,
    get_measured_host,
    gpu_entry,
    gpu_from_entry,
    gpu_names,
    gpu_resolution_note,
    local_cpu_facts,
    measured_ceilings,
    resolve_gpu_key,
    use_extra_gpus,
)
from perfmodel.catalog.models import (
    get_model,
    hf_cached_config,
    local_config_path,
    model_entry,
    model_from_entry,
    model_from_hf_config,
    model_names,
    resolve_model_key,
)

__all__ = [
    "CATALOG_DIR",
    "cpu_spec",
    "describe_local_cpu",
    "get_gpu",
    "get_measured_host",
    "get_model",
    "gpu_entry",
    "gpu_from_entry",
    "gpu_names",
    "gpu_resolution_note",
    "hf_cached_config",
    "local_cpu_facts",
    "local_config_path",
    "measured_ceilings",
    "model_entry",
    "model_from_entry",
    "model_from_hf_config",
    "model_names",
    "resolve_gpu_key",
    "resolve_model_key",
    "suggestions",
    "use_extra_gpus",
]
