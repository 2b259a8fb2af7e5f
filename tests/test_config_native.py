"""The native config format through load_workload: keys, defaults, assumptions, overrides, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from perfmodel.config import detect_format, load_workload, resolve_config, workload_to_native
from perfmodel.errors import CatalogError, ConfigError, PerfModelError

FIX = Path(__file__).parent / "fixtures" / "configs"


def write(tmp_path: Path, text: str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_full_config_maps_every_contract_key():
    w = load_workload(FIX / "native_full.yaml")
    t, p = w.training, w.parallel
    assert w.model.name == "llama2-7b" and w.model.hidden_size == 4096 and w.model.gated_mlp
    assert (t.seq_len, t.micro_batch_size, t.grad_accum_steps) == (1024, 4, 8)
    assert (t.precision, t.optimizer, t.activation_checkpointing) == ("amp_bf16", "adamw", True)
    assert (t.lora_r, t.quantization_bits, t.tokens) == (16, 4, 2.0e8)  # '2.0e8' is a string to PyYAML
    assert (t.samples, t.steps, t.epochs) == (None, None, None)
    assert (p.num_gpus, p.num_nodes, p.strategy, p.tensor_parallel, p.pipeline_parallel) == (8, 2, "fsdp", 2, 1)
    assert w.gpu.name == "A100-80GB" and w.framework == "hf-eager"
    assert w.assumptions == ()  # nothing was left to a default


@pytest.mark.parametrize(
    ("framework", "gated", "given", "expected", "said"),
    [
        # hf-eager: every linear of a block (TRL / QLoRA's all-linear); a model without a gate has six
        ("hf-eager", True, None, 7, True),
        ("hf-eager", False, None, 6, True),
        # torchtune's 8B LoRA configs: q, v, output_proj and the three MLP matrices
        ("torchtune", True, None, 6, True),
        # litgpt's config hub: lora_query and lora_value only
        ("litgpt", True, None, 2, True),
        # a stack that names none keeps PEFT's q, v, unlisted
        ("deepspeed", True, None, 2, False),
        # the config's own key wins, whatever the recipe says
        ("hf-eager", True, 3, 3, False),
    ],
)
def test_lora_targets_default_to_the_recipes_and_say_so(tmp_path, framework, gated, given, expected, said):
    model = "name: llama2-7b" if gated else "name: opt-6.7b"
    targets = "" if given is None else f"\n  lora_target_modules: {given}"
    path = write(tmp_path, f"""model:
  {model}
training:
  seq_len: 512
  micro_batch_size: 4
  lora_r: 16{targets}
  tokens: 1.0e7
hardware:
  gpu: A100-80GB
framework: {framework}
""")
    w = load_workload(path)
    assert w.model.gated_mlp is gated
    assert w.training.lora_target_modules == expected
    lines = [a for a in w.assumptions if a.startswith("training.lora_target_modules not given")]
    assert bool(lines) is said
    if said:
        assert f": {expected} adapted matrices a layer" in lines[0] and "lora_target_modules: 2" in lines[0]


@pytest.mark.parametrize(
    ("extra", "gpus", "expected"),
    [
        ("", 1, ("paged-8bit", True)),  # torchtune's single-device full configs
        ("  grad_accum_steps: 4\n", 1, (None, None)),  # optimizer_in_bwd needs no accumulation
        ("  lora_r: 8\n", 1, (None, None)),  # its LoRA configs: torch.optim.AdamW
        ("", 2, (None, None)),  # its distributed configs
        ("  optimizer_state: fp32\n", 1, ("fp32", True)),  # the config's own key wins
    ],
)
def test_torchtune_full_finetunes_on_one_gpu_take_its_low_memory_optimizer(tmp_path, extra, gpus, expected):
    path = write(tmp_path, f"""model:
  name: llama2-7b
training:
  seq_len: 2048
  micro_batch_size: 2
{extra}  tokens: 1.0e7
hardware:
  gpu: RTX-4090
  num_gpus: {gpus}
framework: torchtune
""")
    w = load_workload(path)
    assert (w.training.optimizer_state, w.training.optimizer_in_backward) == expected
    said = [a for a in w.assumptions if a.startswith("a full fine-tune on one GPU with the torchtune recipe")]
    assert bool(said) is (expected != (None, None))


def test_full_finetunes_get_no_lora_targets_line(tmp_path):
    path = write(tmp_path, "model:\n  name: llama2-7b\ntraining:\n  seq_len: 512\n  micro_batch_size: 4\n  tokens: 1.0e7\nhardware:\n  gpu: A100-80GB\n")
    w = load_workload(path)
    assert not any("lora_target_modules" in a for a in w.assumptions)


def test_context_parallel_is_an_optional_hardware_key(tmp_path):
    base = ("model: {name: llama3-8b}\ntraining: {seq_len: 131072, micro_batch_size: 1, precision: bf16, tokens: 1e9}\n"
            "hardware: {gpu: H100-SXM, num_gpus: 16, num_nodes: 2, strategy: zero1, tensor_parallel: 4")
    w = load_workload(write(tmp_path, base + ", context_parallel: 4}\n"))
    assert (w.parallel.context_parallel, w.parallel.data_parallel, w.parallel.shard_group) == (4, 1, 4)
    assert load_workload(write(tmp_path, base + "}\n")).parallel.context_parallel == 1
    with pytest.raises(ConfigError, match=r"context_parallel \(3\)"):
        load_workload(write(tmp_path, base + ", context_parallel: 3}\n"))


def test_minimal_config_lists_every_default_it_applied():
    w = load_workload(FIX / "native_minimal.yaml")
    t = w.training
    assert (t.seq_len, t.micro_batch_size, t.grad_accum_steps, t.precision, t.optimizer) == (512, 8, 1, "bf16", "adamw")
    assert t.activation_checkpointing is False and t.lora_r is None and w.parallel.num_gpus == 1
    text = "\n".join(w.assumptions)
    for key in ("training.seq_len", "training.micro_batch_size", "training.grad_accum_steps", "training.precision",
                "training.optimizer", "training.activation_checkpointing", "hardware.num_gpus", "framework"):
        assert key in text, key
    assert "training.precision not given: assumed bf16" in w.assumptions
    # single GPU: strategy and nodes do not matter and are not listed
    assert "hardware.strategy" not in text and "hardware.num_nodes" not in text


def test_custom_dims_define_a_model_outside_the_catalog():
    w = load_workload(FIX / "native_custom_dims.yaml")
    m = w.model
    assert (m.name, m.hidden_size, m.num_layers, m.num_heads, m.num_kv_heads, m.ffn_hidden_size) == (
        "tiny-gqa-1b", 2048, 16, 32, 8, 5632)
    assert m.gated_mlp and m.arch == "decoder"
    assert (w.training.samples, w.training.epochs, w.training.tokens) == (100000, 2, None)


def test_explicit_dims_override_the_catalog_entry(tmp_path):
    cfg = write(tmp_path, (FIX / "native_minimal.yaml").read_text().replace("name: llama2-7b", "name: llama2-7b\n  num_layers: 16"))
    m = load_workload(cfg).model
    assert m.num_layers == 16 and m.hidden_size == 4096 and m.name == "llama2-7b" and m.params_total is None


def test_model_path_reads_a_hugging_face_config_relative_to_the_file():
    w = load_workload(FIX / "native_hf_config_path.yaml")
    assert w.model.arch == "encoder" and w.model.hidden_size == 768 and w.model.vocab_size == 30522
    assert w.training.precision == "amp_fp16"


def test_unknown_key_names_the_full_path_and_the_allowed_keys():
    with pytest.raises(ConfigError) as err:
        load_workload(FIX / "native_unknown_key.yaml")
    msg = str(err.value)
    assert "training.lora_rank" in msg and "allowed keys in training" in msg and "lora_r" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    "text,expected",
    [
        ("models:\n  name: llama2-7b\nmodel: {name: llama2-7b}\ntraining: {tokens: 1e8}\nhardware: {gpu: A100-80GB}\n",
         "unknown top-level key 'models'"),
        ("model:\n  name: llama2-7b\ntraining:\n  tokens: 1.0e8\n", "hardware.gpu is required"),
        ("training:\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n", "model.name is required"),
        ("model: llama2-7b\n", "model must be a mapping"),
        ("model:\n  name: llama2-7b\ntraining:\n  tokens: 1.0e8\n  samples: 10\nhardware:\n  gpu: A100-80GB\n",
         "give one of training.tokens"),
        ("model:\n  name: llama2-7b\ntraining:\n  tokens: 1.0e8\n  epochs: 2\nhardware:\n  gpu: A100-80GB\n",
         "training.epochs applies to training.samples"),
        ("model:\n  name: llama2-7b\ntraining:\n  micro_batch_size: eight\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n",
         "training.micro_batch_size must be a number"),
        ("model:\n  name: llama2-7b\ntraining:\n  micro_batch_size: 2.5\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n",
         "training.micro_batch_size must be a whole number"),
        ("model:\n  name: llama2-7b\ntraining:\n  activation_checkpointing: yes please\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n",
         "training.activation_checkpointing must be true or false"),
        ("model:\n  name: llama2-7b\ntraining:\n  precision: fp4\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n",
         "training.precision must be one of"),
        ("model:\n  name: llama2-7b\ntraining:\n  micro_batch_size: -1\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n",
         "training.micro_batch_size must be between 1 and 1,000,000,000, got -1"),
        ("model:\n  name: resnet50\ntraining:\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n",
         "training.tokens applies to token models"),
    ],
)
def test_bad_values_are_one_line_config_errors(tmp_path, text, expected):
    with pytest.raises(ConfigError) as err:
        load_workload(write(tmp_path, text))
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_missing_amount_of_data_names_training_tokens_and_the_flags():
    with pytest.raises(ConfigError, match=r"training\.tokens .*--tokens/--rows/--dataset"):
        load_workload(FIX / "native_missing_tokens.yaml")


def test_unknown_names_are_catalog_errors_with_suggestions(tmp_path):
    cfg = write(tmp_path, (FIX / "native_minimal.yaml").read_text().replace("A100-80GB", "A100-80G"))
    with pytest.raises(CatalogError, match="did you mean A100-80GB"):
        load_workload(cfg)
    with pytest.raises(CatalogError, match="llama2-7b"):
        load_workload(FIX / "native_minimal.yaml", overrides=["model.name=lama2-7b"])


@pytest.mark.parametrize(
    "make,expected",
    [
        (lambda d: d / "nope.yaml", "does not exist"),
        (lambda d: d, "is a directory"),
        (lambda d: write(d, "model: [unclosed"), "is not valid YAML at line"),
        (lambda d: write(d, ""), "is empty"),
        (lambda d: write(d, "- a\n- b\n"), "must hold a mapping"),
    ],
)
def test_unreadable_files_are_one_line_config_errors(tmp_path, make, expected):
    with pytest.raises(ConfigError) as err:
        load_workload(make(tmp_path))
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_overrides_use_native_key_paths_and_yaml_scalars():
    w = load_workload(
        FIX / "native_full.yaml",
        overrides=["training.micro_batch_size=16", "training.activation_checkpointing=false",
                   "training.lora_r=null", "hardware.num_gpus=4", "hardware.num_nodes=1", "framework=composer-fsdp"],
    )
    assert w.training.micro_batch_size == 16 and w.training.activation_checkpointing is False
    assert w.training.lora_r is None  # null unsets the key
    assert w.parallel.num_gpus == 4 and w.framework == "composer"


def test_flags_beat_overrides_beat_the_file():
    w = load_workload(FIX / "native_full.yaml", overrides=["hardware.gpu=cpu", "hardware.num_gpus=2", "hardware.num_nodes=1"],
                      gpu="A100-80GB", num_gpus=4)
    assert w.gpu.name == "A100-80GB" and w.parallel.num_gpus == 4
    w = load_workload(FIX / "native_full.yaml", tokens=1e6)
    assert w.training.tokens == 1e6
    w = load_workload(FIX / "native_custom_dims.yaml", rows=5000)
    assert (w.training.samples, w.training.epochs) == (5000, 2)
    assert any("replaces training.samples" in a for a in w.assumptions)


def test_rows_flag_without_epochs_assumes_one_epoch():
    w = load_workload(FIX / "native_minimal.yaml", rows=1000)
    assert (w.training.samples, w.training.epochs, w.training.tokens) == (1000, 1, None)
    assert "training.epochs not given: assumed 1" in w.assumptions


@pytest.mark.parametrize(
    "kwargs,expected",
    [
        ({"overrides": ["training.lora_rank=8"]}, "unknown key training.lora_rank"),
        ({"overrides": ["training.micro_batch_size"]}, "must look like section.key=value"),
        ({"overrides": ["training.micro_batch_size="]}, "has no value"),
        ({"overrides": ["gpu=A100-80GB"]}, "unknown section 'gpu'"),
        ({"tokens": 1e6, "rows": 10}, "only one of --tokens, --rows, --dataset"),
        ({"rows": 0}, "--rows must be a whole number > 0"),
        ({"tokens": -5.0}, "--tokens must be > 0"),
    ],
)
def test_bad_flags_are_config_errors(kwargs, expected):
    with pytest.raises(ConfigError, match=expected):
        load_workload(FIX / "native_minimal.yaml", **kwargs)


def test_a_run_described_by_overrides_alone():
    w = load_workload(None, overrides=["model.name=llama2-7b", "training.tokens=1e9", "hardware.gpu=A100-80GB"])
    assert w.model.name == "llama2-7b" and w.training.tokens == 1e9


def test_resolved_config_is_native_and_loads_back_to_the_same_workload(tmp_path):
    resolved = resolve_config(FIX / "native_minimal.yaml", num_gpus=2)
    assert set(resolved) == {"model", "training", "hardware", "framework"}
    assert detect_format(resolved) == "native"
    assert resolved["training"]["precision"] == "bf16" and resolved["hardware"]["num_gpus"] == 2
    again = load_workload(write(tmp_path, yaml.safe_dump(resolved)))
    first = load_workload(FIX / "native_minimal.yaml", num_gpus=2)
    assert (again.model, again.training, again.parallel, again.gpu.name) == (first.model, first.training, first.parallel, first.gpu.name)
    assert again.assumptions == ()
    assert workload_to_native(again) == resolved


def test_every_error_is_a_perfmodel_error(tmp_path):
    for text in ("model: {name: llama2-7b}\n", "hardware: {gpu: nosuch}\nmodel: {name: llama2-7b}\ntraining: {tokens: 1}\n"):
        with pytest.raises(PerfModelError):
            load_workload(write(tmp_path, text))


# --- every problem at once, ranges, names, Hugging Face keys, derived defaults, the reference --------

ROOT = Path(__file__).resolve().parents[1]
MINIMAL = "model:\n  name: llama2-7b\ntraining:\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n"


def test_every_problem_in_every_section_is_reported_at_once(tmp_path):
    text = ("model:\n  name: llama2-7b\n  hidden_sise: 4096\ntraining:\n  micro_batch_size: -2\n  tokens: 1.0e8\n"
            "hardware:\n  gpu: nosuchgpu\n  num_gpus: 1.0e9\nframework: hf-eagr\n")
    with pytest.raises(ConfigError) as err:
        load_workload(write(tmp_path, text))
    problems = err.value.problems
    assert len(problems) == 5, problems
    for needle in ("model.hidden_sise", "training.micro_batch_size", "unknown GPU 'nosuchgpu'", "hardware.num_gpus",
                   "framework must be a known stack"):
        assert sum(needle in p for p in problems) == 1, needle
    lines = str(err.value).splitlines()
    assert lines[0] == f"5 problems in {tmp_path / 'run.yaml'}:" and len(lines) == 6  # long: one line each


def test_a_few_short_problems_stay_on_one_line(tmp_path):
    text = MINIMAL.replace("  tokens: 1.0e8\n", "  tokens: 1.0e8\n  seq_len: 0\n  lora_r: x\n")
    with pytest.raises(ConfigError) as err:
        load_workload(write(tmp_path, text, "r.yaml"))
    message = str(err.value)
    assert "\n" not in message and message.startswith("2 problems in ") and "; " in message
    assert "training.seq_len must be between 1 and" in message and "training.lora_r must be a number" in message


@pytest.mark.parametrize(
    "patch,expected",
    [
        ("model:\n  name: x\n  hidden_size: 1e300\n  num_layers: 2\n  num_heads: 2\n", "model.hidden_size must be between 1 and"),
        ("model:\n  name: x\n  hidden_size: .nan\n  num_layers: 2\n  num_heads: 2\n", "model.hidden_size must be a finite number"),
        ("model:\n  name: x\n  hidden_size: .inf\n  num_layers: 2\n  num_heads: 2\n", "model.hidden_size must be a finite number"),
        ("model:\n  name: x\n  hidden_size: 64\n  num_layers: 2\n  num_heads: 2\n  vocab_size: 1" + "0" * 400 + "\n",
         "model.vocab_size must be between 0 and 10,000,000"),
    ],
)
def test_numbers_must_be_finite_and_physical(tmp_path, patch, expected):
    text = patch + "training:\n  tokens: 1.0e8\nhardware:\n  gpu: A100-80GB\n"
    with pytest.raises(ConfigError) as err:
        load_workload(write(tmp_path, text))
    assert expected in str(err.value) and len(str(err.value)) < 300


def test_flags_out_of_range_name_the_flag():
    with pytest.raises(ConfigError, match="hardware.num_gpus must be between 1 and 1,000,000"):
        load_workload(FIX / "native_minimal.yaml", num_gpus=10**9)
    with pytest.raises(ConfigError, match="--tokens must be between 1 and"):
        load_workload(FIX / "native_minimal.yaml", tokens=1e300)


def test_unknown_framework_gets_close_matches(tmp_path):
    with pytest.raises(ConfigError, match="got 'hf-eagr'; did you mean hf-eager"):
        load_workload(FIX / "native_minimal.yaml", overrides=["framework=hf-eagr"])
    assert load_workload(FIX / "native_minimal.yaml", overrides=["framework=megatron"]).framework == "megatron"


def test_duplicate_keys_are_refused_naming_the_path_and_lines(tmp_path):
    with pytest.raises(ConfigError, match=r"duplicate key training at line 5 \(first at line 3\)"):
        load_workload(write(tmp_path, MINIMAL.replace("hardware:", "training:\n  seq_len: 128\nhardware:")))
    with pytest.raises(ConfigError, match=r"duplicate key training\.tokens at line 5 \(first at line 4\)"):
        load_workload(write(tmp_path, MINIMAL.replace("  tokens: 1.0e8\n", "  tokens: 1.0e8\n  tokens: 2.0e8\n")))


def test_gpu_alias_resolution_is_an_assumption():
    w = load_workload(FIX / "native_minimal.yaml", gpu="H100")
    assert w.gpu.name == "H100-SXM"
    assert any(a.startswith("hardware.gpu H100 resolved to H100-SXM") for a in w.assumptions)
    assert not any("resolved" in a for a in load_workload(FIX / "native_minimal.yaml", gpu="h100-sxm").assumptions)


# HGX / DGX servers hold 8 GPUs; a GB200 NVL72 compute tray holds 4 (NVIDIA's system descriptions).
@pytest.mark.parametrize("gpu,num_gpus,nodes", [("H100-SXM", 16, 2), ("H100-SXM", 24, 3), ("GB200", 16, 4), ("A100-80GB", 8, 1)])
def test_num_nodes_comes_from_the_catalogs_gpus_per_server(gpu, num_gpus, nodes):
    w = load_workload(FIX / "native_minimal.yaml", gpu=gpu, num_gpus=num_gpus)
    assert w.parallel.num_nodes == nodes
    assert any(a.startswith(f"hardware.num_nodes not given: assumed {w.parallel.num_nodes}") for a in w.assumptions)
    given = load_workload(FIX / "native_minimal.yaml", gpu=gpu, num_gpus=num_gpus, overrides=[f"hardware.num_nodes={nodes}"])
    assert given.parallel.num_nodes == nodes and not any("num_nodes" in a for a in given.assumptions)


@pytest.mark.parametrize("num_gpus,nodes", [(9, 3), (12, 2), (10, 2), (17, 17), (7, 1)])
def test_a_count_that_does_not_fill_servers_is_split_evenly_over_the_fewest(num_gpus, nodes):
    """The fewest 8-GPU servers that hold the count with the same number on each."""
    w = load_workload(FIX / "native_minimal.yaml", gpu="H100-SXM", num_gpus=num_gpus)
    assert w.parallel.num_nodes == nodes and w.parallel.gpus_per_node <= 8


@pytest.mark.parametrize("num_gpus,nodes,need", [(64, 1, 8), (1_000_000, 1, 125_000), (24, 2, 3), (8, 1, 2)])
def test_explicit_nodes_that_cannot_hold_the_gpus_are_an_error_naming_both_keys(num_gpus, nodes, need):
    gpu = "GB200" if num_gpus == 8 else "A100-80GB"  # a GB200 NVL72 compute tray holds 4
    with pytest.raises(ConfigError) as err:
        load_workload(FIX / "native_minimal.yaml", gpu=gpu, num_gpus=num_gpus, overrides=[f"hardware.num_nodes={nodes}"])
    message = str(err.value)
    assert f"hardware.num_gpus ({num_gpus}) does not fit on hardware.num_nodes ({nodes})" in message
    assert f"--set hardware.num_nodes={need}" in message and "leave it out to derive it" in message


def test_explicit_dims_without_gated_mlp_say_what_was_assumed(tmp_path):
    dims = "model:\n  name: mine\n  hidden_size: 1024\n  num_layers: 4\n  num_heads: 8\n"
    w = load_workload(write(tmp_path, dims + MINIMAL.split("\n", 2)[2]))
    assert w.model.gated_mlp is False and any(a.startswith("model.gated_mlp not given: assumed false") for a in w.assumptions)
    w = load_workload(write(tmp_path, dims + "  gated_mlp: true\n" + MINIMAL.split("\n", 2)[2]))
    assert w.model.gated_mlp is True and not any("gated_mlp" in a for a in w.assumptions)
    assert not any("gated_mlp" in a for a in load_workload(FIX / "native_minimal.yaml").assumptions)  # catalog model


def test_hugging_face_training_arguments_map_one_to_one(tmp_path):
    text = MINIMAL.replace("  tokens: 1.0e8\n", "  samples: 1000\n  per_device_train_batch_size: 4\n"
                           "  gradient_accumulation_steps: 2\n  num_train_epochs: 3\n  bf16: true\n"
                           "  gradient_checkpointing: true\n  optim: adamw_torch_fused\n  learning_rate: 2.0e-5\n")
    w = load_workload(write(tmp_path, text))
    t = w.training
    assert (t.micro_batch_size, t.grad_accum_steps, t.epochs, t.samples) == (4, 2, 3, 1000)
    assert (t.precision, t.activation_checkpointing, t.optimizer) == ("amp_bf16", True, "adamw")  # mixed, not pure bf16
    text_lines = "\n".join(w.assumptions)
    for needle in ("per_device_train_batch_size (Hugging Face TrainingArguments) read as training.micro_batch_size = 4",
                   "read as training.precision = amp_bf16", "training.learning_rate", "optim adamw_torch_fused"):
        assert needle in text_lines, needle
    fp16 = load_workload(write(tmp_path, MINIMAL.replace("  tokens", "  fp16: true\n  tokens")))
    assert fp16.training.precision == "amp_fp16"
    plain = load_workload(write(tmp_path, MINIMAL.replace("  tokens", "  bf16: false\n  tokens")))
    assert plain.training.precision == "fp32"  # Hugging Face trains in fp32 unless told otherwise


def test_max_steps_overrides_epochs_as_in_transformers(tmp_path):
    w = load_workload(write(tmp_path, MINIMAL.replace("  tokens: 1.0e8\n", "  max_steps: 500\n  num_train_epochs: 3\n")))
    assert (w.training.steps, w.training.epochs) == (500, None)
    w = load_workload(write(tmp_path, MINIMAL.replace("  tokens: 1.0e8\n", "  tokens: 1.0e8\n  max_steps: -1\n")))
    assert w.training.steps is None and w.training.tokens == 1e8


@pytest.mark.parametrize(
    "keys,expected",
    [
        ("  per_device_train_batch_size: 4\n  micro_batch_size: 8\n", "set the same thing: give one"),
        ("  bf16: true\n  precision: bf16\n", "training.bf16 and training.precision set the same thing"),
        ("  bf16: true\n  fp16: true\n", "both true: choose one"),
        ("  optim: adamw_torch_4bit\n", "4-bit optimizer state is not modelled; use training.optimizer_state: 8bit"),
        ("  optim: paged_adamw_8bit\n  optimizer_state: fp32\n", "training.optim and training.optimizer_state set the same thing"),
        ("  optim: rmsprop\n", "no one-to-one native optimizer"),
        ("  deepspeed: ds.json\n", "use hardware.strategy (zero1, zero2 or zero3)"),
        ("  per_device_eval_batch_size: 8\n", "use training.eval_fraction"),
        ("  bf16: yes please\n", "training.bf16 must be true or false"),
    ],
)
def test_hugging_face_keys_without_a_one_to_one_meaning_are_refused(tmp_path, keys, expected):
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_workload(write(tmp_path, MINIMAL.replace("  tokens", keys + "  tokens")))


def test_set_of_one_spelling_replaces_the_files_other_spelling(tmp_path):
    cfg = write(tmp_path, MINIMAL.replace("  tokens", "  per_device_train_batch_size: 4\n  bf16: true\n  tokens"))
    w = load_workload(cfg, overrides=["training.micro_batch_size=16", "training.precision=fp32"])
    assert (w.training.micro_batch_size, w.training.precision) == (16, "fp32")
    w = load_workload(FIX / "native_full.yaml", overrides=["training.per_device_train_batch_size=2", "training.fp16=true"])
    assert (w.training.micro_batch_size, w.training.precision) == (2, "amp_fp16")


def test_the_config_reference_in_docs_is_generated_from_the_code():
    from perfmodel.config.docs import render

    doc = ROOT / "docs" / "config.md"
    assert doc.read_text() == render(), "docs/config.md is stale: run `python -m perfmodel.config.docs > docs/config.md`"


def test_the_config_reference_lists_every_key_the_loader_accepts():
    from perfmodel.config import hf_args
    from perfmodel.config.docs import render
    from perfmodel.config.native import schema

    text = (ROOT / "docs" / "config.md").read_text() if (ROOT / "docs" / "config.md").is_file() else render()
    for section, keys in schema().items():  # the validator's own key set is the oracle
        for key in keys:
            assert f"`{section}.{key}`" in text, f"{section}.{key}"
    for key in hf_args.KEYS:
        assert f"`{key}" in text, key
    assert "| `framework` |" in text


@pytest.mark.parametrize(
    "raw",
    ["16", "0", "-3", "1_000", "1e3", "-0", "+5", "12345678901234567890", "fsdp", "A100-80GB",
     "amp_bf16", "nan", "inf", ".inf", "yes", "No", "ON", "off", "null", "Null", "~", "y", "N", "true", "FALSE",
     "n-1", "[a, b]", "0.5", " 8 ", "'16'"],
)  # fmt: skip
def test_an_override_value_reads_as_the_yaml_loader_reads_it(raw):
    """`--set` values skip the YAML loader when plain (an integer, a word); the answer is the same."""
    from perfmodel.config.overrides import parse_override
    from perfmodel.safe_yaml import load_yaml_text

    _, value = parse_override(f"training.x={raw}")
    expected = load_yaml_text(raw, source="test")
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    "optim,optimizer,state",
    [("paged_adamw_8bit", "adamw", "paged-8bit"), ("adamw_bnb_8bit", "adamw", "8bit"),
     ("paged_adamw_32bit", "adamw", "paged-fp32"), ("adamw_torch_fused", "adamw", "fp32"), ("lion_8bit", "lion", "8bit")],
)
def test_hugging_face_optim_sets_the_optimizer_and_its_state_format(tmp_path, optim, optimizer, state):
    w = load_workload(write(tmp_path, MINIMAL.replace("  tokens", f"  optim: {optim}\n  tokens")))
    assert (w.training.optimizer, w.training.optimizer_state) == (optimizer, state)
    assert any(f"training.optimizer_state = {state}" in a for a in w.assumptions)


@pytest.mark.parametrize("raw,base", [("017", 8), ("-017", 8), ("0x100", 16), ("0b101", 2), ("1:30", 60), ("1:30.5", 60), ("[512, 0x10]", 16)])
def test_set_numbers_are_decimal_only(raw, base):
    """YAML 1.1 reads 017 as 15 and 0x100 as 256: on the command line that is an error naming the key."""
    with pytest.raises(ConfigError, match=rf"--set 'training\.seq_len=.*': .* is not a decimal number \(YAML would read it in base {base}\)"):
        load_workload(FIX / "native_minimal.yaml", overrides=[f"training.seq_len={raw}"])


@pytest.mark.parametrize("raw,value", [("17", 17), ("+17", 17), ("1_024", 1024), ("1.5e3", 1500), ("'017'", 17)])
def test_set_decimal_numbers_and_quoted_digits_are_read_as_written(raw, value):
    assert load_workload(FIX / "native_minimal.yaml", overrides=[f"training.seq_len={raw}"]).training.seq_len == value


def test_a_config_file_keeps_yamls_reading_of_numbers(tmp_path):
    """Only command-line values are held to decimal: a YAML file means what YAML 1.1 says (017 = 15)."""
    w = load_workload(write(tmp_path, MINIMAL.replace("  tokens: 1.0e8\n", "  tokens: 1.0e8\n  seq_len: 017\n")))
    assert w.training.seq_len == 15


def test_vary_numbers_are_decimal_only_too():
    from perfmodel.decide.sweep import parse_vary

    assert parse_vary("training.seq_len=512,1024") == ("training.seq_len", [512, 1024])
    with pytest.raises(ConfigError, match=r"--vary 'training\.seq_len=512,017': 017 is not a decimal number"):
        parse_vary("training.seq_len=512,017")


@pytest.mark.parametrize("gpu,precision,said", [("A100-80GB", "fp32", True), ("A100-80GB", "tf32", False),
                                                 ("V100-16GB", "fp32", False), ("H200", "fp32", True)])  # fmt: skip
def test_an_fp32_cnn_on_a_tf32_gpu_says_pytorch_runs_its_convolutions_in_tf32(tmp_path, gpu, precision, said):
    """PyTorch's torch.backends.cudnn.allow_tf32 defaults to True (docs, notes/cuda.rst "TensorFloat-32
    (TF32) on Ampere (and later) devices"), so a ResNet told 'fp32' runs its convolutions in TF32 on an
    A100 or H200 (156 and 495 TFLOP/s against 19.5 and 67 fp32); a V100 has no TF32."""
    text = f"model:\n  name: resnet50\ntraining:\n  precision: {precision}\n  micro_batch_size: 64\n  samples: 1.0e5\nhardware:\n  gpu: {gpu}\n"
    w = load_workload(write(tmp_path, text))
    lines = [a for a in w.assumptions if "cudnn.allow_tf32" in a]
    assert bool(lines) is said
    if said:
        assert "training.precision: tf32" in lines[0] and gpu in lines[0]


def test_a_16bit_cnn_on_an_accelerator_says_it_assumed_nchw_unless_told():
    """PyTorch's default memory format is NCHW, which the plan costs as transpositions around each
    16-bit convolution: a config that does not say training.channels_last is told so; one that says
    it either way, an fp32 run and a CPU run are not."""
    def said(training: dict, gpu: str = "A100-80GB") -> bool:
        cfg = {"model": {"name": "resnet50"}, "hardware": {"gpu": gpu},
               "training": {"micro_batch_size": 64, "samples": 1e5, **training}}  # fmt: skip
        return any(a.startswith("training.channels_last not given") for a in load_workload(cfg).assumptions)

    assert said({"precision": "amp_bf16"}) and said({"precision": "fp16"})
    assert not said({"precision": "amp_bf16", "channels_last": False})
    assert not said({"precision": "amp_bf16", "channels_last": True})
    assert not said({"precision": "fp32"}) and not said({"precision": "bf16"}, gpu="cpu")
