"""NeuSight (ASPLOS'25, sitar-lab/NeuSight @ 6945927d): fp32 kernel timings on 12 accelerators.

Two parts of the repository:
- Operator datasets (`scripts/asplos/data/dataset/{train,test}/*.csv`, `train/collect/<op>/`): single
  ops swept over shapes and timed alone, forward only (`neusight/Dataset/collect.py`: under
  torch.no_grad, CUDA events around one call, the mean of the fastest `sample` of `active` calls;
  Latency in ms). `linear` = nn.Linear(N, K, bias=True) on a (B, M, N) input (a GEMM of B*M rows,
  inner N, out K); `bmm` = torch.bmm of (B, M, N) and (B, N, K); `ln` = nn.LayerNorm(H) and `softmax`
  on (B, H); elementwise ops on (B, H) tensors (`add`/`mul`/`div`/`pow` of two tensors, `addu`
  etc. of a tensor and a scalar, `relu`, `gelu`, `tanh`). Read from a checkout of the repository
  (`--neusight-repo`): the shared data folder holds only its label traces.
- Per-op training traces (`scripts/asplos/label/<GPU>/<model>-train-*.csv`, in shared/data/public_raw):
  every fx node of one Hugging Face GPT-2 / BERT / OPT / GPT-3 training step with its forward and
  backward latency (ms), on MI100/MI210/MI250, A100 80GB PCIe, H100, L4 and V100 too. Kept: the
  matmuls (nn.Linear, GPT-2's Conv1D addmm, the attention matmul/bmm), LayerNorm, Dropout,
  Embedding, softmax and GELU (forward and backward), and tensor-tensor add / mul (forward).
  Repeated nodes of one trace with the same shape are one row (their median).

dtype: fp32 everywhere. PyTorch >= 1.12 leaves TF32 matmuls off by default and the datasets' kernel
names confirm it (`ampere_sgemm_128x64_tn`, `volta_sgemm_*`: FP32 FFMA kernels, not `*_tf32_*`);
collect.py also sets `torch.backends.cudnn.allow_tf32 = False`. Each single-op timing includes the
launch (events around one call), which the efficiency's per-launch term absorbs.

L2-resident rows are kept: NeuSight times the same tensors again and again without flushing the
L2 cache, so a memory-bound op whose bytes fit in the accelerator's L2 (`GPUSpec.l2_cache_mb`)
runs from L2, faster than streaming from HBM, as a small op does in a training step on the tensor
its neighbour just wrote. They are what the kernel model's L2 terms are fitted on
(perfmodel/kernels/fitting.py). Left out: the embedding backwards whose time the index loop sets,
not the bytes (`_feature_kernel_bound`).

Rows are capped per (file, accelerator, op) at `MAX_ROWS_PER_GROUP` (elementwise ops:
`MAX_ELEMENTWISE_ROWS`) by a seeded sample, so the table stays small and the fit fast; the cap and
the seed are in the row notes.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from collectors.public.kernel_rows import KernelImport
from perfmodel.catalog import get_gpu
from perfmodel.kernels import work as W

REPO = "sitar-lab/NeuSight"
COMMIT = "6945927d9afcca2b9daf021f8395e53edc5b4eef"
SOURCE_OPS = "neusight_op_datasets"
SOURCE_TRACES = "neusight_op_traces"
MAX_ROWS_PER_GROUP = 250
MAX_ELEMENTWISE_ROWS = 60
SEED = 21

GPU_KEYS = {
    "NVIDIA A100-PCIE-40GB": "A100-PCIe-40GB",
    "NVIDIA A100 80GB PCIe": "A100-PCIe-80GB",
    "NVIDIA A100-SXM4-40GB": "A100-40GB",
    "NVIDIA H100 80GB HBM3": "H100-SXM",
    "NVIDIA L4": "L4",
    "Tesla P100-PCIE-16GB": "P100",
    "Tesla P4": "P4",
    "Tesla T4": "T4",
    "Tesla V100-PCIE-32GB": "V100-PCIe-32GB",
    "AMD Instinct MI100": "MI100",
    "AMD Instinct MI210": "MI210",
    "AMD Instinct MI250": "MI250",
}
"""Device strings (and label folder names with '_' for ' ') -> catalog keys. 'H100 80GB HBM3' is the
SXM part (HBM3; the PCIe card has HBM2e)."""

OP_FILES = (
    "test/linear.csv", "test/bmm.csv", "test/elem.csv", "test/ln.csv", "test/softmax.csv",
    "train/elem.csv", "train/ln.csv", "train/softmax.csv",
)  # fmt: skip
OP_DIRS = ("train/collect/linear/p2.1.0", "train/collect/bmm/p2.1.0")
DATASET = "scripts/asplos/data/dataset"

ELEMENTWISE = {
    "add": ("add", 2), "mul": ("mul", 2), "div": ("mul", 2), "pow": ("mul", 2),
    "addu": ("scale", 1), "mulu": ("scale", 1), "divu": ("scale", 1), "powu": ("scale", 1), "tanh": ("scale", 1),
}  # fmt: skip
"""NeuSight elementwise op -> (variant, tensor inputs): binary ops move like add/mul, ops with a
scalar operand (and tanh) like a scale (one tensor in, one out)."""


def _git_show(repo: Path, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), "show", f"{COMMIT}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _git_ls(repo: Path, folder: str) -> list[str]:
    out = subprocess.run(
        ["git", "--git-dir", str(repo), "ls-tree", "--name-only", f"{COMMIT}:{folder}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [f"{folder}/{name}" for name in out.splitlines() if name.endswith(".csv")]


def _git_dir(repo: Path) -> Path:
    return repo / ".git" if (repo / ".git").exists() else repo


def _sample(frame: pd.DataFrame, by: list[str], cap: int) -> pd.DataFrame:
    rng = np.random.default_rng(SEED)
    parts = []
    for _, g in frame.groupby(by, sort=True):
        parts.append(g if len(g) <= cap else g.iloc[np.sort(rng.choice(len(g), cap, replace=False))])
    return pd.concat(parts) if parts else frame.iloc[:0]


def _op_work(op: str, r: dict[str, Any]) -> W.KernelWork | None:
    if op == "linear":
        return W.matmul_work(int(r["B"]) * int(r["M"]), int(r["K"]), int(r["N"]), "fp32")
    if op == "bmm":
        b, m, n, k = (int(r[c]) for c in "BMNK")
        return W.matmul_work(m, k, n, "fp32", batch=b)
    rows, cols = int(r["B"]), int(r["H"])
    if op == "ln":
        return W.norm_work(rows, cols, "fp32", variant="layer")
    if op == "softmax":
        return W.elementwise_work(rows * cols, "fp32", variant="softmax", inputs=1, outputs=1, rows=rows)
    if op in ("relu", "gelu"):
        return W.activation_work(rows, cols, "fp32", variant=op)
    if op in ELEMENTWISE:
        variant, inputs = ELEMENTWISE[op]
        return W.elementwise_work(rows * cols, "fp32", variant=variant, inputs=inputs, outputs=1, rows=rows)
    return None


def import_neusight_op_datasets(repo: str | Path) -> KernelImport:
    """The operator datasets, from a checkout (or bare clone) of sitar-lab/NeuSight at COMMIT."""
    git = _git_dir(Path(repo))
    out = KernelImport(SOURCE_OPS)
    paths = [f"{DATASET}/{f}" for f in OP_FILES] + [
        p for d in OP_DIRS for p in _git_ls(git, f"{DATASET}/{d}")
    ]
    for path in paths:
        frame = pd.read_csv(io.StringIO(_git_show(git, path)))
        cap = MAX_ELEMENTWISE_ROWS if "elem" in path else MAX_ROWS_PER_GROUP
        frame = _sample(frame, ["Device", "OPName"], cap)
        for r in frame.to_dict("records"):
            gpu = GPU_KEYS.get(str(r["Device"]).strip())
            op = str(r["OPName"])
            work = _op_work(op, r) if gpu else None
            if work is None or not r["Latency"] > 0:
                out.skip(f"op {op} or device {r['Device']} not mapped")
                continue
            shape = {c: r[c] for c in ("B", "M", "N", "K", "H") if c in r}
            out.add(
                work,
                gpu=gpu,  # type: ignore[arg-type]
                time_s=float(r["Latency"]) / 1e3,
                citation=f"{REPO}@{COMMIT}:{path}",
                identity={"path": path, "op": op, **shape, "latency": r["Latency"]},
                gpu_name_raw=str(r["Device"]),
                provider_raw=op,
                kernel_name_raw=str(r.get("Kernel Name", ""))[:120],
                torch_version=str(r.get("Torch Version", "")),
                notes=f"forward only, torch.no_grad; dims {shape}; sampled <= {cap} per device x op (seed {SEED})",
            )
    return out


# --- per-op training traces -------------------------------------------------------------------------

_VOCAB = {"gpt2_large": 50257, "gpt3_xl": 50257, "gpt3_27": 50257, "bert_large": 30522, "opt_13": 50272}
_POSITIONS = {"gpt2_large": 1024, "gpt3_xl": 2048, "gpt3_27": 2048, "bert_large": 512, "opt_13": 2050}
"""Token and position vocabularies (scripts/asplos/data/DLmodel_configs/<model>.json: vocab_size,
n_positions / max_position_embeddings; OPT's learned positions have 2 offset rows)."""


def _shapes(cell: Any) -> list[list[int]]:
    try:
        value = ast.literal_eval(str(cell))
    except (ValueError, SyntaxError):
        return []
    return [list(s) for s in value if isinstance(s, (list, tuple))]


def _numel(shape: list[int]) -> int:
    return int(np.prod(shape)) if shape else 1


def _module_class(meta: str) -> str:
    found = re.findall(r"<class '([\w.]+)'>", meta)
    return found[-1].rsplit(".", 1)[-1] if found else ""


def _trace_works(r: dict[str, Any], model: str) -> tuple[str, Any] | None:
    """(op label, maker(phase) -> KernelWork) of one trace node, or None when not kept."""
    shapes = _shapes(r["input_shapes"])
    out_shape = [int(v) for v in re.findall(r"\d+", str(r["output_shape"]))]
    target, op = str(r["target"]), str(r["op"])
    if not shapes:
        return None
    if op == "call_module":
        cls = _module_class(str(r["meta"]))
        x = shapes[0]
        rows, cols = _numel(x[:-1]), x[-1] if x else 1
        if cls == "Linear" and out_shape:
            return "linear", lambda ph: W.matmul_work(rows, out_shape[-1], cols, "fp32", phase=ph)
        if cls == "LayerNorm":
            return "layer_norm", lambda ph: W.norm_work(rows, cols, "fp32", variant="layer", phase=ph)
        if cls == "Dropout":
            return "dropout", lambda ph: W.elementwise_work(
                _numel(x), "fp32", variant="dropout", inputs=1, outputs=1, phase=ph
            )
        if cls == "Embedding" and out_shape:
            vocab = (
                _POSITIONS[model]
                if target.endswith(("wpe", "position_embeddings", "embed_positions"))
                else _VOCAB[model]
            )
            return "embedding", lambda ph: W.embedding_work(_numel(x), vocab, out_shape[-1], "fp32", phase=ph)
        if cls in ("GELUActivation", "GELU"):
            return "gelu", lambda ph: W.activation_work(rows, cols, "fp32", variant="gelu", phase=ph)
        return None
    if op != "call_function":
        return None
    if "addmm" in target and len(shapes) == 3:
        (_, (m, k), (_, n)) = shapes[0], shapes[1], shapes[2]
        return "addmm", lambda ph: W.matmul_work(m, n, k, "fp32", phase=ph)
    if ("matmul" in target or "bmm" in target) and len(shapes) == 2 and len(shapes[0]) >= 3:
        a, b = shapes
        batch, m, k, n = _numel(a[:-2]), a[-2], a[-1], b[-1]
        return "bmm", lambda ph: W.matmul_work(m, n, k, "fp32", batch=batch, phase=ph)
    if "softmax" in target:
        x = shapes[0]
        return "softmax", lambda ph: W.elementwise_work(
            _numel(x), "fp32", variant="softmax", inputs=1, outputs=1, phase=ph, rows=_numel(x[:-1])
        )
    if target in ("<built-in function gelu>",):
        x = shapes[0]
        return "gelu", lambda ph: W.activation_work(_numel(x[:-1]), x[-1], "fp32", variant="gelu", phase=ph)
    if target in ("<built-in function add>", "<built-in function mul>") and len(shapes) == 2 and out_shape:
        big = _numel(out_shape)
        if big >= 4096 and all(_numel(s) == big for s in shapes):  # two full tensors, no broadcast
            variant = "add" if "add" in target else "mul"
            return variant, lambda ph: W.elementwise_work(
                big, "fp32", variant=variant, inputs=2, outputs=1, phase=ph
            )
    return None


FEATURE_KERNEL_MAX_INDICES = 3072
"""PyTorch's embedding_dense_backward_cuda (aten/src/ATen/native/cuda/Embedding.cu): with at most
3072 indices it zero-fills the gradient and runs embedding_backward_feature_kernel, a grid of
dim / 32 blocks that each loop over every index."""


def _feature_kernel_bound(work: W.KernelWork, gpu: str) -> bool:
    """True for an embedding backward on the few-indices path whose gradient table fits in L2: there
    the feature kernel's loop over the indices, on dim / 32 blocks, sets the time, not the bytes of
    the dense gradient the work model prices (a learned-position or token-type table)."""
    if work.kind != "embedding" or work.phase != "backward":
        return False
    tokens, vocab, dim = work.shape
    return tokens <= FEATURE_KERNEL_MAX_INDICES and vocab * dim * 4 < get_gpu(gpu).l2_cache_mb * 1e6


def import_neusight_op_traces(label_dir: str | Path) -> KernelImport:
    """The per-op training traces in <public_raw>/neusight/scripts/asplos/label/."""
    out = KernelImport(SOURCE_TRACES)
    folder = Path(label_dir)
    for path in sorted(folder.glob("*/*-train-*.csv")):
        gpu = GPU_KEYS.get(path.parent.name.replace("_", " "))
        model = path.stem.split("-")[0]
        if (
            gpu is None
            or model not in _VOCAB
            or "-dp" in path.stem
            or "-tp" in path.stem
            or "-pp" in path.stem
        ):
            out.skip("device, model or a multi-GPU trace not mapped")
            continue
        frame = pd.read_csv(path)
        kept: dict[tuple[str, str, str], list[float]] = {}
        makers: dict[tuple[str, str, str], Any] = {}
        for r in frame.to_dict("records"):
            found = _trace_works(r, model)
            if found is None:
                continue
            label, make = found
            for phase, col in (("forward", "fw_latency"), ("backward", "bw_latency")):
                if phase == "backward" and label in ("add", "mul"):
                    continue  # the node's backward is a pass-through or fused into its neighbours'
                value = float(r[col])
                if not value > 0:
                    continue
                work = make(phase)
                if _feature_kernel_bound(work, gpu):
                    continue
                key = (label, phase, "x".join(map(str, work.shape)))
                kept.setdefault(key, []).append(value)
                makers[key] = work
        rel = path.relative_to(folder.parents[2]) if len(folder.parents) > 2 else path.name
        for key, values in kept.items():
            label, phase, shape = key
            out.add(
                makers[key],
                gpu=gpu,
                time_s=float(np.median(values)) / 1e3,
                citation=f"{REPO}@{COMMIT}:{rel}",
                identity={
                    "file": path.name,
                    "gpu_dir": path.parent.name,
                    "op": label,
                    "phase": phase,
                    "shape": shape,
                },
                gpu_name_raw=path.parent.name,
                provider_raw=label,
                kernel_name_raw=f"{model} {label}",
                notes=f"per-op {phase} latency of a Hugging Face {model} training step (fp32), median of {len(values)} node(s)",
            )
    return out
