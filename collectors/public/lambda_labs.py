"""Lambda Labs' PyTorch training benchmarks (NVIDIA DeepLearningExamples in NGC containers).

Normalisation:
- The table's `batch_size_per_gpu` column holds the GLOBAL batch: Lambda's
  scripts/compile_results_pytorch_bs.py writes `bs * (num_gpu if per-GPU-flag else 1)` (per-GPU
  configs for ssd/resnet50/bert/gnmt are multiplied by the GPU count; ncf and transformer-xl
  configs are already global), and the values scale with the GPU count. So
  global_batch_size = that value and micro_batch_size = global / num_gpus (no accumulation).
- step_time_s = global_batch_size / samples_per_s_total (images/s, sequences/s, samples/s), or
  global_batch_size * tgt_len / tokens_per_s_total for Transformer-XL (tgt_len 192 base, 256 large,
  from Lambda's config_v1 scripts).
- ResNet-50 runs NCHW (channels_last false): Lambda's configs pass no --memory-format to
  DeepLearningExamples' ConvNets main.py, whose default is nchw (PyTorch/Classification/ConvNets/
  main.py @ 0107cf27), unlike NVIDIA's own AMP benchmark configs (collectors.public.dle).
- BERT SQuAD rows use seq_len 384 (DeepLearningExamples run_squad.sh max_seq_length).
- precision: "fp16 (AMP/mixed)" -> amp_fp16. "fp32" -> tf32 on Ampere and newer (NGC PyTorch
  containers enable TF32 for cuDNN convolutions and, through TORCH_ALLOW_TF32_CUBLAS_OVERRIDE,
  for cuBLAS matmuls), fp32 on Volta/Turing/Pascal.
- Skipped: tasks without a catalog model (maskrcnn, tacotron2, waveglow); gnmt (throughput in
  tokens/s while the batch is in sentences of variable length: no per-step meaning); -1 (not
  run); rows without a batch size (the v2 tables have none); GPUs not in the catalog; multi-GPU
  rows whose per-GPU throughput is more than 4x that of the same task, GPU and precision on the
  fewest GPUs measured (upstream anomalies: NCF on 4-8 H100s at billions of samples/s per GPU).
- Versions: the same (table file, system name, task, precision) in several commits keeps only
  the current/latest value (older ones were re-runs that Lambda replaced). The same values under
  a renamed system in another table file are kept once. Different systems with the same GPU,
  count and batch (e.g. several 8x H100 SXM5 hosts) are distinct measurements: all kept, with
  repeat_index 0, 1, ... and one shared run_group (repeats of one configuration are one vote).
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import pandas as pd

from collectors.public._common import Batch, ImportResult, Layout, RowSink, parse_int, parse_number, read_csv

# Lambda's GPU name (system prefix and count removed) -> catalog key; None = not in the catalog.
GPU_KEYS: dict[str, str | None] = {
    "A10": "A10",
    "A100 40GB PCIe": "A100-PCIe-40GB",
    "A100 40GB SXM4": "A100-40GB",
    "A100 80GB PCIe": "A100-PCIe-80GB",
    "A100 80GB SXM4": "A100-80GB",
    "p4d.24xlarge": "A100-40GB",  # AWS: 8x A100 40GB SXM4
    "Ada A6000": "RTX-6000-Ada",  # Lambda's early name for the RTX 6000 Ada Generation
    "RTX 6000 Ada": "RTX-6000-Ada",
    "B200 192GB SXM5": "B200",
    "GH200 96GB": "GH200",
    "GTX 1080Ti": "GTX-1080Ti",
    "H100 80GB PCIe": "H100-PCIe",
    "H100 80GB PCIe Gen4": "H100-PCIe",
    "H100 80GB PCIe Gen5": "H100-PCIe",
    "H100 80GB SXM5": "H100-SXM",
    "Quadro RTX 8000": "Quadro-RTX-8000",
    "Quadro RTX 8000 V1": "Quadro-RTX-8000",
    "RTX 8000": "Quadro-RTX-8000",
    "RTX 2080Ti": "RTX-2080Ti",
    "RTX 3080": "RTX-3080",
    "RTX 3090": "RTX-3090",
    "RTX 4090": "RTX-4090",
    "RTX A40": "A40",
    "RTX A6000": "RTX-A6000",
    "Titan RTX": "Titan-RTX",
    "V100 16GB": "V100-16GB",  # Lambda Cloud V100 16GB: 300 W per GPU listed = SXM2
    "p3.16xlarge": "V100-16GB",  # AWS: 8x V100 SXM2 16GB
    "p3.8xlarge": "V100-16GB",  # AWS: 4x V100 SXM2 16GB
    "V100 32GB": "V100-PCIe-32GB",  # Lambda lists 250 W per GPU: the PCIe part (SXM2 is 300 W)
    "Quadro RTX 6000": "Quadro-RTX-6000",
    "RTX 6000": "Quadro-RTX-6000",  # Turing Quadro RTX 6000 (listed beside RTX 8000 / RTX 5000)
    "RTX A4000": "RTX-A4000",
    "RTX A5000": "RTX-A5000",
    # Not in the catalog:
    "Quadro RTX 5000": None,
    "RTX 5000": None,
    "RTX 3070": None,
    "RTX 3080 Max-Q": None,
    "RTX 3090Ti": None,
    "RTX 2070 MAX-Q": None,
    "RTX 2080 MAX-Q": None,
    "RTX 2080 SUPER MAX-Q": None,
    "RTX A4500": None,
    "RTX A5500": None,
}
PRE_AMPERE = {
    "V100-16GB",
    "V100-32GB",
    "V100-PCIe-16GB",
    "V100-PCIe-32GB",
    "Quadro-RTX-6000",
    "Titan-RTX",
    "Quadro-RTX-8000",
    "RTX-2080Ti",
    "GTX-1080Ti",
    "P100",
    "P4",
    "T4",
}

# task -> (catalog model key, family, arch, seq_len or None, unit of the throughput)
TASKS: dict[str, tuple[str, str, str, int | None, str]] = {
    "resnet50": ("resnet50", "resnet", "cnn", None, "samples"),
    "ssd": ("ssd300", "ssd", "cnn", None, "samples"),
    "bert_base_squad": ("bert-base", "bert", "encoder", 384, "samples"),
    "bert_large_squad": ("bert-large", "bert", "encoder", 384, "samples"),
    "transformerxlbase": ("transformer-xl-base", "transformer-xl", "decoder", 192, "tokens"),
    "transformerxllarge": ("transformer-xl-large", "transformer-xl", "decoder", 256, "tokens"),
    "ncf": ("ncf", "ncf", "mlp", None, "samples"),
}
SKIP_TASKS = {
    "gnmt": "gnmt: tokens/s with a batch in sentences (no per-step meaning)",
    "maskrcnn": "task without a catalog model (maskrcnn)",
    "tacotron2": "task without a catalog model (tacotron2)",
    "waveglow": "task without a catalog model (waveglow)",
}
# Transformer-XL dims from Lambda's config_v1 scripts (DLE wt103 base / large).
TXL_DIMS = {"transformerxlbase": (16, 512, 8, 2048), "transformerxllarge": (18, 1024, 16, 4096)}
TXL_VOCAB = 267_735
"""Lambda runs DeepLearningExamples' Transformer-XL without `--adaptive` (its config_v1 scripts pass
no such flag; the runs' own logs print adaptive=False, tied=True, n_token 267735: e.g.
lambdal/deeplearning-benchmark@e167f02c pytorch/results/1080Ti/PyTorch_transformerxlbase_FP16/
03-03-2020_08-34-39.txt): a full softmax over WikiText-103's 267,735 words, through the output
layer tied to the input embedding, every step."""
TXL_PARAMS = {"transformerxlbase": 191_948_759, "transformerxllarge": 519_963_095}
"""n_all_param of those logs (base: .../PyTorch_transformerxlbase_FP16/03-03-2020_08-34-39.txt,
large: .../PyTorch_transformerxllarge_FP16/03-03-2020_08-37-17.txt): 137 M of them the embedding."""
TASK_OPTIMIZER = {
    "transformerxlbase": None,
    "transformerxllarge": "adam",
    "resnet50": "sgd_momentum",
    "bert_base_squad": "adamw",
    "bert_large_squad": "adamw",
}
"""What each task's DeepLearningExamples script steps with under Lambda's configs (which pass no
optimizer flag unless said): Transformer-XL the configs' --optim (base jitlamb: LAMB, not in the
catalog, left unset; large adam); ResNet-50 ConvNets main.py's defaults, --optimizer sgd with
--momentum 0.9 (PyTorch/Classification/ConvNets/main.py @ 0107cf27); BERT run_squad.py's Adam with
decoupled weight decay 0.01 (apex FusedAdam under --fp16, BertAdam otherwise;
PyTorch/LanguageModeling/BERT/run_squad.py @ 0663b67c), as NVIDIA's own SQuAD rows are described
(collectors.public.dle). NCF (FusedAdam) stays unset as NVIDIA's NCF rows do."""
_PREFIX = re.compile(
    r"^(LambdaCloud|Lambda Cloud —|Lambda Cloud|Linode Cloud —|Dell|DellTexas|SMC|RAIDZ1|1CC)\s+"
)


def gpu_name(config_name: str) -> tuple[str, int | None]:
    """Lambda system name -> (GPU name, count in the name)."""
    name = _PREFIX.sub("", config_name.strip())
    name = re.sub(r"\s+(pytorch_)?24\.03$", "", name)
    count = None
    match = re.match(r"^(\d+)\s*x\s*(.*)$", name)
    if match:
        count, name = int(match.group(1)), match.group(2)
    return re.sub(r"\s+NVLink$", "", name), count


def import_lambda_deeplearning_benchmark_pytorch(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    frame = read_csv(path)
    frame = _latest_versions(frame, sink)
    rows = []
    for _, r in frame.iterrows():
        task = r["model"]
        if task in SKIP_TASKS:
            sink.skip(SKIP_TASKS[task])
            continue
        if task not in TASKS:
            sink.skip(f"unknown task {task}")
            continue
        throughput = parse_number(r["throughput_total"])
        if throughput is None or throughput <= 0:
            sink.skip("throughput -1 (not run or failed)")
            continue
        gbs = parse_int(r["batch_size_per_gpu"])
        if not gbs:
            sink.skip("no batch size (v2 tables have no batch-size CSV)")
            continue
        name, count = gpu_name(r["config_name"])
        if name not in GPU_KEYS:
            sink.skip(f"unrecognised system name: {r['config_name']}")
            continue
        gpu = GPU_KEYS[name]
        if gpu is None:
            sink.skip(f"gpu not in catalog: {name}")
            continue
        n_gpus = parse_int(r["num_gpu"])
        if not n_gpus or (count is not None and count != n_gpus) or gbs % n_gpus:
            sink.skip("GPU count inconsistent with the system name or batch")
            continue
        rows.append((r, gpu, n_gpus, gbs, throughput))
    rows = _drop_implausible(rows, sink)
    # Repeats: several systems with the same GPU kind, count, task, precision and batch.
    groups: dict[tuple, int] = {}
    for r, gpu, n_gpus, gbs, throughput in rows:
        key = (gpu, n_gpus, r["model"], r["precision"], gbs)
        repeat = groups.get(key, 0)
        groups[key] = repeat + 1
        _add(sink, r, gpu, n_gpus, gbs, throughput, repeat)
    return sink.result()


IMPLAUSIBLE_PER_GPU_RATIO = 4.0
"""A multi-GPU row whose per-GPU throughput exceeds this multiple of the per-GPU throughput at the
fewest GPUs measured for the same task, GPU and precision (median over those rows) is an
upstream anomaly: data parallelism cannot make each GPU several times faster than it runs
alone. Seen for NCF on 4-8x H100 SXM / A100 (1-3 billion samples/s per GPU against ~70 million on
one GPU of the same kind)."""


def _drop_implausible(rows: list[tuple], sink: RowSink) -> list[tuple]:
    by_count: dict[tuple, dict[int, list[float]]] = {}
    for r, gpu, n_gpus, _gbs, throughput in rows:
        key = (r["model"], gpu, r["precision"])
        by_count.setdefault(key, {}).setdefault(n_gpus, []).append(throughput / n_gpus)
    reference = {
        key: (min(counts), statistics.median(counts[min(counts)])) for key, counts in by_count.items()
    }
    kept = []
    for row in rows:
        r, gpu, n_gpus, _gbs, throughput = row
        fewest, per_gpu = reference[(r["model"], gpu, r["precision"])]
        if n_gpus > fewest and throughput / n_gpus > IMPLAUSIBLE_PER_GPU_RATIO * per_gpu:
            sink.skip(
                f"implausible: per-GPU throughput > {IMPLAUSIBLE_PER_GPU_RATIO:g}x that of the same task, "
                "GPU and precision on fewer GPUs"
            )
            continue
        kept.append(row)
    return kept


def _latest_versions(frame: pd.DataFrame, sink: RowSink) -> pd.DataFrame:
    frame = frame.copy()
    frame["_head"] = frame["in_head"] == "True"
    frame = frame.sort_values(["_head", "last_date", "first_date"], kind="stable")
    key = ["source", "config_name", "model", "precision", "batch_size_per_gpu"]
    latest = ~frame.duplicated(key, keep="last")
    sink.skip("superseded by a later value of the same system/task in the same table", int((~latest).sum()))
    frame = frame[latest]
    # The same numbers under a renamed system in another table file (e.g. csv_v1_v2 copies).
    frame["_gpu"] = [GPU_KEYS.get(gpu_name(n)[0]) or gpu_name(n)[0] for n in frame["config_name"]]
    frame["_n"] = [parse_number(n) for n in frame["num_gpu"]]
    frame["_v"] = [parse_number(v) for v in frame["throughput_total"]]
    same = frame.duplicated(["_gpu", "_n", "model", "precision", "batch_size_per_gpu", "_v"], keep="last")
    sink.skip("same values as a row of another table version", int(same.sum()))
    return frame[~same].sort_index()


EAGER_ATTENTION_FAMILIES = {
    "bert": "LambdaLabsML/DeepLearningExamples runs NVIDIA's PyTorch BERT run_squad.py with --fp16: apex amp O2, "
    "the model in fp16; eager attention (modeling.py BertSelfAttention: torch.bmm, F.softmax, dropout)",
    "transformer-xl": "Transformer-XL pytorch/train.py --fp16 with --amp apex, --apex_amp_opt_level O2 by default: "
    "the model in fp16; eager attention (mem_transformer.py)",
}
"""Tasks whose 16-bit runs cast the model to fp16 under apex amp O2 (precision 'fp16') and compute
attention on the math path (attention_kernel 'eager'): NVIDIA/DeepLearningExamples@729963dd, which
the benchmark's fork (pytorch/README.md: git clone LambdaLabsML/DeepLearningExamples) runs."""


def _add(
    sink: RowSink, r: pd.Series, gpu: str, n_gpus: int, gbs: int, throughput: float, repeat: int
) -> None:
    model, family, arch, seq_len, unit = TASKS[r["model"]]
    eager = family in EAGER_ATTENTION_FAMILIES
    if r["precision"].startswith("fp16") and eager:
        precision = "fp16"
        prec_note = f"fp16 -> fp16 ({EAGER_ATTENTION_FAMILIES[family]})"
    elif r["precision"].startswith("fp16"):
        precision = "amp_fp16"
        prec_note = "fp16 (AMP/mixed) -> amp_fp16"
    else:
        precision = "fp32" if gpu in PRE_AMPERE else "tf32"
        prec_note = f"fp32 -> {precision} (NGC containers enable TF32 on Ampere+)"
    if unit == "tokens":
        tokens = throughput
        samples = throughput / seq_len  # type: ignore[operator]
        step = gbs * seq_len / tokens  # type: ignore[operator]
        derivation = f"step_time_s = global_batch*tgt_len / tokens_per_s = {gbs}*{seq_len}/{throughput:g}"
    else:
        samples = throughput
        tokens = throughput * seq_len if seq_len else None
        step = gbs / samples
        derivation = f"step_time_s = global_batch / samples_per_s = {gbs}/{throughput:g}"
    repo, _, file = r["source"].partition(":")
    citation = f"{repo}@{r['last_commit']}:{file} (row '{r['config_name']}', column {r['model']})"
    dims = {}
    if r["model"] in TXL_DIMS:
        n_layers, d, heads, ffn = TXL_DIMS[r["model"]]
        dims = {
            "num_layers": n_layers,
            "hidden_size": d,
            "num_heads": heads,
            "num_kv_heads": heads,
            "ffn_hidden_size": ffn,
            "gated_mlp": False,
            "vocab_size": TXL_VOCAB,
            "tied_embeddings": True,
            "learned_pos_embeddings": 0,
            "params_total": TXL_PARAMS[r["model"]],
        }
    notes = (
        f"{derivation}; batch column = global batch (compile_results_pytorch_bs.py); {prec_note}; "
        f"throughput {r['throughput_metric']}; in_head={r['in_head']}"
    )
    if r["model"] in TXL_DIMS:
        notes += (
            f"; full softmax over {TXL_VOCAB:,} words through the tied embedding (no --adaptive: runs' logs "
            f"print adaptive=False), {TXL_PARAMS[r['model']]:,} parameters (the logs' n_all_param); not "
            "expressible: the relative-position attention over tgt_len + mem_len keys"
        )
    sink.add(
        config={
            "system": r["config_name"],
            "task": r["model"],
            "precision": r["precision"],
            "n": n_gpus,
            "bs": gbs,
        },
        run_key={"repeats_of": [gpu, n_gpus, r["model"], r["precision"], gbs]},
        repeat_index=repeat,
        citation=citation,
        collected_at=r["first_date"],
        hardware_id=r["config_name"],
        notes=notes,
        model=(model, family, arch),
        **dims,
        batch=Batch(gbs // n_gpus, gbs, seq_len),
        precision=precision,
        optimizer=TASK_OPTIMIZER.get(r["model"]),
        layout=Layout(gpu, n_gpus, num_nodes=1 if n_gpus <= 8 else None, gpu_name_raw=r["config_name"]),
        framework="dle-ngc",
        attention_kernel="eager" if eager else None,
        step_time_s=step,
        tokens_per_s=tokens,
        samples_per_s=samples,
    )
