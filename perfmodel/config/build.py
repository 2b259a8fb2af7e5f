"""Building a Workload from a native Draft: explicit values > the source format's defaults >
perfmodel's defaults, with every default that was used listed in `Workload.assumptions`.

Not listed: the contract's optional keys (every field without a rule here, e.g. tensor_parallel,
lora_target_modules, attention_kernel: given, or the dataclass default) and keys that do not apply
to the model's arch. Listed besides the defaults: an accelerator alias resolved (H100 -> H100-SXM),
hardware.num_nodes derived from the catalog's GPUs per server, Hugging Face keys read as native
ones, and model.gated_mlp assumed false for a model given by its dimensions.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from perfmodel.analytic.activations import lora_order
from perfmodel.analytic.step import nchw_transposes
from perfmodel.catalog import get_gpu, gpu_resolution_note
from perfmodel.catalog.frameworks import DEFAULT_FRAMEWORK, get_recipe
from perfmodel.config.dataset_size import measure_dataset
from perfmodel.config.native import DataFlags, Draft, check_key, combine_problems, resolve_model, validate
from perfmodel.errors import ConfigError, PerfModelError
from perfmodel.recipes import FrameworkRecipe
from perfmodel.workload import GPUSpec, ModelSpec, ParallelSpec, TrainingSpec, Workload

DEFAULT_NOTES: dict[str, str] = {
    "training.precision": "bf16 (fp16, else fp32, where the accelerator has no bf16)",
    "training.epochs": "1 (with training.samples)",
    "hardware.num_nodes": "the fewest servers that hold num_gpus evenly (the catalog's gpus_per_server each at most); "
    "a given value that cannot hold them is an error",
    "framework": DEFAULT_FRAMEWORK,
}
"""Defaults the config layer applies that differ from (or refine) the dataclass defaults."""
_AMOUNT_KEYS = ("tokens", "samples", "epochs", "steps")
_GBM_KEYS = ("gbm_rows", "gbm_features", "gbm_rounds")


def _passed_through(spec: type, chosen: dict[str, Any], skip: tuple[str, ...] = ()) -> list[str]:
    """Fields of `spec` with no rule of their own here: taken as given (or left to the dataclass
    default, unlisted: the contract's optional keys)."""
    return [f.name for f in dataclasses.fields(spec) if f.name not in chosen and f.name not in skip]


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


def _resolve_gpu(name: Any, assumptions: list[str]) -> GPUSpec:
    gpu = get_gpu(str(name))
    note = gpu_resolution_note(str(name))
    if note:
        assumptions.append(note)
    return gpu


def _num_nodes(pick: _Picker, num_gpus: int, gpu: GPUSpec, assumptions: list[str]) -> int:
    """hardware.num_nodes as given, else the servers `num_gpus` fill (the catalog's gpus_per_server)."""
    if pick.given("hardware.num_nodes") or "hardware.num_nodes" in pick.soft:
        nodes = int(pick("hardware.num_nodes"))
        gpu.check_nodes(num_gpus, nodes)
        return nodes
    nodes = gpu.servers_for(num_gpus)
    if num_gpus > 1:
        assumptions.append(f"hardware.num_nodes not given: assumed {nodes} ({num_gpus} GPUs, at most "
                           f"{gpu.gpus_per_server} per {gpu.name} server, split evenly)")
    return nodes


def build_workload(draft: Draft, *, data: DataFlags | None = None, base_dir: Path | None = None) -> Workload:
    """Validate, apply defaults, resolve catalog names; raises ConfigError / CatalogError. Key,
    type, range and name problems are all collected first and raised together."""
    data = data or DataFlags()
    base_dir = base_dir if base_dir is not None else draft.base_dir
    checked = validate(draft.native)
    cfg = checked.cfg
    for dotted in draft.soft:
        check_key(tuple(dotted.split(".")), "internal default")
    assumptions = [*draft.notes, *checked.notes]
    pick = _Picker(cfg, draft.soft, assumptions)
    problems: list[PerfModelError] = [ConfigError(p) for p in checked.problems]
    model: ModelSpec | None = None
    gpu: GPUSpec | None = None
    if not checked.bad("model"):
        try:
            model, notes = resolve_model(cfg["model"], base_dir)
            assumptions.extend(notes)
        except PerfModelError as exc:
            problems.append(exc)
    if not checked.bad("hardware.gpu"):
        gpu_name = pick("hardware.gpu")
        if gpu_name is None:
            problems.append(ConfigError("hardware.gpu is required: give it in the file or with --gpu NAME "
                                        "(`perfmodel gpus` lists them)"))
        else:
            try:
                gpu = _resolve_gpu(gpu_name, assumptions)
            except PerfModelError as exc:
                problems.append(exc)
    if problems or model is None or gpu is None:
        raise combine_problems(problems or [ConfigError("the config has problems")], draft.source)
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
        if kw["precision"] == "fp32" and model.arch == "cnn" and gpu.tensor_cores("tf32"):
            assumptions.append(
                f"training.precision fp32: convolutions priced in IEEE fp32; PyTorch runs them in TF32 on "
                f"{gpu.name} by default (torch.backends.cudnn.allow_tf32 is True, x{gpu.peak_for('tf32') / gpu.peak_for('fp32'):.0f} "
                "the peak): set training.precision: tf32 unless the run turns it off"
            )
        compute = TrainingSpec(precision=kw["precision"]).compute_dtype
        if model.arch == "cnn" and nchw_transposes(compute, gpu.vendor) and not pick.given("training.channels_last"):
            assumptions.append(
                "training.channels_last not given: PyTorch's default NCHW, so each 16-bit convolution runs behind "
                "NCHW <-> NHWC transpositions (costed for a torchvision ResNet); set it true when the model and "
                "its images are in torch.channels_last"
            )
        kw["optimizer"] = pick("training.optimizer", "adamw")
        kw["activation_checkpointing"] = pick("training.activation_checkpointing", False)
        for key in _passed_through(TrainingSpec, kw, skip=("seq_len", *_AMOUNT_KEYS, *_GBM_KEYS)):
            value = pick(f"training.{key}", say=False)
            if value is not None:
                kw[key] = value
        kw.update(_amount(pick, cfg, draft, data, model, base_dir, seq_len, assumptions))
    num_gpus = pick("hardware.num_gpus", 1)
    hw: dict[str, Any] = {
        "num_gpus": num_gpus,
        "num_nodes": _num_nodes(pick, num_gpus, gpu, assumptions),
        "strategy": pick("hardware.strategy", "ddp", say=num_gpus > 1),
    }
    for key in _passed_through(ParallelSpec, hw):
        value = pick(f"hardware.{key}", say=False)
        if value is not None:
            hw[key] = value
    parallel = ParallelSpec(**hw)
    framework = cfg.get("framework") or draft.soft.get("framework", (None, ""))[0]
    custom = cfg.get("framework_recipe")
    if framework is None:
        framework = DEFAULT_FRAMEWORK
        assumptions.append(f"framework not given: assumed {get_recipe(DEFAULT_FRAMEWORK).describe()}")
    elif "framework" not in cfg and draft.soft["framework"][1]:
        assumptions.append(draft.soft["framework"][1])
    recipe = custom or get_recipe(str(framework))
    if model.arch != "gbm":
        linears = len(lora_order(model.gated_mlp))
        single_full = not kw.get("lora_r") and num_gpus == 1 and kw.get("optimizer", "adamw") == "adamw"
        kw.update(_recipe_defaults(recipe, pick, lora_linears=linears if kw.get("lora_r") else 0,
                                   single_full=single_full and int(kw.get("grad_accum_steps") or 1) == 1,
                                   assumptions=assumptions))  # fmt: skip
    return Workload(
        model=model,
        training=TrainingSpec(**kw),
        gpu=gpu,
        parallel=parallel,
        framework=str(framework),
        recipe=custom,
        assumptions=tuple(dict.fromkeys(assumptions)),
    )


def _recipe_defaults(recipe: FrameworkRecipe, pick: _Picker, *, lora_linears: int = 0, single_full: bool = False,
                     assumptions: list[str] | None = None) -> dict[str, Any]:
    """Training keys the framework's recipe sets where the config is silent: its attention kernel,
    torch.compile, a fused linear cross-entropy, and a LoRA fine-tune's adapted matrices, at most
    `lora_linears` (the model's linear layers a block; 0: no LoRA). The config's own keys win; the
    last is listed in `assumptions`: it moves a 7B LoRA's peak memory by up to 1.5x. A full
    fine-tune with AdamW on one device without gradient accumulation (`single_full`) takes the
    recipe's single-device optimizer defaults (torchtune: paged 8-bit AdamW stepped in backward),
    listed too."""
    def silent(dotted: str) -> bool:
        return not pick.given(dotted) and dotted not in pick.soft

    out: dict[str, Any] = {}
    if silent("training.attention_kernel"):
        out["attention_kernel"] = recipe.attention
    if silent("training.torch_compile") and recipe.compile:
        out["torch_compile"] = True
    if silent("training.fused_cross_entropy") and recipe.loss == "fused-linear":
        out["fused_cross_entropy"] = True
    said = []
    if single_full and recipe.full_single_device_optimizer_state and silent("training.optimizer_state"):
        out["optimizer_state"] = recipe.full_single_device_optimizer_state
        said.append(f"training.optimizer_state {recipe.full_single_device_optimizer_state}")
    if single_full and recipe.full_single_device_optimizer_in_backward and silent("training.optimizer_in_backward"):
        out["optimizer_in_backward"] = True
        said.append("training.optimizer_in_backward true")
    if said and assumptions is not None:
        assumptions.append(f"a full fine-tune on one GPU with the {recipe.name} recipe: {' and '.join(said)}, "
                           "its single-device full fine-tuning configs' defaults (set the keys to change them)")
    if lora_linears and recipe.lora_targets and silent("training.lora_target_modules"):
        n = min(recipe.lora_targets, lora_linears)
        out["lora_target_modules"] = n
        if assumptions is not None:
            every = " (every linear layer)" if n == lora_linears else ""
            assumptions.append(
                f"training.lora_target_modules not given: {n} adapted matrices a layer, the {recipe.name} "
                f"recipe's default{every}; PEFT's own default q_proj, v_proj is training.lora_target_modules: 2"
            )
    return out

