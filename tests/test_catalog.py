"""The accelerator and model catalogs: every file loads, cites its numbers, and resolves by key,
alias, Hugging Face id and case-insensitively; unknown names fail with a close match."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from perfmodel.catalog import (
    CATALOG_DIR,
    get_gpu,
    get_model,
    gpu_names,
    model_names,
    resolve_gpu_key,
    resolve_model_key,
)
from perfmodel.errors import CatalogError
from perfmodel.workload import GPUSpec, ModelSpec

GPU_FILES = sorted((CATALOG_DIR / "gpus").glob("*.yaml"))
MODEL_FILES = sorted((CATALOG_DIR / "models").glob("*.yaml"))

REQUIRED_GPUS = """A100-40GB A100-80GB A100-PCIe-40GB A100-PCIe-80GB H100-SXM H100-PCIe H100-NVL H200 H800 GH200 B200
GB200 B300 L4 L40S L40 A10G A10 A40 T4 V100-16GB V100-32GB V100-PCIe-16GB P100 P4 RTX-3090 RTX-3080 RTX-4090
RTX-A6000 RTX-6000-Ada RTX-2080Ti Titan-RTX Quadro-RTX-8000 GTX-1080Ti MI100 MI210 MI250 MI250X MI300X MI325X
Gaudi2 Gaudi3""".split()

REQUIRED_MODELS = """llama2-7b llama2-13b llama2-70b llama3-8b llama3-70b llama3.1-8b llama3.1-70b llama3.1-405b
llama3.2-1b llama3.2-3b mistral-7b mixtral-8x7b mixtral-8x22b qwen2.5-0.5b qwen2.5-1.5b qwen2.5-7b qwen2.5-14b
qwen2.5-32b qwen2.5-72b gemma2-2b gemma2-9b gemma2-27b phi-2 phi-3-mini gpt2 gpt2-medium gpt2-large gpt2-xl gpt3-xl
gpt3-2.7b gpt3-175b gpt3-5b gpt3-20b opt-1.3b opt-6.7b opt-175b bloom-560m bloom-3b bloom-7b1 bloom-176b falcon-7b
falcon-40b mpt-7b mpt-30b mpt-125m mpt-350m mpt-760m mpt-1b mpt-3b mpt-13b mpt-70b nemotron4-15b nemotron4-340b
bert-base bert-large roberta-base roberta-large distilbert t5-small t5-base t5-large vit-b16 resnet18
resnet50""".split()

# Generations whose hardware has no TF32 / BF16 / FP8 matrix support (the loader must not invent them).
NO_TF32 = {"Pascal", "Volta", "Turing", "CDNA1", "CDNA2"}
NO_BF16 = {"Pascal", "Volta", "Turing"}
HAS_FP8 = {"Hopper", "Ada", "Blackwell", "CDNA3", "Gaudi2", "Gaudi3"}


def _norm(name: str) -> str:
    """The documented lookup normalisation: case-insensitive, '_' and ' ' read as '-'."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def _raw(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


# --- every file loads ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.stem)
def test_every_gpu_file_loads_with_sane_units(path: Path) -> None:
    raw = _raw(path)
    assert raw["name"] == path.stem, "the file name is the key users type; 'name' must match it"
    gpu = get_gpu(path.stem)
    assert isinstance(gpu, GPUSpec)
    assert gpu.name == path.stem
    assert gpu.vendor in ("nvidia", "amd", "intel")
    assert 8 <= gpu.memory_gb <= 300
    assert 150 <= gpu.hbm_bandwidth_gb_per_s <= 10_000
    assert 1 <= gpu.intra_node_bandwidth_gb_per_s <= 1_000
    assert 0 < gpu.inter_node_bandwidth_gb_per_s <= 200
    assert 50 <= gpu.tdp_w <= 1_500
    assert 2016 <= gpu.release_year <= 2026
    assert 1 <= gpu.l2_cache_mb <= 256, "on-chip L2 (or SRAM) in MB, with its source: the kernel table reads it"
    assert gpu.generation
    assert gpu.peak_tflops and all(v > 0 for v in gpu.peak_tflops.values())
    assert set(gpu.peak_tflops) <= {"fp32", "tf32", "bf16", "fp16", "fp8", "int8"}


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.stem)
def test_every_gpu_file_cites_its_peaks_and_bandwidth(path: Path) -> None:
    sources = _raw(path).get("sources") or {}
    for field in ("peak_tflops", "hbm_bandwidth_gb_per_s", "l2_cache_mb"):
        assert isinstance(sources.get(field), str) and len(sources[field]) > 10, (
            f"{path.name}: no source for {field}"
        )


@pytest.mark.parametrize("path", GPU_FILES, ids=lambda p: p.stem)
def test_precisions_follow_the_hardware(path: Path) -> None:
    gpu = get_gpu(path.stem)
    if gpu.generation in NO_TF32:
        assert "tf32" not in gpu.peak_tflops, (
            "no TF32 hardware: leave tf32 out (the fp32 fallback lives in code)"
        )
    if gpu.generation in NO_BF16:
        assert "bf16" not in gpu.peak_tflops
    if "fp8" in gpu.peak_tflops:
        assert gpu.generation in HAS_FP8
    # Tensor-core precisions are never slower than plain fp32 on the same chip.
    for dtype in ("tf32", "bf16", "fp16", "fp8"):
        if dtype in gpu.peak_tflops and "fp32" in gpu.peak_tflops:
            assert gpu.peak_tflops[dtype] >= gpu.peak_tflops["fp32"]


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_every_model_file_loads(path: Path) -> None:
    raw = _raw(path)
    assert raw["name"] == path.stem
    assert raw.get("source"), f"{path.name}: say where the numbers come from"
    model = get_model(path.stem)
    assert isinstance(model, ModelSpec)
    assert model.name == path.stem
    assert model.family and model.family != "custom"
    if model.is_transformer:
        assert model.vocab_size is not None and model.ffn_hidden_size
        assert model.num_kv_heads and model.num_heads % model.num_kv_heads == 0
    else:
        assert model.params_total and model.forward_gflops_per_sample and model.reference_input


# --- published parameter counts agree with the dimensions ---------------------------------------


def _params_from_dims(e: dict) -> float:
    """Weights of the attention, MLP and embedding matrices (norms and biases ignored)."""
    d, layers, heads = e["hidden_size"], e["num_layers"], e["num_heads"]
    kv = e.get("num_kv_heads") or heads
    attn = 2 * d * d + 2 * d * kv * (d // heads)
    mlp = (3 if e.get("gated_mlp") else 2) * d * e["ffn_hidden_size"] * e.get("num_experts", 1)
    total = layers * (attn + mlp)
    if e["arch"] == "encoder-decoder":  # decoder blocks add cross-attention
        total += (layers // 2) * 4 * d * d
    total += e["vocab_size"] * d * (1 if e.get("tied_embeddings") else 2)
    total += e.get("learned_pos_embeddings", 0) * d
    return total


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_published_params_match_the_dimensions(path: Path) -> None:
    raw = _raw(path)
    if "published_params" not in raw:
        # Only non-transformers, NeuSight's unofficial variant, and Falcon-40B (published only as '40B', 3% off).
        assert raw["arch"] in ("cnn", "mlp") or raw["name"] in ("gpt3-xl-neusight", "falcon-40b")
        return
    published = raw["published_params"]
    assert isinstance(published, float), "write published_params as a YAML float, e.g. 6.74e+9"
    # 6%: published counts are rounded ('7B') and the estimate ignores norms, biases and head_dim quirks.
    assert _params_from_dims(raw) == pytest.approx(published, rel=0.06)


def test_published_figures_pinned() -> None:
    """A few numbers everyone quotes, so a typo in a key file cannot slip through."""
    assert get_gpu("A100-80GB").peak_tflops["bf16"] == 312
    assert get_gpu("H100-SXM").peak_tflops["bf16"] == 989
    assert get_gpu("H100-SXM").hbm_bandwidth_gb_per_s == 3350
    assert get_gpu("V100-16GB").peak_tflops["fp16"] == 125
    assert get_gpu("MI300X").peak_tflops["bf16"] == pytest.approx(1307.4)
    llama = get_model("llama3-8b")
    assert (llama.hidden_size, llama.num_layers, llama.num_kv_heads, llama.vocab_size) == (
        4096,
        32,
        8,
        128256,
    )
    assert get_model("gpt2").learned_pos_embeddings == 1024
    assert get_model("t5-base").num_layers == 24  # encoder + decoder
    assert get_model("mixtral-8x7b").experts_per_token == 2


# --- names --------------------------------------------------------------------------------------


def test_catalogs_are_big_enough_and_complete() -> None:
    gpus = [g for g in gpu_names() if g != "cpu"]
    models = model_names()
    assert len(gpus) >= 15 and len(models) >= 30
    assert not set(REQUIRED_GPUS) - set(gpus)
    assert not set(REQUIRED_MODELS) - set(models)


@pytest.mark.parametrize("kind,files", [("gpus", GPU_FILES), ("models", MODEL_FILES)])
def test_no_alias_maps_to_two_keys(kind: str, files: list[Path]) -> None:
    owners: dict[str, set[str]] = {}
    for path in files:
        raw = _raw(path)
        names = [path.stem, *(raw.get("aliases") or [])]
        if raw.get("hf_id"):
            names.append(raw["hf_id"])
        for name in names:
            owners.setdefault(_norm(str(name)), set()).add(path.stem)
    clashes = {alias: keys for alias, keys in owners.items() if len(keys) > 1}
    assert not clashes, f"{kind}: aliases claimed by several files: {clashes}"


@pytest.mark.parametrize(
    "spelling,key",
    [
        ("a100_80gb", "A100-80GB"),
        ("A100 80GB", "A100-80GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA_A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA_A100-PCIE-40GB", "A100-PCIe-40GB"),
        ("NVIDIA_A100_80GB_PCIe", "A100-PCIe-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("H100 SXM5", "H100-SXM"),
        ("DGX-H100", "H100-SXM"),
        ("h100_80gb", "H100-SXM"),
        ("Lambda Cloud H100 PCIe", "H100-PCIe"),
        ("H100 NVL Tensor Core GPU (PCIe)", "H100-NVL"),
        ("NVIDIA H200-SXM5-141GB", "H200"),
        ("NVIDIA Blackwell GPU (B200-SXM-180GB)", "B200"),
        ("DGX-GB200", "GB200"),
        ("AMD_Instinct_MI100", "MI100"),
        ("AMD Instinct MI300X 192GB HBM3", "MI300X"),
        ("Tesla_V100-SXM2-16GB", "V100-16GB"),
        ("V100 32GB", "V100-32GB"),
        ("Tesla_V100-PCIE-32GB", "V100-PCIe-32GB"),
        ("Tesla_P100-PCIE-16GB", "P100"),
        ("Tesla_T4", "T4"),
        ("NVIDIA_L4", "L4"),
        ("RTX 3090", "RTX-3090"),
        ("GeForce RTX 4090", "RTX-4090"),
        ("Ada A6000", "RTX-6000-Ada"),
        ("RTX Quadro 8000", "Quadro-RTX-8000"),
        ("Habana Gaudi2", "Gaudi2"),
    ],
)
def test_gpu_lookup_by_public_spelling(spelling: str, key: str) -> None:
    assert resolve_gpu_key(spelling) == key
    assert get_gpu(spelling).name == key


def test_gpu_lookup_is_case_insensitive() -> None:
    assert get_gpu("h100-sxm").name == get_gpu("H100-SXM").name == "H100-SXM"
    assert get_gpu("mi250x").name == "MI250X"
    assert get_gpu("gaudi3").name == "Gaudi3"


@pytest.mark.parametrize(
    "spelling,key",
    [
        ("meta-llama/Llama-2-7b-hf", "llama2-7b"),
        ("meta-llama/Meta-Llama-3.1-8B", "llama3.1-8b"),
        ("Qwen/Qwen2.5-7B", "qwen2.5-7b"),
        ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
        ("LLAMA3-8B", "llama3-8b"),
        ("LLAMA3.1_405B", "llama3.1-405b"),
        ("Llama 3.1 8B", "llama3.1-8b"),
        ("GPT3-175B", "gpt3-175b"),
        ("gpt3_27", "gpt3-2.7b"),
        ("opt_13", "opt-1.3b"),
        ("bert_large", "bert-large"),
        ("bert_base_squad", "bert-base"),
        ("Nemotron-340B", "nemotron4-340b"),
        ("google/vit-base-patch16-224", "vit-b16"),
    ],
)
def test_model_lookup_by_alias_hf_id_and_case(spelling: str, key: str) -> None:
    assert resolve_model_key(spelling) == key
    assert get_model(spelling).name == key


def test_unknown_gpu_suggests_a_close_match() -> None:
    with pytest.raises(CatalogError) as err:
        get_gpu("A100-80G")
    assert "A100-80GB" in str(err.value)
    assert isinstance(err.value, KeyError)  # callers may catch the builtin


def test_unknown_model_suggests_a_close_match() -> None:
    with pytest.raises(CatalogError) as err:
        get_model("llama2-7")
    assert "llama2-7b" in str(err.value)


# --- Hugging Face config.json -------------------------------------------------------------------


def _write(path: Path, cfg: dict) -> Path:
    path.write_text(json.dumps(cfg))
    return path


def test_hf_config_json_decoder(tmp_path: Path) -> None:
    cfg = {
        "_name_or_path": "tiny-llama",
        "model_type": "llama",
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "intermediate_size": 688,
        "vocab_size": 1000,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "max_position_embeddings": 2048,
    }
    file = _write(tmp_path / "config.json", cfg)
    for where in (tmp_path, file):  # a directory holding config.json, or the file itself
        model = get_model(str(where))
        assert model.arch == "decoder"
        assert (model.hidden_size, model.num_layers, model.num_heads, model.num_kv_heads) == (256, 4, 8, 2)
        assert (model.ffn_hidden_size, model.vocab_size) == (688, 1000)
        assert model.gated_mlp and not model.tied_embeddings
        assert model.learned_pos_embeddings == 0  # rotary


def test_hf_config_json_moe(tmp_path: Path) -> None:
    cfg = {
        "model_type": "mixtral",
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 256,
        "vocab_size": 500,
        "hidden_act": "silu",
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    }
    model = get_model(str(_write(tmp_path / "config.json", cfg)))
    assert (model.num_experts, model.experts_per_token) == (8, 2)


def test_hf_config_json_encoder_and_encoder_decoder(tmp_path: Path) -> None:
    bert = {
        "model_type": "bert",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "vocab_size": 300,
        "hidden_act": "gelu",
        "max_position_embeddings": 128,
    }
    (tmp_path / "bert").mkdir()
    model = get_model(str(_write(tmp_path / "bert" / "config.json", bert)))
    assert model.arch == "encoder" and not model.gated_mlp
    assert model.learned_pos_embeddings == 128

    t5 = {
        "model_type": "t5",
        "d_model": 64,
        "num_layers": 3,
        "num_decoder_layers": 3,
        "num_heads": 4,
        "d_ff": 256,
        "vocab_size": 320,
        "feed_forward_proj": "relu",
    }
    (tmp_path / "t5").mkdir()
    model = get_model(str(_write(tmp_path / "t5" / "config.json", t5)))
    assert model.arch == "encoder-decoder"
    assert model.num_layers == 6  # encoder + decoder
    assert (model.hidden_size, model.ffn_hidden_size) == (64, 256)


def test_gpu_counts_map_to_servers_by_the_catalogs_gpus_per_server():
    from perfmodel.catalog import get_gpu

    assert [get_gpu("H100-SXM").servers_for(n) for n in (1, 8, 12, 512)] == [1, 1, 2, 64]
    assert [get_gpu("GB200").servers_for(n) for n in (4, 128)] == [1, 32]  # NVL72 compute trays of 4


# --- extra accelerators for tests, names that resolve, the Hugging Face cache, measured hosts -----


def test_extra_gpus_resolve_only_inside_the_block() -> None:
    from perfmodel.catalog import use_extra_gpus

    fake = GPUSpec(name="synth-z1", memory_gb=24.0, peak_tflops={"bf16": 100.0}, aliases=("z1",))
    shadow = GPUSpec(name="T4", memory_gb=1.0, peak_tflops={"fp16": 1.0})
    assert resolve_gpu_key("synth-z1") is None
    with use_extra_gpus([fake]):
        assert get_gpu("SYNTH-Z1") is fake and get_gpu("z1") is fake
        assert "synth-z1" in gpu_names() and gpu_names()[-1] == "cpu"
        with use_extra_gpus([shadow]):  # blocks nest; an extra shadows a catalog key inside its block
            assert get_gpu("t4").memory_gb == 1.0 and get_gpu("synth-z1") is fake
        assert get_gpu("T4").memory_gb == 16.0
    assert "synth-z1" not in gpu_names()
    with pytest.raises(CatalogError):
        get_gpu("synth-z1")


def test_extra_gpus_are_removed_when_the_block_raises() -> None:
    from perfmodel.catalog import use_extra_gpus

    with pytest.raises(RuntimeError), use_extra_gpus([GPUSpec(name="synth-z2")]):
        raise RuntimeError("boom")
    assert resolve_gpu_key("synth-z2") is None


def test_unknown_gpu_suggests_the_whole_family_first() -> None:
    family = [p.stem for p in GPU_FILES if "a100" in p.stem.lower()]
    assert len(family) >= 4  # the oracle: the catalog's own file names
    with pytest.raises(CatalogError) as err:
        get_gpu("A100")
    suggested = str(err.value).split("did you mean ", 1)[1].split("?")[0].split(", ")
    assert set(suggested[: len(family)]) == set(family)


def test_alias_resolution_is_reported_with_the_other_variants() -> None:
    from perfmodel.catalog import gpu_resolution_note

    assert get_gpu("H100").name == "H100-SXM"
    note = gpu_resolution_note("H100")
    assert note is not None and "H100 resolved to H100-SXM" in note
    assert "H100-PCIe" in note and "H100-NVL" in note
    assert gpu_resolution_note("h100-sxm") is None  # the key itself, in any case, needs no note
    assert gpu_resolution_note("nosuch") is None


def _hf_cache(root: Path, repo_id: str, cfg: dict) -> None:
    repo = root / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text(json.dumps(cfg))


def test_hugging_face_ids_resolve_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    deberta = {"_name_or_path": "/home/someone/secret-run", "model_type": "deberta-v2", "hidden_size": 768,
               "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 128100,
               "hidden_act": "gelu", "max_position_embeddings": 512}
    _hf_cache(tmp_path, "microsoft/deberta-v3-base", deberta)
    model = get_model("microsoft/deberta-v3-base")
    assert (model.hidden_size, model.num_layers, model.vocab_size, model.arch) == (768, 12, 128100, "encoder")
    assert model.name == "microsoft/deberta-v3-base"  # named by the id, not by text inside the file
    assert "local Hugging Face cache" in model.source and "secret-run" not in model.source
    assert get_model("meta-llama/Llama-2-7b-hf").name == "llama2-7b"  # the catalog still comes first
    with pytest.raises(CatalogError, match="local Hugging Face cache"):
        get_model("microsoft/deberta-v3-large")  # not cached: no download


def test_hf_config_names_come_from_the_folder_not_the_file(tmp_path: Path) -> None:
    (tmp_path / "my-model").mkdir()
    _write(tmp_path / "my-model" / "config.json", {"_name_or_path": "/private/path", "model_type": "gpt2",
                                                   "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100})
    assert get_model(str(tmp_path / "my-model")).name == "my-model"


def test_relative_model_paths_resolve_against_the_base_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    (tmp_path / "configs" / "tiny").mkdir(parents=True)
    _write(tmp_path / "configs" / "tiny" / "config.json", cfg)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert get_model("tiny", base_dir=tmp_path / "configs").hidden_size == 64
    with pytest.raises(CatalogError):
        get_model("tiny")  # not relative to the current directory


@pytest.mark.parametrize(
    "text,expected",
    [
        ("{not json", "is not valid JSON"),
        ('{"model_type": "llama", "hidden_size": "wide", "num_hidden_layers": 2, "num_attention_heads": 4}',
         "hidden_size must be a whole number"),
        ('{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4}', "has no hidden_size"),
        ("[1, 2]", "must hold a JSON object"),
    ],
)
def test_bad_hf_config_json_is_a_one_line_config_error(tmp_path: Path, text: str, expected: str) -> None:
    from perfmodel.errors import ConfigError

    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ConfigError) as err:
        get_model(str(tmp_path))
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_measured_hosts_are_read_from_the_datasets_folder_in_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from perfmodel.catalog import get_measured_host

    raw = tmp_path / "raw"
    raw.mkdir()
    fingerprint = {"hardware_id": "host-x", "kind": "cuda", "gpu": "L4"}
    (raw / "fingerprint__host-x.json").write_text(json.dumps(fingerprint))
    monkeypatch.setenv("PERFMODEL_DATASETS", str(tmp_path))
    spec = get_measured_host("host-x")
    assert spec.name == "L4" and spec.memory_gb == get_gpu("L4").memory_gb
    monkeypatch.setenv("PERFMODEL_DATASETS", str(tmp_path / "empty"))
    with pytest.raises(CatalogError, match="no fingerprint for host 'host-x'"):
        get_measured_host("host-x")


def test_cpu_is_this_machine_and_says_so_while_a_measured_host_is_the_same_everywhere(monkeypatch):
    """`cpu` follows the machine (the output says which CPU and whether it was measured); a measured
    host's id resolves to that host's fingerprint and ceilings on any machine (issue 21 item 6)."""
    from perfmodel.catalog import hardware
    from perfmodel.catalog.hardware import get_gpu, gpu_resolution_note

    here = gpu_resolution_note("cpu")
    assert here and "this machine's CPU (Intel(R) Xeon(R) Processor, 2 cores; ceilings measured" in here
    fixed = get_gpu("cpu-2c-cba6f5")
    monkeypatch.setattr(hardware, "local_cpu_facts", lambda: ("AMD EPYC 7B13", 2, 16.0))
    hardware._describe_local_cpu.cache_clear()
    other = get_gpu("cpu")
    assert other.generation == "AMD EPYC 7B13" and not other.measured
    note = gpu_resolution_note("cpu")
    assert note and "no measurement of this CPU" in note and "cpu-2c-cba6f5" in note
    assert get_gpu("cpu-2c-cba6f5") == fixed and fixed.measured and fixed.generation == "Intel(R) Xeon(R) Processor"
