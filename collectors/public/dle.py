"""NVIDIA DeepLearningExamples README training tables (@729963dd, 2024-04): NVIDIA's own
single-node (and some multi-node) numbers on DGX-1 (V100 16/32 GB), DGX-2 and DGX A100.

The data file's parser is generic, so every kept value is re-read from the verbatim table row
(`src_header` / `src_raw_row`): the throughput cell of the row's column (parse_number: "22.59M"
-> 22.59e6, "7248 img/s" -> 7248) and the batch cells by header. Throughput is the total over the
row's GPUs. framework is dle-ngc for every row (NVIDIA-tuned code in NGC containers); the actual
framework (PyTorch, TensorFlow 1/2, MXNet, PaddlePaddle), the container and XLA are in `notes`.
What is kept, by README family:

- Image classifiers (PyTorch, TensorFlow, MXNet, PaddlePaddle; images/s): ResNet-50 v1.5 (catalog
  resnet50), ResNeXt-101 32x4d, SE-ResNeXt-101 32x4d (224x224) and EfficientNet-B0 (224) / B4 (380):
  the latter four take params and GFLOPs (= 2 x GMACs) from timm's inference CSV for the same
  architecture and image size (CNN_DIMS; timm results/benchmark-infer-amp-nchw-pt110-cu113-rtx3090.csv
  @ 1331c145) and what they save for backward from the timm sweep's measured table (CNN_TIMM,
  collectors.public.timm.measured_saved_mb; timm's million activations x 2 bytes without it) and
  how many convolutions and matmuls they run, depthwise and grouped ones apart, from the timm
  kernel census (gemm_layers, depthwise_*, grouped_*; collectors.public.timm.census_columns). Batch per GPU: the
  table's cell (TensorFlow, "128 (FP32) / 256 (AMP)"), the benchmark command quoted above the
  table (MXNet "-b 192 --dtype float16"), the `--batch-size` default the README states
  (PaddlePaddle, 256), or, for PyTorch (the README does not print it), the `batch_size` of
  PyTorch/Classification/ConvNets/configs.yml @ 0fadac23 that `launch.py --mode
  benchmark_training --platform ...` reads (CONFIG_BATCH; the ResNet entries are identical in
  the earlier version 097c7ff9). PyTorch AMP configs use channels_last (memory_format nhwc);
  throughput includes real-data loading (DALI/PyTorch loader; MXNet "Total IPS").
  Optimizer: SGD with momentum 0.875 for the ResNets (each README); RMSprop/SGD for EfficientNet
  (not in perfmodel's list: left empty).
- BERT-large (PyTorch, PaddlePaddle, TensorFlow; sequences/s): pre-training at the table's
  sequence length 128/512 with LAMB (not in perfmodel's optimizer list: left empty) and SQuAD v1.1
  fine-tuning at 384 tokens (each README: TensorFlow "All fine tuning results are on SQuAD v1.1
  using a sequence length of 384"; PyTorch and PaddlePaddle: the SQuAD table of the same
  run_squad.sh, "Sequence Length 384"). Micro-batch and accumulation from the cells; where a
  table gives an accumulated per-GPU batch it must equal micro x accumulation steps (PyTorch
  and PaddlePaddle print "126" for 128 in the multi-node TF32 rows: skipped as inconsistent);
  where it gives a global batch, micro x accumulation x GPUs must equal it. PyTorch's and
  PaddlePaddle's phase 2 (sequence length 512) is skipped: it runs binned by length with LDDL
  (each README's changelog: "Binned pretraining for phase2 with LDDL using a bin size of 64"), each
  batch padded to its bin, so a sequence does far less work than 512 tokens (the kernel model
  priced the 34 of them in the feature table at 1.7-2.2x their measured step, their phase-1 rows at
  0.97-1.16x and TensorFlow's unbinned phase 2 at 0.53-1.04x). The tables headed
  "Batch size / GPU" with accumulation steps but no "Accumulated" column (PyTorch DGX-1,
  PaddlePaddle DGX A100) print the accumulated per-GPU batch there (8192 with 64 steps; the
  same README's multi-node table names that column "Accumulated Batch size / GPU"), so micro =
  batch / steps.
- ELECTRA-base fine-tuning (TensorFlow 2; SQuAD v1.1 at 384 tokens, "All results are on
  ELECTRA-base model ... sequence length of 384"): encoder dims of google/electra-base-
  discriminator (Hugging Face config.json: hidden 768, 12 layers, 12 heads, intermediate 3072,
  vocab 30522, 512 positions).
- Transformer-XL base/large (PyTorch; tokens/s): dims and tgt_len from the README's
  hyperparameter table (base 16 x 512, 8 heads, inner 2048, tgt_len 192; large 18 x 1024, 16
  heads, inner 4096, tgt_len 384); the benchmark runs `--local_batch_size` per GPU, global =
  local x world size (accumulation 1): step_time_s = batch x GPUs x tgt_len / tokens_per_s.
- NCF (PyTorch; samples/s, "22.59M" = 22.59e6): catalog ncf; global batch = per-GPU batch x GPUs.

GPUs: the DGX system of the table heading (DGX-1 V100 16/32 GB -> V100-16GB / V100-32GB (SXM2);
DGX A100 -> A100-40GB / A100-80GB; DGX-2 (16x V100 SXM3 32 GB, NVSwitch, one node) ->
V100-32GB with a note). DGX-2H (V100 SXM3 at 450 W, higher clocks) is not in the catalog: skipped.
Rows of one configuration (model, GPU kind and count, precision, batch, accumulation, sequence)
measured twice in one README share a run_group: the 8-GPU single-node row and the 1-node row of
the multi-node table, or a DGX-1 32GB and a DGX-2 table (same GPU kind).
The BERT multi-node scaling tables print no unit: it is the sequences/s of the single-node table of
the same section (their 1-node rows agree within 1%: 4553 vs 4591 in PyTorch, 5541 in both in
PaddlePaddle). A row whose throughput implies more FLOP/s per GPU (perfmodel.analytic.flops, the
pinned convention) than the datasheet dense peak of its precision is skipped as implausible
(`faster_than_peak`; it caught PyTorch BERT-large phase 2 "FP32" on V100, 19 and 149.6
sequences/s, before binned phase 2 was skipped: a guard against a mislabelled precision).
Skipped with a reason: every other model (no catalog entry and no stated dims), the ConvNets
summary table (no GPU count), ASP (2:4 sparsity) and QAT columns, NVIDIA's wide-SE EfficientNets,
ELECTRA pre-training (generator and discriminator trained together), TensorFlow Transformer-XL
(benchmark global batch / accumulation not stated), TensorFlow NCF (unit not stated), BioBERT
(pre-training accumulation and NER sequence length not stated).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from collectors.public._common import (
    AUTO,
    Batch,
    ImportResult,
    Layout,
    RowSink,
    parse_int,
    parse_number,
    read_csv,
)
from collectors.public.timm import census_columns, census_note, measured_saved_mb
from perfmodel.analytic.flops import compute_step_flops
from perfmodel.catalog import get_model, resolve_model_key
from perfmodel.codec import is_missing, model_columns, workload_from_row

REPO = "NVIDIA/DeepLearningExamples"


class CnnDims(NamedTuple):
    params: float
    """Parameters."""
    gflops: float
    """Forward GFLOPs per image = 2 x GMACs."""
    activation_mb: float
    """Million activations x 2 bytes."""
    source: str


# timm inference CSV (@1331c145, pt110): param_count (M), infer_gmacs, infer_macts at the image size.
CNN_DIMS: dict[str, CnnDims] = {
    "resnext101-32x4d": CnnDims(
        44.18e6, 2 * 8.01, 2 * 21.23, "timm resnext101_32x4d @224: 44.18M, 8.01 GMACs, 21.23M acts"
    ),
    "se-resnext101-32x4d": CnnDims(
        48.96e6, 2 * 8.02, 2 * 21.26, "timm seresnext101_32x4d @224: 48.96M, 8.02 GMACs, 21.26M acts"
    ),
    "efficientnet-b0": CnnDims(
        5.29e6, 2 * 0.4, 2 * 6.75, "timm efficientnet_b0 @224: 5.29M, 0.4 GMACs, 6.75M acts"
    ),
    "efficientnet-b4": CnnDims(
        19.34e6, 2 * 4.49, 2 * 49.49, "timm tf_efficientnet_b4 @380: 19.34M, 4.49 GMACs, 49.49M acts"
    ),
}
CNN_TIMM: dict[str, tuple[str, int]] = {
    "resnext101-32x4d": ("resnext101_32x4d", 224),
    "se-resnext101-32x4d": ("seresnext101_32x4d", 224),
    "efficientnet-b0": ("efficientnet_b0", 224),
    "efficientnet-b4": ("tf_efficientnet_b4", 380),
}
"""CNN_DIMS key -> the timm model and image size whose measured saved activations (what autograd
keeps for backward; collectors.public.timm.measured_saved_mb) replace timm's conv-output count."""
CNN_MODELS: dict[str, str] = {
    "resnet50v1.5": "resnet50",
    "resnet50": "resnet50",
    "RN50v1.5": "resnet50",
    "resnext101-32x4d": "resnext101-32x4d",
    "se-resnext101-32x4d": "se-resnext101-32x4d",
    "efficientnet-b0": "efficientnet-b0",
    "efficientnet-b4": "efficientnet-b4",
}
"""The README's model name -> catalog key (resnet50) or CNN_DIMS key."""
CNN_FAMILY = {"efficientnet-b0": "efficientnet", "efficientnet-b4": "efficientnet"}

# PyTorch/Classification/ConvNets/configs.yml @ 0fadac23: batch_size per (arch, platform, precision).
CONFIG_BATCH: dict[tuple[str, str], dict[str, int]] = {
    ("resnet50", "DGX1V"): {"AMP": 256, "FP32": 112},
    ("resnet50", "DGX2V"): {"AMP": 256, "FP32": 256},
    ("resnet50", "DGXA100"): {"AMP": 256, "TF32": 256},
    ("resnext101-32x4d", "DGX1V"): {"AMP": 128, "FP32": 64},
    ("resnext101-32x4d", "DGXA100"): {"AMP": 128, "TF32": 128},
    ("se-resnext101-32x4d", "DGX1V"): {"AMP": 112, "FP32": 64},
    ("se-resnext101-32x4d", "DGXA100"): {"AMP": 128, "TF32": 128},
    ("efficientnet-b0", "DGX1V-16G"): {"AMP": 128, "FP32": 64},
    ("efficientnet-b0", "DGX1V-32G"): {"AMP": 256, "FP32": 128},
    ("efficientnet-b0", "DGXA100"): {"AMP": 256, "TF32": 256},
    ("efficientnet-b4", "DGX1V-16G"): {"AMP": 32, "FP32": 16},
    ("efficientnet-b4", "DGX1V-32G"): {"AMP": 64, "FP32": 32},
    ("efficientnet-b4", "DGXA100"): {"AMP": 128, "TF32": 64},
}
CONFIGS_CITATION = (
    f"{REPO}@0fadac23d764429ed0da54dc8c5a31677dc923d5:PyTorch/Classification/ConvNets/configs.yml"
)
PADDLE_DEFAULT_BATCH = 256
"""PaddlePaddle RN50 README: `--batch-size` default 256 ("256 batch size per GPU" on 8x A100)."""

# citation_path -> kind of table
KINDS: dict[str, str] = {
    "PyTorch/Classification/ConvNets/resnet50v1.5/README.md": "cnn-pytorch",
    "PyTorch/Classification/ConvNets/resnext101-32x4d/README.md": "cnn-pytorch",
    "PyTorch/Classification/ConvNets/se-resnext101-32x4d/README.md": "cnn-pytorch",
    "PyTorch/Classification/ConvNets/efficientnet/README.md": "cnn-pytorch",
    "TensorFlow/Classification/ConvNets/resnet50v1.5/README.md": "cnn-cell",
    "TensorFlow/Classification/ConvNets/resnext101-32x4d/README.md": "cnn-cell",
    "TensorFlow/Classification/ConvNets/se-resnext101-32x4d/README.md": "cnn-cell",
    "MxNet/Classification/RN50v1.5/README.md": "cnn-command",
    "PaddlePaddle/Classification/RN50v1.5/README.md": "cnn-default",
    "PyTorch/LanguageModeling/BERT/README.md": "bert",
    "PaddlePaddle/LanguageModeling/BERT/README.md": "bert",
    "TensorFlow/LanguageModeling/BERT/README.md": "bert",
    "TensorFlow2/LanguageModeling/ELECTRA/README.md": "electra",
    "PyTorch/LanguageModeling/Transformer-XL/README.md": "txl",
    "PyTorch/Recommendation/NCF/README.md": "ncf",
}
SKIP_PATHS: dict[str, str] = {
    "PyTorch/Classification/ConvNets/README.md": (
        "ConvNets summary table: no GPU count (the per-model README rows are kept)"
    ),
    "TensorFlow/LanguageModeling/Transformer-XL/README.md": (
        "TensorFlow Transformer-XL: benchmark global batch / --batch_chunk not stated"
    ),
    "TensorFlow/Recommendation/NCF/README.md": "TensorFlow NCF: throughput unit not stated",
    "TensorFlow/LanguageModeling/BERT/biobert/README.md": (
        "BioBERT: pre-training accumulation and NER sequence length not stated"
    ),
}
SKIP_MODELS: dict[str, str] = {
    "efficientnet-widese-b0": "NVIDIA wide-SE EfficientNet variant: no parameter/FLOP figures",
    "efficientnet-widese-b4": "NVIDIA wide-SE EfficientNet variant: no parameter/FLOP figures",
    "efficientnet-quant-b0": "quantization-aware training (QAT) row",
    "efficientnet-quant-b4": "quantization-aware training (QAT) row",
}
UNITS = {
    "cnn": ("img/s", "images per second"),
    "bert": ("sequences/sec", "sentences per second"),
    "electra": ("sequences/sec",),
    "txl": ("tok/s",),
    "ncf": ("samples/s",),
}
TXL = {  # README hyperparameter table: (layers, d_model, heads, d_inner, tgt_len)
    "Base model": ("transformer-xl-base", 16, 512, 8, 2048, 192),
    "Large model": ("transformer-xl-large", 18, 1024, 16, 4096, 384),
}
ELECTRA_BASE = {  # huggingface.co/google/electra-base-discriminator config.json
    "hidden_size": 768,
    "num_layers": 12,
    "num_heads": 12,
    "num_kv_heads": 12,
    "ffn_hidden_size": 3072,
    "vocab_size": 30522,
    "learned_pos_embeddings": 512,
    "gated_mlp": False,
    "tied_embeddings": True,
}
SQUAD_SEQ = 384
_PRECISION_WORDS = re.compile(r"tf32|fp32|fp16|mixed precision|amp|\btf\b", re.IGNORECASE)


def precision_key(word: str) -> str:
    """A precision word of a header or cell -> perfmodel precision."""
    w = word.strip().lower()
    if w in ("fp16", "mixed precision", "amp"):
        return "amp_fp16"
    if w in ("tf32", "tf"):
        return "tf32"
    if w == "fp32":
        return "fp32"
    raise ValueError(w)


def pair_cell(column: str, cell: str, precision: str) -> int | None:
    """The value of `precision` in a cell that may hold one value per precision: "16 and 32"
    (order from the column name, e.g. "(TF32 and FP16)" or ": mixed precision, FP32"),
    "128 (FP32) / 256 (AMP)" (labelled), or a single value for both."""
    labelled = re.findall(r"(\d+)\s*\(\s*(tf32|fp32|fp16|amp|tf)\s*\)", cell, flags=re.IGNORECASE)
    if labelled:
        values = {precision_key(word): int(value) for value, word in labelled}
        return values.get(precision)
    parts = [p for p in re.split(r"\s+and\s+|\s*[,:/]\s*", cell.strip()) if p]
    if len(parts) == 1:
        return parse_int(parts[0])
    after = re.split(
        r"batch size / gpu|accumulation steps|gradient accumulation|accumulated batch size / gpu",
        column,
        flags=re.I,
    )[-1]
    order = [precision_key(w) for w in _PRECISION_WORDS.findall(after)]
    if len(parts) != 2 or len(order) != 2 or precision not in order:
        return None
    return parse_int(parts[order.index(precision)])


def gpu_key(text: str, heading: str) -> tuple[str | None, str]:
    """(catalog key or None, note) for the table's GPU label and system heading."""
    if "DGX-2H" in heading:
        return None, "DGX-2H (V100 SXM3 at 450 W): not in the catalog"
    if "DGX-2" in heading:
        return (
            "V100-32GB",
            "DGX-2: 16x V100 SXM3 32GB on NVSwitch, one node (catalog V100-32GB is the SXM2 part)",
        )
    for pattern, key in (
        (r"V100 16G|DGX-1 16G", "V100-16GB"),
        (r"V100 32G|DGX-1 32G", "V100-32GB"),
        (r"A100 80G", "A100-80GB"),
        (r"A100 40G", "A100-40GB"),
    ):
        if re.search(pattern, text) or re.search(pattern, heading):
            return key, ""
    return None, f"gpu not in catalog: {text}"


def import_nvidia_deeplearningexamples_readme_train(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    repeats: dict[str, int] = {}
    for _, r in read_csv(path).iterrows():
        _import_row(sink, dict(r), repeats)
    result = sink.result()
    if len(result.rows):
        impossible = result.rows.apply(lambda row: faster_than_peak(row.to_dict()), axis=1).astype(bool)
        if impossible.any():
            result.skipped[
                "implausible: throughput implies more FLOP/s per GPU than the datasheet peak of its precision"
            ] += int(impossible.sum())
            result.rows = result.rows[~impossible].reset_index(drop=True)
    return result


def faster_than_peak(row: dict[str, Any]) -> bool:
    """True when the row's step executes its FLOPs (perfmodel.analytic.flops, the pinned
    convention) faster than the GPU's dense datasheet peak for the row's precision allows: a
    mislabelled precision or a wrong number, not a hard workload (PyTorch BERT-large's binned phase
    2 "FP32" on one V100, 19 sequences/s, is 1.2x the fp32 peak counted at 512 tokens)."""
    key = resolve_model_key(str(row["model_name"]))
    if key:
        for column, value in model_columns(get_model(key)).items():
            if is_missing(row.get(column)) and value is not None:
                row[column] = value
    w = workload_from_row(row)
    flops = compute_step_flops(w).hardware_flops_per_gpu
    return flops / float(row["step_time_s"]) > w.gpu.peak_for(w.training.compute_dtype) * 1e12


def _cells(r: Mapping[str, str]) -> dict[str, str]:
    names = [h.strip() for h in r["src_header"].split(" | ")]
    values = [c.strip() for c in r["src_raw_row"].strip().strip("|").split("|")]
    return dict(zip(names, values, strict=False))


def _import_row(sink: RowSink, r: dict[str, str], repeats: dict[str, int]) -> None:
    where = r["citation_path"]
    if where in SKIP_PATHS:
        sink.skip(SKIP_PATHS[where])
        return
    kind = KINDS.get(where)
    if kind is None:
        sink.skip(f"model without a catalog entry or stated dims: {r['model']}")
        return
    if r["model"] in SKIP_MODELS:
        sink.skip(SKIP_MODELS[r["model"]])
        return
    column = r["src_column"]
    if "ASP" in column:
        sink.skip("ASP (2:4 structured sparsity) column")
        return
    family = kind.split("-")[0]
    unit = r["throughput_unit_stated"] or r["throughput_unit_from_text"]
    if not unit and kind == "cnn-command" and "Total IPS" in r["src_context"]:
        unit = "images per second"  # MXNet: "Training performance reported as Total IPS"
    if not unit and kind == "bert" and "Multi-node Scaling" in r["src_subheading"]:
        unit = UNITS["bert"][
            0
        ]  # the section's single-node table states sequences/sec; its 1-node row matches
    if unit not in UNITS[family]:
        sink.skip(f"throughput unit not stated as {UNITS[family][0]}")
        return
    system = r["src_subheading"] if "DGX" in r["src_subheading"] else r["src_system_heading"]
    r["system"] = system
    gpu, gpu_note = gpu_key(r["gpu"], system)
    if gpu is None:
        sink.skip(gpu_note)
        return
    cells = _cells(r)
    throughput = parse_number(cells.get(column))
    precision = r["precision"].split(" ")[0]
    n_gpus, num_nodes = _gpu_count(cells, system)
    if not throughput or throughput <= 0 or not n_gpus or precision not in ("amp_fp16", "tf32", "fp32"):
        sink.skip("no throughput, GPU count or precision in the table row")
        return
    if kind.startswith("cnn"):
        spec = _cnn(r, cells, kind, gpu, precision)
    elif kind in ("bert", "electra"):
        spec = _transformer(r, cells, kind, precision, n_gpus)
    elif kind == "txl":
        spec = _txl(r, cells)
    else:
        spec = _ncf(cells)
    if isinstance(spec, str):
        sink.skip(spec)
        return
    _add(sink, r, spec, gpu, gpu_note, n_gpus, num_nodes, precision, throughput, repeats)


def _gpu_count(cells: Mapping[str, str], heading: str) -> tuple[int | None, int | None]:
    """(GPUs, nodes): the GPUs column, or nodes x GPUs per node (the column, else 8 for DGX-1 / DGX
    A100, 16 for DGX-2). nodes is None when the catalog's server size decides."""
    nodes = parse_int(cells.get("Nodes") or cells.get("Num Nodes"))
    if nodes:
        per_node = parse_int(cells.get("GPUs / node")) or (16 if "DGX-2" in heading else 8)
        return nodes * per_node, nodes
    n = parse_int(cells.get("GPUs"))
    if n and "DGX-2" in heading and n <= 16:
        return n, 1
    return n, None


class Spec(NamedTuple):
    model: tuple[str, str, str]
    columns: dict[str, Any]
    micro: int
    accum: int
    seq_len: int | None
    optimizer: str | None
    notes: str
    unit: str  # samples | tokens
    pretraining: bool = False


def _cnn(r: Mapping[str, str], cells: Mapping[str, str], kind: str, gpu: str, precision: str) -> Spec | str:
    key = CNN_MODELS.get(r["model"])
    if key is None:
        return f"model without a catalog entry or stated dims: {r['model']}"
    if kind == "cnn-pytorch":
        platform = {"A100-80GB": "DGXA100", "V100-16GB": "DGX1V-16G", "V100-32GB": "DGX1V-32G"}.get(gpu, "")
        if "DGX-2" in r["src_system_heading"]:  # no PyTorch ConvNets table is on a DGX-2
            platform = "DGX2V"
        table = CONFIG_BATCH.get((key, platform)) or CONFIG_BATCH.get((key, platform.split("-")[0]))
        config_precision = {"amp_fp16": "AMP", "tf32": "TF32", "fp32": "FP32"}[precision]
        micro = (table or {}).get(config_precision)
        where = f"batch_size from {CONFIGS_CITATION} ({key}, {platform}, {config_precision})"
    elif kind == "cnn-cell":
        batch_column = next((c for c in cells if c.lower().startswith("batch size / gpu")), "")
        micro = pair_cell(batch_column, cells.get(batch_column, ""), precision)
        where = "batch from the table cell"
    elif kind == "cnn-command":
        dtype = "float16" if precision == "amp_fp16" else "float32"
        found = re.search(rf"-b (\d+) --dtype {dtype}", r["src_context"])
        micro = int(found.group(1)) if found else None
        where = f"batch from the benchmark command above the table (-b N --dtype {dtype}, per GPU)"
    else:
        micro = PADDLE_DEFAULT_BATCH
        where = "batch = the README's --batch-size default 256 per GPU"
    if not micro:
        return "batch size per GPU not stated"
    if key == "resnet50":
        model, columns = ("resnet50", "resnet", "cnn"), {}
    else:
        dims = CNN_DIMS[key]
        model = (key, CNN_FAMILY.get(key, "resnet"), "cnn")
        timm_name, image = CNN_TIMM[key]
        saved = measured_saved_mb(timm_name, image, dims.params / 1e6)
        census = census_columns(timm_name, image, dims.params / 1e6)
        columns = {
            "params_total": dims.params,
            "forward_gflops_per_sample": dims.gflops,
            "activation_mb_per_sample": saved if saved is not None else dims.activation_mb,
        }
        if census:
            columns.update(census)
            where += "; " + census_note(timm_name, image, census)
        where += f"; params/GFLOPs (2 x GMACs) from {dims.source}; activation MB = " + (
            f"{saved:g} saved for backward (timm {timm_name} at {image} px, measured: "
            "collectors/public/timm_saved_activations.csv)"
            if saved is not None
            else "M acts x 2 bytes (not in the saved-activation table)"
        )
    optimizer = None if key.startswith("efficientnet") else "sgd_momentum"
    return Spec(model, columns, micro, 1, None, optimizer, where, "samples")


BINNED_PHASE2_PATHS = ("PyTorch/LanguageModeling/BERT/README.md", "PaddlePaddle/LanguageModeling/BERT/README.md")
"""BERT pre-training READMEs whose phase 2 runs binned (each changelog: "Binned pretraining for
phase2 with LDDL using a bin size of 64")."""
BINNED_FROM_SEQ = 128
"""Phase 1 (sequence length 128) is not binned; phase 2 (512) is."""
BINNED_PHASE2 = (
    "BERT phase 2 pre-training binned by sequence length (LDDL, bin size 64, the README's changelog): "
    "each batch is padded to its bin, not to 512, and no length distribution is stated"
)


def _transformer(
    r: Mapping[str, str], cells: Mapping[str, str], kind: str, precision: str, n_gpus: int
) -> Spec | str:
    pretraining = "Pre-training" in (r["src_subheading"] or r["src_system_heading"])
    if kind == "electra" and pretraining:
        return "ELECTRA pre-training (generator and discriminator trained together)"
    batch_column = next((c for c in cells if c.lower().startswith("batch size / gpu")), "")
    accum_column = next(
        (c for c in cells if c.lower().startswith(("accumulation steps", "gradient accumulation"))), ""
    )
    accumulated_column = next((c for c in cells if c.lower().startswith("accumulated batch size")), "")
    batch = pair_cell(batch_column, cells.get(batch_column, ""), precision)
    accum = pair_cell(accum_column, cells[accum_column], precision) if accum_column else 1
    if not batch or not accum:
        return "batch or accumulation steps not stated for this precision"
    micro = batch
    check = ""
    if accumulated_column:
        accumulated = pair_cell(accumulated_column, cells[accumulated_column], precision)
        if accumulated != batch * accum:
            return "batch x accumulation steps != accumulated batch in the table (e.g. '126' for 128)"
    elif accum_column and "Global Batch Size" not in cells:
        if batch % accum:
            return "accumulated per-GPU batch not divisible by the accumulation steps"
        micro = batch // accum
        check = f"; 'Batch size / GPU' {batch} is the accumulated per-GPU batch (micro = {batch}/{accum})"
    if "Global Batch Size" in cells and parse_int(cells["Global Batch Size"]) != micro * accum * n_gpus:
        return "micro x accumulation x GPUs != the table's global batch"
    seq = parse_int(cells.get("Sequence length") or cells.get("Sequence Length"))
    if not pretraining:
        seq = seq or SQUAD_SEQ
    if not seq:
        return "sequence length not stated"
    if pretraining and seq > BINNED_FROM_SEQ and r["citation_path"] in BINNED_PHASE2_PATHS:
        return BINNED_PHASE2
    if kind == "electra":
        model, columns = ("electra-base", "electra", "encoder"), dict(ELECTRA_BASE)
        what = "ELECTRA-base SQuAD v1.1 fine-tuning; dims of google/electra-base-discriminator config.json"
    else:
        model, columns = ("bert-large", "bert", "encoder"), {}
        what = "BERT-large " + (
            "pre-training with LAMB (optimizer left empty)" if pretraining else "SQuAD v1.1 fine-tuning"
        )
    optimizer = None if pretraining else "adamw"
    return Spec(model, columns, micro, accum, seq, optimizer, what + check, "samples", pretraining)


def _txl(r: Mapping[str, str], cells: Mapping[str, str]) -> Spec | str:
    size = TXL.get(r["src_subheading"])
    micro = parse_int(cells.get("Batch Size / GPU"))
    if size is None or not micro:
        return "Transformer-XL table without model size or batch"
    name, layers, d, heads, ffn, tgt = size
    columns = {
        "num_layers": layers,
        "hidden_size": d,
        "num_heads": heads,
        "num_kv_heads": heads,
        "ffn_hidden_size": ffn,
        "gated_mlp": False,
    }
    notes = (
        f"dims and tgt_len {tgt} from the README hyperparameter table; benchmark --local_batch_size per GPU, "
        "global = local x GPUs; adaptive softmax over the WikiText-103 vocabulary (vocab left empty)"
    )
    return Spec((name, "transformer-xl", "decoder"), columns, micro, 1, tgt, None, notes, "tokens")


def _ncf(cells: Mapping[str, str]) -> Spec | str:
    micro = parse_int(cells.get("Batch size / GPU"))
    if not micro:
        return "batch size per GPU not stated"
    return Spec(
        ("ncf", "ncf", "mlp"), {}, micro, 1, None, None, "NCF on MovieLens-20M (catalog ncf)", "samples"
    )


NHWC_AMP_FRAMEWORKS: dict[str, str] = {
    "PyTorch": "channels_last (PyTorch/Classification/ConvNets/configs.yml @ 0fadac23: AMP configs set "
    "memory_format nhwc)",
    "MxNet": "NHWC convolutions (MxNet/Classification/RN50v1.5/runner @ 1bd98ac3: --dtype float16 adds "
    "--conv-layout NHWC --batchnorm-layout NHWC --pooling-layout NHWC)",
    "PaddlePaddle": "NHWC (PaddlePaddle/Classification/RN50v1.5/README.md: every AMP command passes --data-layout NHWC)",
}
"""Frameworks whose 16-bit image classifiers run their convolutions in NHWC, with the source that
says so (a CNN row's `channels_last`). TensorFlow's ConvNets default to NCHW
(TensorFlow/Classification/ConvNets/utils/cmdline_helper.py --data_format) and its README benchmark
commands pass no format: left NCHW."""


MATH_ATTENTION: dict[str, str] = {
    "PyTorch/LanguageModeling/BERT": "eager attention (modeling.py BertSelfAttention.forward: torch.bmm, "
    "/ sqrt(d), + mask, F.softmax, dropout, torch.bmm @ 729963dd)",
    "PyTorch/LanguageModeling/Transformer-XL": "eager attention (pytorch/mem_transformer.py "
    "RelPartialLearnableMultiHeadAttn: einsum scores, F.softmax, dropatt, einsum @ 729963dd)",
}
"""PyTorch models of the README tables whose attention materialises the scores (a row's
attention_kernel 'eager'; the dle-ngc recipe's default, which a row's empty cell would not reach)."""

APEX_O2: dict[str, str] = {
    "PyTorch/LanguageModeling/BERT": "apex amp O2 (run_squad.py amp.initialize(opt_level='O2') with --fp16 "
    "@ 729963dd): the model in fp16 with fp32 master weights",
    "PyTorch/LanguageModeling/Transformer-XL": "apex amp O2 (pytorch/train.py --amp apex and "
    "--apex_amp_opt_level O2 by default @ 729963dd): the model in fp16 with fp32 master weights",
}
"""PyTorch training scripts whose 16-bit runs cast the model to fp16 (precision 'fp16', not autocast's
'amp_fp16'); BERT's pre-training (run_pretraining.py) runs under torch.cuda.amp.autocast instead."""


NVFUSER_PRETRAINING: dict[str, str] = {
    "PyTorch/LanguageModeling/BERT": "TorchScript with NVFuser (run_pretraining.py: "
    "torch._C._jit_set_nvfuser_enabled(True), model = torch.jit.script(model) unless --disable_jit_fusions "
    "@ 729963dd): its elementwise chains run fused, as torch_compile",
}
"""Pre-training scripts that script the whole model for NVFuser (a row's torch_compile); BERT's SQuAD
script does not."""


def _prefixed(table: dict[str, str], path: str) -> str | None:
    return next((note for prefix, note in table.items() if path.startswith(prefix)), None)


def _add(
    sink: RowSink,
    r: Mapping[str, str],
    spec: Spec,
    gpu: str,
    gpu_note: str,
    n_gpus: int,
    num_nodes: int | None,
    precision: str,
    throughput: float,
    repeats: dict[str, int],
) -> None:
    gbs = spec.micro * spec.accum * n_gpus
    if spec.unit == "tokens":
        tokens, samples = throughput, throughput / spec.seq_len  # type: ignore[operator]
    else:
        samples = throughput
        tokens = throughput * spec.seq_len if spec.seq_len else None
    step = gbs / samples
    where = r["src_subheading"] or r["src_system_heading"]
    container = re.search(
        r"(\S*\d\d\.\d\d\S*)\s+NGC container|NGC container[^.]*?(\d\d\.\d\d\S*)", r["src_context"]
    )
    notes = [
        f"{r['framework']}",
        f"step_time_s = global batch {gbs} / {throughput:g} {spec.unit}/s (total over {n_gpus} GPUs)",
        spec.notes,
        f"precision column '{r['src_column']}'",
    ]
    if container:
        notes.append(f"container {container.group(1) or container.group(2)}")
    if "XLA" in r["src_column"]:
        notes.append("TensorFlow XLA compilation")
    if gpu_note:
        notes.append(gpu_note)
    stack = re.search(r"DeepLearningExamples (\S+)", r["framework"])
    nhwc_note = NHWC_AMP_FRAMEWORKS.get(stack.group(1) if stack else "") if spec.model[2] == "cnn" else None
    nhwc = bool(nhwc_note) and precision.endswith("fp16")
    if nhwc:
        notes.append(str(nhwc_note))
    path = r["citation_path"]
    attention = _prefixed(MATH_ATTENTION, path)
    o2 = _prefixed(APEX_O2, path) if precision == "amp_fp16" and not spec.pretraining else None
    scripted = _prefixed(NVFUSER_PRETRAINING, path) if spec.pretraining else None
    notes += [note for note in (attention, o2, scripted) if note]
    if o2:
        precision = "fp16"
    run_key = {
        "path": r["citation_path"],
        "model": spec.model[0],
        "gpu": gpu,
        "n": n_gpus,
        "precision": precision,
        "micro": spec.micro,
        "accum": spec.accum,
        "seq": spec.seq_len,
    }
    label = repr(sorted(run_key.items()))
    repeat = repeats.get(label, 0)
    repeats[label] = repeat + 1
    sink.add(
        config={
            "path": r["citation_path"],
            "table": where,
            "row": r["src_raw_row"],
            "column": r["src_column"],
        },
        run_key=run_key,
        repeat_index=repeat,
        citation=(
            f"{REPO}@{r['citation_commit']}:{r['citation_path']} "
            f"(table '{where}', row '{r['src_raw_row'].strip()}')"
        ),
        hardware_id=r["system"],
        notes="; ".join(notes),
        model=spec.model,
        batch=Batch(spec.micro, gbs, spec.seq_len, spec.accum),
        precision=precision,
        optimizer=spec.optimizer,
        layout=Layout(gpu, n_gpus, num_nodes=num_nodes or AUTO, gpu_name_raw=r["gpu"]),
        framework="dle-ngc",
        channels_last=nhwc,
        attention_kernel="eager" if attention else None,
        torch_compile=True if scripted else None,
        step_time_s=step,
        samples_per_s=samples,
        tokens_per_s=tokens,
        **spec.columns,
    )
