"""Building a Workload from a native Draft: explicit values > the source format's defaults >
perfmodel's defaults, with every default that was used listed in `Workload.assumptions`.

Not listed: the contract's optional keys (tensor_parallel, pipeline_parallel, context_parallel, cpu_offload,
lora_target_modules, eval_fraction) and keys that do not apply to the model's arch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfmodel.catalog import get_gpu
from perfmodel.config.native import DataFlags, Draft, check_key, resolve_model, validate
from perfmodel.errors import ConfigError
from perfmodel.workload import GPUSpec, ModelSpec, ParallelSpec, TrainingSpec, Workload

DEFAULT_FRAMEWORK = "hf-eager"


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}"
    return str(value)


class _Picker:
    """explicit value > soft default (its line) > perfmodel default (a generic line)."""

    def __init__(self, cfg: dict[str, Any], soft: dict[str, tuple[Any, str]], assumptions: list[str]) -> None:
        self.cfg, self.soft, self.assumptions = cfg, soft, assumptions

    def __call__(self, dotted: str, default: Any = None, *, say: bool = True) -> Any:
        section, key = dotted.split(".")
        if key in self.cfg[section]:
            return self.cfg[section][key]
        if dotted in self.soft:
            value, line = self.soft[dotted]
            if line and value is not None:
                self.assumptions.append(line)
            return value
        if default is not None and say:
            self.assumptions.append(f"{dotted} not given: assumed {_fmt(default)}")
        return default

    def given(self, dotted: str) -> bool:
        section, key = dotted.split(".")
        return key in self.cfg[section]


def _precision(pick: _Picker, gpu: GPUSpec, assumptions: list[str]) -> str:
    if pick.given("training.precision"):
        return str(pick("training.precision"))
    value = pick("training.precision", "bf16")
    compute = {"amp_bf16": "bf16", "amp_fp16": "fp16"}.get(value, value)
    if gpu.supports(compute):
        return str(value)
    fallback = next((p for p in ("fp16", "fp32") if gpu.supports(p)), "fp32")
    assumptions.append(f"{gpu.name} has no {compute} support: training.precision assumed {fallback} instead")
    return fallback


def _amount(pick: _Picker, cfg: dict[str, Any], draft: Draft, data: DataFlags, model: ModelSpec,
            base_dir: Path | None, seq_len: int | None, assumptions: list[str]) -> dict[str, Any]:
    """training.tokens / samples (+ epochs) / steps, with --tokens/--rows/--dataset replacing the file's."""
    from perfmodel.config.dataset_size import measure_dataset

    t = cfg["training"]
    in_file = [k for k in ("tokens", "samples", "steps") if k in t]
    out: dict[str, Any] = {}
    dataset = data.dataset
    if not data.given and not in_file and "dataset" in t:
        dataset = Path(t["dataset"]).expanduser()
        if not dataset.is_absolute() and base_dir is not None:
            dataset = base_dir / dataset
    if data.given and in_file:
        assumptions.append(f"the command-line data size replaces training.{'/'.join(in_file)} from the config")
    if data.tokens is not None:
        if not model.is_transformer:
            raise ConfigError(f"--tokens applies to token models; {model.name} is a {model.arch} model: pass --rows N or --dataset FILE")
        if "epochs" in t:
            assumptions.append("--tokens is the total over all epochs: training.epochs not applied")
        return {"tokens": float(data.tokens)}
    if data.rows is not None or dataset is not None:
        if data.rows is not None:
            samples = float(data.rows)
        else:
            stats = measure_dataset(
                dataset,  # type: ignore[arg-type]
                text_columns=t.get("text_columns"),
                all_string_columns="text_columns" not in t and model.is_transformer,
                tokens_cap=seq_len if model.is_transformer else None,
                column_origin="training.text_columns",
            )
            samples = float(stats.rows)
            if model.is_transformer:
                assumptions.append(f"{stats.describe()}; training.samples = rows (one sample per row, padded or "
                                   f"truncated to training.seq_len; give --tokens for packed sequences)")
            else:
                assumptions.append(f"dataset {stats.path.name}: {stats.rows:,} rows -> training.samples")
        if samples <= 0:
            raise ConfigError("the dataset has no rows: training.samples must be > 0")
        return {"samples": samples, "epochs": pick("training.epochs", 1.0)}
    if len(in_file) > 1:
        raise ConfigError(f"give one of training.tokens, training.samples, training.steps; got {', '.join('training.' + k for k in in_file)}")
    if not in_file:
        raise ConfigError(draft.missing_amount)
    key = in_file[0]
    if key != "samples" and "epochs" in t:
        raise ConfigError(f"training.epochs applies to training.samples; training.{key} already sets the whole run: remove one")
    if key == "tokens" and not model.is_transformer:
        raise ConfigError(f"training.tokens applies to token models; {model.name} is a {model.arch} model: give training.samples")
    out[key] = t[key]
    if key == "samples":
        out["epochs"] = pick("training.epochs", 1.0)
    return out


def build_workload(draft: Draft, *, data: DataFlags | None = None, base_dir: Path | None = None) -> Workload:
    """Validate, apply defaults, resolve catalog names; raises ConfigError / CatalogError."""
    data = data or DataFlags()
    cfg = validate(draft.native)
    for dotted in draft.soft:
        check_key(tuple(dotted.split(".")), "internal default")
    assumptions = list(draft.notes)
    pick = _Picker(cfg, draft.soft, assumptions)
    model = resolve_model(cfg["model"], base_dir)
    gpu_name = pick("hardware.gpu")
    if gpu_name is None:
        raise ConfigError("hardware.gpu is required: give it in the file or with --gpu NAME (`perfmodel gpus` lists them)")
    gpu = get_gpu(str(gpu_name))
    kw: dict[str, Any] = {}
    if model.arch == "gbm":
        for key in ("gbm_features", "gbm_rounds"):
            kw[key] = pick(f"training.{key}")
            if kw[key] is None:
                raise ConfigError(f"training.{key} is required for a gbm model")
        rows = pick("training.gbm_rows")
        if data.rows is not None or data.dataset is not None or rows is None:
            if data.tokens is not None:
                raise ConfigError("--tokens does not apply to a gbm model: pass --rows N or --dataset FILE")
            if data.rows is None and data.dataset is None:
                raise ConfigError(draft.missing_amount)
            from perfmodel.config.dataset_size import measure_dataset

            rows = data.rows if data.rows is not None else measure_dataset(data.dataset).rows  # type: ignore[arg-type]
        kw["gbm_rows"] = int(rows)
        kw["precision"] = "fp32"
    else:
        seq_len = pick("training.seq_len", 512) if model.is_transformer else None
        if seq_len is not None:
            kw["seq_len"] = seq_len
        kw["micro_batch_size"] = pick("training.micro_batch_size", 8)
        kw["grad_accum_steps"] = pick("training.grad_accum_steps", 1)
        kw["precision"] = _precision(pick, gpu, assumptions)
        kw["optimizer"] = pick("training.optimizer", "adamw")
        kw["activation_checkpointing"] = pick("training.activation_checkpointing", False)
        for key in ("lora_r", "lora_target_modules", "quantization_bits", "trainable_fraction", "eval_fraction"):
            value = pick(f"training.{key}", say=False)
            if value is not None:
                kw[key] = value
        kw.update(_amount(pick, cfg, draft, data, model, base_dir, seq_len, assumptions))
    num_gpus = pick("hardware.num_gpus", 1)
    parallel = ParallelSpec(
        num_gpus=num_gpus,
        num_nodes=pick("hardware.num_nodes", 1, say=num_gpus > 1),
        strategy=pick("hardware.strategy", "ddp", say=num_gpus > 1),
        tensor_parallel=pick("hardware.tensor_parallel", 1, say=False),
        pipeline_parallel=pick("hardware.pipeline_parallel", 1, say=False),
        context_parallel=pick("hardware.context_parallel", 1, say=False),
        cpu_offload=pick("hardware.cpu_offload", False, say=False),
    )
    framework = cfg.get("framework") or draft.soft.get("framework", (None, ""))[0]
    if framework is None:
        framework = DEFAULT_FRAMEWORK
        assumptions.append(f"framework not given: assumed {DEFAULT_FRAMEWORK} (PyTorch eager, Hugging Face style)")
    elif "framework" not in cfg and draft.soft["framework"][1]:
        assumptions.append(draft.soft["framework"][1])
    return Workload(
        model=model,
        training=TrainingSpec(**kw),
        gpu=gpu,
        parallel=parallel,
        framework=str(framework),
        assumptions=tuple(dict.fromkeys(assumptions)),
    )

