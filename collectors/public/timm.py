"""timm's training benchmark sweep (huggingface/pytorch-image-models results/benchmark-train-*):
every timm model trained on one RTX 3090 in plain eager PyTorch, the single-GPU CNN/ViT axis.

What a row measured (timm benchmark.py at those commits): synthetic `torch.randn` input already
on the GPU (no data loading); one step = zero_grad + forward + cross-entropy + backward +
optimizer.step() under fp16 autocast (precision amp_fp16), timed over 40 steps after 10 warm-up
steps; optimizer = the script default SGD with momentum 0.9 (optimizer sgd_momentum); batch =
what the sweep ran (it retries with a smaller batch on OOM); framework torch-eager.

Normalisation:
- step_time_s = the source's train_step_time (ms) / 1000; samples_per_s = train_samples_per_sec
  as published (batch x steps / wall time of the timed loop; batch / step time exceeds it by 0.3% at
  the median, at most 2%).
- Model size: params_total = param_count (millions) x 1e6. forward_gflops_per_sample =
  2 x infer_gmacs (timm counts multiply-accumulates; 1 MAC = 2 FLOPs) and
  activation_mb_per_sample = infer_macts x 2 (million activation elements per sample at 2 bytes
  each, 16-bit): both from timm's inference CSV, joined only where the inference image size
  equals the train image size. The pt111/pt112 inference CSVs have no GMACs column, so the
  value is taken from another row of the same file for the same model, image size and
  parameter count (the pt110 inference CSV); without one the row is skipped.
- Activations: activation_mb_per_sample is what autograd saves for backward (the schema's
  meaning, measured the way the catalog and the collectors measure it), read from
  SAVED_ACTIVATIONS: each sweep model built with timm at its train image size and run once on a
  CPU under saved-tensor hooks (collectors/public/timm_activations.py, `make timm-activations`).
  timm's own count (infer_macts, the outputs of conv/linear layers) is a different fraction of it
  for every architecture: ResNet-50 at 224 saves 42.7 MB against timm's 22.2 MB (1.9x), an
  EfficientNet-B0 44.2 MB against 13.5 MB (3.3x: its batch norms, SiLUs and squeeze-excitation
  products save tensors that are not conv outputs). A model missing from the table falls back to
  infer_macts x 2 bytes, and its row's notes say so.
- Layers: gemm_layers (the convolutions and matmuls with weights one forward runs), of those the
  depthwise convolutions (depthwise_*: EfficientNet, MobileNet, ConvNeXt) and the other grouped
  ones (grouped_*: ResNeXt, RegNet, NFNet) with their FLOPs and the elements they read and write,
  and, for a model with attention (XCiT, Swin, CaiT, ...), attention_layers with the attentions'
  FLOPs and scores are read from KERNEL_CENSUS, counted on the meta device by
  collectors/public/timm_kernel_census.py (`make timm-census`), for every model but the ViTs with
  dims (a transformer's plan counts its own); the CNN / MLP plan cuts the model's FLOPs into that
  many GEMMs instead of reference-size convolutions, streams the depthwise convolutions, runs the
  grouped ones as batched GEMMs one group wide, and costs the attentions on the math path. A
  model missing from the census (or counted at another size) keeps the reference-size plan.
- Architecture: plain ViT/DeiT models whose dimensions follow from the name (ViT paper table 1,
  DeiT/DeiT-III papers: width, depth, heads, MLP 4x width; sequence = patches + class token
  [+ distillation token]) are rows of arch 'encoder' with those dims, kept only when the dims
  reproduce timm's own parameter count (within 2%) and GMACs (within 5%); attention is timm's
  explicit softmax(QK^T)V (attention_kernel eager) in these 2022 versions. Every other model is
  'cnn', 'mlp' (MLP-Mixer-like) or 'other' (other transformers and hybrids), costed from
  params/GFLOPs/activations; derived_arch_guess (a name heuristic of the data file) picks
  which. model_family is the architecture lineage from the name (FAMILIES), coarse enough that
  leave-one-family-out stays a handful of folds.
- Versions and layouts: the sweep was run with PyTorch 1.10, 1.11 and 1.12, each in NCHW and
  NHWC (channels_last). Kept: NCHW only, PyTorch's default. The layout changes throughput a lot
  (NHWC / NCHW samples/s on this CSV: median 1.23, 10th-90th percentile 0.40-1.43) and a workload
  states it (`training.channels_last`), but the NHWC rows would add a third to the training rows;
  they check the kernel plan's NCHW <-> NHWC transpositions instead (`bench/channels_last.py`). The three torch
  versions are re-measurements of one configuration (same model, image size, GPU): they share one
  run_group (model, image size), so the model counts as one vote however many versions measured
  it; torch_version records which. Rows of the Jan-2022 pt110 file that the Apr-2022 re-run
  replaced (in_latest_version False) are skipped.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from collectors.public._common import Batch, ImportResult, Layout, RowSink, parse_int, parse_number, read_csv

GPU_KEYS: dict[str, str | None] = {"RTX 3090": "RTX-3090"}
TORCH_VERSIONS = {"pt110": "1.10", "pt111": "1.11", "pt112": "1.12"}
KEPT_LAYOUTS = ("nchw",)
"""Memory layouts imported (see the module docstring: NHWC is not expressible by the workload)."""
ARCH_BY_GUESS = {"cnn": "cnn", "mlp": "mlp", "vit": "other", "hybrid/other-transformer": "other"}
CONVOLUTIONAL_MIXERS = re.compile(r"^convmixer_")
"""Models the data file guesses 'mlp' that mix with convolutions: ConvMixer mixes its patches with a
depthwise k x k convolution and its channels with a pointwise one, each followed by a batch norm
(Trockman & Kolter, "Patches Are All You Need?", 2022; timm convmixer.py), so it is planned as a CNN."""
SAVED_ACTIVATIONS = Path(__file__).with_name("timm_saved_activations.csv")
"""(model, img_size) -> saved_mb_per_sample, measured by collectors/public/timm_activations.py."""
KERNEL_CENSUS = Path(__file__).with_name("timm_kernel_census.csv")
"""(model, img_size) -> convolutions and matmuls per forward, and the grouped convolutions among
them, counted by collectors/public/timm_kernel_census.py."""

# (pattern on the model name without a weights prefix, family): first match wins.
FAMILIES: tuple[tuple[str, str], ...] = (
    (
        r"(vit|deit|deit3|beit|cait|xcit|swin|swinv2|swin_v2|swin_s3|crossvit|volo|pit|twins|nest|levit|"
        r"coat|tnt|convit|visformer|mobilevit|mobilevitv2|semobilevit|edgenext|poolformer|sequencer2d)_",
        "vit",
    ),
    (r"(mixer|resmlp|gmlp|gmixer|convmixer)_", "mlp-mixer"),
    (
        r"(efficientnet|efficientnetv2|gc_efficientnetv2|mobilenetv2|mobilenetv3|mnasnet|semnasnet|spnasnet|mixnet|tinynet|"
        r"fbnetc|fbnetv3|hardcorenas|lcnet|ghostnet|rexnet|rexnetr)_",
        "efficientnet",
    ),
    (r"(regnetx|regnety|regnetz|regnetv|haloregnetz)_", "regnet"),
    (r"(nfnet|dm_nfnet|eca_nfnet|nf_)", "nfnet"),
    (r"convnext_", "convnext"),
    (r"(vgg|repvgg)", "vgg"),
    (
        r"(resnet|resnext|seresnet|seresnext|ecaresnet|ecaresnext|gcresnet|gcresnext|skresnet|skresnext|"
        r"resnest|res2net|res2next|tresnet|wide_resnet|senet|seresnext|cspresnet|cspresnext|resnetrs|"
        r"resnetblur|resnetaa|seresnetaa|seresnextaa|resnetv2|botnet|sebotnet|halonet|sehalonet|"
        r"lambda_resnet|lamhalobotnet|halo2botnet|bat_resnext|eca_resnet|eca_resnext|eca_botnext|eca_halonext)",
        "resnet",
    ),
)
WEIGHT_PREFIXES = re.compile(r"^(tf_|gluon_|legacy_|ssl_|swsl_|ig_|tv_|jx_|adv_|ens_adv_)")

# ViT dims by size name: (width, depth, heads); MLP = 4 x width.
VIT_SIZES: dict[str, tuple[int, int, int]] = {
    "tiny": (192, 12, 3),  # DeiT paper table 1 (DeiT-Ti)
    "small": (384, 12, 6),  # DeiT paper table 1 (DeiT-S)
    "medium": (512, 12, 8),  # DeiT-III paper (ViT-M)
    "base": (768, 12, 12),  # ViT paper table 1 (ViT-Base)
    "large": (1024, 24, 16),  # ViT paper table 1 (ViT-Large)
    "huge": (1280, 32, 16),  # ViT paper table 1 (ViT-Huge)
    "giant": (1408, 40, 16),  # Zhai et al. 2022 "Scaling ViTs" table 2 (ViT-g, MLP 6144)
}
VIT_MLP = {"giant": 6144}
_VIT = re.compile(
    r"^(?P<kind>vit|deit|deit3)_(?P<size>[a-z]+)_(?P<distilled>distilled_)?patch(?P<patch>\d+)_(?P<img>\d+)"
    r"(_(miil|sam|in21ft1k))?$"
)
PARAMS_TOLERANCE = 0.02
GMACS_TOLERANCE = 0.05
NUM_CLASSES = 1000


def model_family(name: str) -> str:
    """Architecture lineage of a timm model name (FAMILIES), 'cnn-other' when none matches."""
    base = WEIGHT_PREFIXES.sub("", name)
    for pattern, family in FAMILIES:
        if re.match(pattern, base):
            return family
    return "cnn-other"


def vit_dims(name: str, image_size: int, params: float, gmacs: float) -> dict[str, Any] | None:
    """Encoder dims of a plain ViT/DeiT from its name, or None when the name is not one or the dims
    do not reproduce timm's parameter count and GMACs (then the row is costed as arch 'other')."""
    match = _VIT.match(name)
    if not match or match["size"] not in VIT_SIZES:
        return None
    patch = int(match["patch"])
    if image_size % patch:
        return None
    d, layers, heads = VIT_SIZES[match["size"]]
    ffn = VIT_MLP.get(match["size"], 4 * d)
    patches = (image_size // patch) ** 2
    prefix = 2 if match["distilled"] else 1  # class token (+ distillation token)
    seq = patches + prefix
    pos_rows = (
        patches if match["kind"] == "deit3" else seq
    )  # DeiT-III: no position embedding on the class token
    block = 4 * d * d + 2 * d * ffn + 9 * d + ffn  # qkv/proj/fc1/fc2 weights and biases, 2 norms
    heads_out = prefix * (d * NUM_CLASSES + NUM_CLASSES)  # classifier (and distillation) heads
    expected_params = (
        layers * block + pos_rows * d + 3 * patch * patch * d + d + prefix * d + 2 * d + heads_out
    )
    macs = seq * layers * (4 * d * d + 2 * d * ffn) + layers * 2 * seq * seq * d  # projections + QK^T, AV
    macs += patches * 3 * patch * patch * d + prefix * d * NUM_CLASSES
    if abs(expected_params / params - 1) > PARAMS_TOLERANCE or abs(macs / 1e9 / gmacs - 1) > GMACS_TOLERANCE:
        return None
    return {
        "hidden_size": d,
        "num_layers": layers,
        "num_heads": heads,
        "num_kv_heads": heads,
        "ffn_hidden_size": ffn,
        "vocab_size": 0,
        "gated_mlp": False,
        "tied_embeddings": False,
        "learned_pos_embeddings": pos_rows,
        "seq_len": seq,
    }


def import_timm_benchmark_train(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    frame = read_csv(path)
    flops = _flops_lookup(frame)
    kept: list[dict[str, Any]] = []
    for _, r in frame.iterrows():
        if r["in_latest_version"] != "True":
            sink.skip("superseded: Jan-2022 pt110 value replaced by the Apr-2022 re-run of the same file")
            continue
        if r["memory_layout"] not in KEPT_LAYOUTS:
            sink.skip("channels_last (NHWC) memory layout: the NCHW row is kept (NHWC checks bench/channels_last.py)")
            continue
        gpu = GPU_KEYS.get(r["gpu"])
        if gpu is None:
            sink.skip(f"gpu not in catalog: {r['gpu']}")
            continue
        version = TORCH_VERSIONS.get(r["torch_version_tag"])
        step_ms = parse_number(r["src_train_step_time_ms"])
        samples = parse_number(r["src_train_samples_per_sec"])
        batch = parse_int(r["src_train_batch_size"])
        image = parse_int(r["src_train_img_size"])
        params_m = parse_number(r["src_param_count_m"])
        if version is None or not step_ms or not samples or not batch or not image or not params_m:
            sink.skip("missing step time, throughput, batch, image size, parameter count or torch version")
            continue
        key = (r["model"], image, params_m)
        if key not in flops:
            sink.skip("no GMACs for this model at its train image size in timm's inference CSVs")
            continue
        gmacs, macts = flops[key]
        kept.append(dict(r=r, gpu=gpu, version=version, step_ms=step_ms, samples=samples, batch=batch))
        kept[-1].update(image=image, params_m=params_m, gmacs=gmacs, macts=macts)
    # repeat_index: 0, 1, ... over the torch versions that measured one (model, image size)
    kept.sort(key=lambda k: (k["r"]["model"], k["image"], k["version"]))
    previous, repeat = None, 0
    for k in kept:
        group = (k["r"]["model"], k["image"])
        repeat = repeat + 1 if group == previous else 0
        previous = group
        name, image, params_m = k["r"]["model"], k["image"], k["params_m"]
        _add(
            sink,
            repeat=repeat,
            saved_mb=measured_saved_mb(name, image, params_m),
            census=census_columns(name, image, params_m),
            **k,
        )
    return sink.result()


SAVED_PARAMS_TOLERANCE = 0.05
"""A measured row of the saved-activation table stands for a sweep row only when the model timm
0.9.16 built has the sweep's parameter count within this share: some 2022 names build another
model today (convnext_tiny_in22ft1k was convnext_base's config in the sweep: 88.6 M parameters,
28.6 M today; ig_resnext101_32x16d builds the 32x8d's 88.8 M, not 194 M)."""


@functools.cache  # one read per (table, column): a row asks for up to a dozen columns of two tables
def _measured_table(path: Path, column: str) -> dict[tuple[str, int], tuple[float, float]]:
    if not path.is_file():
        return {}
    table = read_csv(path)
    return {
        (str(m), int(i)): (float(v), float(p))
        for m, i, v, p in zip(table["model"], table["img_size"], table[column], table["params_m"], strict=True)
    }


def _measured(name: str, image: int, params_m: float, path: str | Path, column: str) -> float | None:
    """`column` of `name` at `image` px in a table measured with timm 0.9.16, when the model built
    there has `params_m` million parameters (within SAVED_PARAMS_TOLERANCE); None otherwise."""
    found = _measured_table(Path(path), column).get((name, image))
    if found is None or abs(found[1] / params_m - 1.0) > SAVED_PARAMS_TOLERANCE:
        return None
    return found[0]


def measured_saved_mb(name: str, image: int, params_m: float, path: str | Path = SAVED_ACTIVATIONS) -> float | None:
    """MB per sample that `name` at `image` px saves for backward, measured (`_measured`)."""
    return _measured(name, image, params_m, path, "saved_mb_per_sample")


def measured_gemm_layers(name: str, image: int, params_m: float, path: str | Path = KERNEL_CENSUS) -> int | None:
    """Convolutions and matmuls one forward of `name` at `image` px runs, counted (`_measured`)."""
    found = _measured(name, image, params_m, path, "forward_gemm")
    return None if found is None else int(found)


def census_columns(name: str, image: int, params_m: float, path: str | Path = KERNEL_CENSUS) -> dict[str, Any]:
    """The feature-table columns the kernel census gives `name` at `image` px: gemm_layers (the
    convolutions and matmuls with weights), for a model with depthwise convolutions how many and
    what they read and write, and for a model with attention, attention_layers and what they
    compute; {} when it did not count that model (`_measured`)."""
    layers = measured_gemm_layers(name, image, params_m, path)
    if not layers:
        return {}

    def count(column: str) -> float:
        return _measured(name, image, params_m, path, column) or 0.0

    columns: dict[str, Any] = {"gemm_layers": layers}
    depthwise = int(count("depthwise_conv_layers"))
    if depthwise:
        columns.update(
            depthwise_layers=depthwise,
            depthwise_gflops_per_sample=count("depthwise_conv_gflops"),
            depthwise_melements_per_sample=count("depthwise_conv_melements"),
        )
    grouped = int(count("grouped_conv_layers")) - depthwise
    if grouped > 0:  # the grouped convolutions that are not depthwise
        columns.update(
            grouped_layers=grouped,
            grouped_gflops_per_sample=max(0.0, count("grouped_conv_gflops") - count("depthwise_conv_gflops")),
            grouped_melements_per_sample=max(0.0, count("grouped_conv_melements") - count("depthwise_conv_melements")),
        )
    bmm, softmax = int(count("attention_bmm")), int(count("attention_softmax"))
    if softmax and bmm:
        columns.update(
            gemm_layers=max(1, layers - bmm),
            attention_layers=softmax,
            attention_gflops_per_sample=count("attention_gflops"),
            attention_mscores_per_sample=count("attention_mscores"),
        )
    return columns


def census_note(name: str, image: int, columns: Mapping[str, Any]) -> str:
    """The row note of `census_columns`' columns."""
    attention = (
        f", and {columns['attention_layers']} attentions ({columns['attention_gflops_per_sample']:g} GFLOPs, "
        f"{columns['attention_mscores_per_sample']:g} M scores per sample)"
        if columns.get("attention_layers")
        else ""
    )
    depthwise = (
        f" ({columns['depthwise_layers']} of them depthwise, {columns['depthwise_melements_per_sample']:g} M "
        "elements read and written per sample)"
        if columns.get("depthwise_layers")
        else ""
    )
    return (
        f"gemm_layers = {columns['gemm_layers']} convolutions and matmuls with weights per forward{depthwise}{attention} "
        f"(timm {name} at {image} px, counted: collectors/public/timm_kernel_census.py)"
    )


def _flops_lookup(frame: pd.DataFrame) -> dict[tuple[str, int, float], tuple[float, float]]:
    """(model, image size, params in M) -> (GMACs, million activations) from every row that has them."""
    out: dict[tuple[str, int, float], tuple[float, float]] = {}
    for _, r in frame.iterrows():
        gmacs = parse_number(r["derived_infer_gmacs_same_img"])
        macts = parse_number(r["derived_infer_macts_same_img"])
        image = parse_int(r["src_train_img_size"])
        params = parse_number(r["src_param_count_m"])
        if gmacs and macts and image and params:
            out.setdefault((r["model"], image, params), (gmacs, macts))
    return out


def _add(
    sink: RowSink,
    *,
    repeat: int,
    r: Mapping[str, Any],
    gpu: str,
    version: str,
    step_ms: float,
    samples: float,
    batch: int,
    image: int,
    params_m: float,
    gmacs: float,
    macts: float,
    saved_mb: float | None,
    census: Mapping[str, Any],
) -> None:
    name = r["model"]
    params = float(round(params_m * 1e6))
    dims = vit_dims(name, image, params, gmacs)
    arch = "encoder" if dims else ARCH_BY_GUESS.get(r["derived_arch_guess"], "other")
    if CONVOLUTIONAL_MIXERS.match(name):
        arch = "cnn"
    seq_len = dims.pop("seq_len") if dims else None
    columns: dict[str, Any] = {
        "params_total": params,
        "forward_gflops_per_sample": 2 * gmacs,
        "activation_mb_per_sample": saved_mb if saved_mb is not None else 2 * macts,
    }
    activations = (
        f"activation MB = {saved_mb:g} saved for backward (timm {name} at {image} px, measured: "
        "collectors/public/timm_saved_activations.csv)"
        if saved_mb is not None
        else f"activation MB = {macts:g} M activations x 2 bytes (timm inference CSV, same image size; "
        "not in the saved-activation table, or measured there on a model of another size)"
    )
    notes = [
        f"step_time_s = train_step_time {step_ms:g} ms / 1000; samples_per_s as published",
        f"GFLOPs = 2 x {gmacs:g} GMACs, {activations}",
        "synthetic GPU input (no data loading); fwd + CE + bwd + SGD momentum 0.9 under fp16 autocast; NCHW",
        f"torch {version}, CUDA 11.3",
    ]
    if census and not dims:
        columns.update(census)
        notes.append(census_note(name, image, census))
    if dims:
        columns.update(dims, attention_kernel="eager")
        notes.append(
            f"ViT dims from the name (width {dims['hidden_size']}, depth {dims['num_layers']}, "
            f"heads {dims['num_heads']}, seq {seq_len} = patches + prefix tokens), checked against "
            "timm's param count and GMACs"
        )
    repo, commit, file = r["citation_repo"], r["citation_commit"], r["citation_path"]
    sink.add(
        config={"model": name, "img": image, "torch": version, "layout": r["memory_layout"], "bs": batch},
        run_key={"model": name, "img": image},
        repeat_index=repeat,
        citation=f"{repo}@{commit}:{file} (model {name}, img {image})",
        collected_at=r["first_commit_date"],
        hardware_id="timm RTX 3090 sweep host",
        notes="; ".join(notes),
        model=(name, model_family(name), arch),
        batch=Batch(batch, batch, seq_len),
        precision="amp_fp16",
        optimizer="sgd_momentum",
        layout=Layout(gpu, 1, num_nodes=1, gpu_name_raw=r["gpu"]),
        framework="torch-eager",
        torch_version=version,
        torch_compile=False,
        activation_checkpointing=False,
        step_time_s=step_ms / 1000.0,
        samples_per_s=samples,
        warmup_steps=10,
        measured_steps=40,
        **columns,
    )
