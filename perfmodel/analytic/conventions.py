"""Pinned conventions. Every FLOP, byte and MFU number in perfmodel follows these, including
when public MFU figures are read. Change them here or nowhere.

FLOPs (PaLM, Chowdhery et al. 2022, appendix B):
    training FLOPs per token = 6 * N_matmul + 12 * L * d * s
  * N_matmul: every weight that takes part in a matmul per token: the transformer blocks plus the
    LM head (d x V, counted even when tied to the input embedding, because the output projection
    is a real matmul). The input embedding lookup and learned position tables are not matmuls and
    are excluded. For MoE, only the experts a token is routed to count.
  * 12*L*d*s: attention scores and attention-weighted values, counted NON-causal (the full s x s
    matrix), as PaLM and LLM Foundry's collect_results.py do. Sources that count attention causal
    (half) or exclude it are converted when read.
  * forward = 2*N + 4*L*d*s; backward = 2 x forward.
  * full activation recomputation adds one forward (8*N instead of 6*N) - this is *hardware*
    FLOPs; MFU always uses the 6*N model FLOPs (Korthikanti et al. 2022, section 5).
  * frozen weights (LoRA base, `trainable: false` with gradients flowing through): no
    weight-gradient matmul, so backward is 2*N instead of 4*N (about 4*N per token in total).
  * a frozen module that nothing upstream needs gradients for runs forward only (2*N).
MFU: model FLOPs per second / (num GPUs * dense datasheet peak of the compute dtype in use), where
model FLOPs are what the algorithm needs: 6N + 12Lds for full training, 4N + 12Lds with a frozen
(LoRA) base, never counting recomputation.

Bytes per parameter (ZeRO, Rajbhandari et al. 2020, section 3.1; PyTorch AMP docs):
  * fp32 / tf32: weights 4 + grads 4 (+ Adam moments 8) = 16
  * amp_bf16 / amp_fp16: fp32 weights 4 + fp32 grads 4 (+ Adam 8) = 16; matmuls and activations in 16-bit
  * bf16 / fp16 (the whole model cast, e.g. `model.to(torch.bfloat16)`): weights 2 + grads 2 +
    Adam moments in the same dtype 4 = 8
  * fp8 (Transformer Engine): bf16 weights 2 + fp32 master 4 + bf16 grads 2 + Adam 8 = 16

Activations kept for backward per transformer layer (Korthikanti et al. 2022, eq. 1, with a
fused/flash SDPA kernel that does not store the s x s score matrix): 34 * s * b * d bytes in 16-bit;
with full recomputation only the layer input, 2 * s * b * d bytes, plus one layer recomputed.
"""

from __future__ import annotations

import math

ATTENTION_FLOPS_COEFF = 12
"""12 * L * d * s training FLOPs per token for attention (non-causal, PaLM appendix B)."""

PARAM_FLOPS_FORWARD = 2
"""Forward FLOPs per matmul weight per token (one multiply-add)."""

ACTIVATION_BYTES_PER_LAYER_COEFF = 34
"""Bytes of activations per layer = 34 * s * b * d at 16-bit (Korthikanti et al. 2022, eq. 1)."""

CHECKPOINT_BYTES_PER_LAYER_COEFF = 2
"""Bytes per layer kept with full recomputation: the layer input, 2 * s * b * d at 16-bit."""

LOGITS_BYTES_PER_ELEMENT = 8
"""fp32 logits and their gradient for the cross-entropy loss: 4 + 4 bytes per (token, vocab)."""

# --- memory ---------------------------------------------------------------------------------

FRAMEWORK_OVERHEAD_GB = 1.0
"""CUDA context, cuBLAS/cuDNN workspaces and allocator slack on a GPU, in GB (measured peaks
from max_memory_reserved typically exceed the tensor total by 0.5-1.5 GB)."""

FRAGMENTATION_FRACTION = 0.05
"""Allocator fragmentation as a fraction of tensor memory."""

WEIGHT_BYTES = {"fp32": 4, "tf32": 4, "amp_bf16": 4, "amp_fp16": 4, "bf16": 2, "fp16": 2, "fp8": 2}
"""Bytes per weight as stored on the device, by training precision."""

MASTER_BYTES = {"fp8": 4}
"""Extra fp32 master copy per trainable weight (fp8 training keeps one)."""

GRAD_BYTES = {"fp32": 4, "tf32": 4, "amp_bf16": 4, "amp_fp16": 4, "bf16": 2, "fp16": 2, "fp8": 2}
"""Bytes per gradient element, by training precision."""

ACTIVATION_BYTES = {"fp32": 4, "tf32": 4, "amp_bf16": 2, "amp_fp16": 2, "bf16": 2, "fp16": 2, "fp8": 2}
"""Bytes per activation element, by training precision (fp8 keeps bf16 activations)."""

OPTIMIZER_STATES = {
    "adamw": 2,
    "adam": 2,
    "lion": 1,
    "sgd_momentum": 1,
    "sgd": 0,
    "adafactor": 0,
    "lbfgs": 2,
    "none": 0,
}
"""Optimizer state tensors per trainable parameter (Adam: first and second moment)."""

OPTIMIZER_STATE_BYTES = {"bf16": 2, "fp16": 2}
"""Bytes per optimizer-state element when not fp32 (pure half training keeps them in half)."""

QUANT_SCALE_BITS_PER_PARAM = 0.127
"""Block-wise quantization constants per 4/8-bit base weight, in bits: 0.127 bit/param with QLoRA's
double quantization (Dettmers et al. 2023, "QLoRA", section 3: 32/64 + 8/(64*256))."""

DDP_BUCKET_BYTES = 25 * 2**20
"""DDP gradient bucket: `bucket_cap_mb=25` (torch.nn.parallel.DistributedDataParallel default), in
bytes; two buckets are in flight (one reducing, one filling)."""

DDP_BUCKETS_IN_FLIGHT = 2

FSDP_GATHERED_LAYERS = 2
"""Unsharded layers held at once under FSDP/ZeRO-3: the current layer and the prefetched next one
(FSDP backward_prefetch=BACKWARD_PRE, `limit_all_gathers`; DeepSpeed stage3_prefetch_bucket)."""

NON_TRANSFORMER_CHECKPOINT_DIVISOR = 3.0
"""Activation memory of a CNN/MLP with activation checkpointing, as a divisor of the full kept
set (checkpointing every ~sqrt(n) blocks keeps O(sqrt n) of n; ~1/3 for ResNet-50-sized nets,
Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost", table 1). An assumption."""

FROZEN_NON_TRANSFORMER_ACTIVATION_DIVISOR = 10.0
"""A fully frozen CNN/MLP runs forward under no_grad and keeps no graph: its working set is a
few layers' outputs, taken as 1/10 of the kept set. An assumption."""

# --- traffic: what the kernels of an eager step read and write ------------------------------
# Measured by `bench/op_census.py` (results in bench/op_census.json): every ATen op of one
# forward + loss + backward of Hugging Face `LlamaForCausalLM` (transformers 5.x, torch 2.13,
# SDPA attention) intercepted with a TorchDispatchMode; per op, bytes = its tensor inputs + its
# outputs (no cache reuse), view ops free; per layer from a 2-layer minus a 1-layer model, per
# token from a least-squares fit over five widths (residuals < 0.5%). These are what eager
# PyTorch launches, so they describe Hugging Face / plain PyTorch training; fused stacks
# (torch.compile, Megatron/TE, apex) move a fraction of it (FUSED_* below).

NONMATMUL_BYTES_PER_TOKEN_PER_LAYER = {
    "half": (449.0, 36.6),
    "fp32": (616.0, 73.0),
    "amp": (632.0, 37.0),
}
"""(bytes per unit of hidden size d, bytes per unit of MLP width f) that one layer's elementwise
and reduction kernels (norms, rotary, activations, residual adds, casts) move per token in forward
+ backward: bytes/token/layer = a*d + b*f. 'half' = weights in bf16/fp16, 'fp32' = fp32/tf32,
'amp' = fp32 weights under autocast (op census, fits 'sdpa-bf16', 'sdpa-fp32', 'sdpa-amp_bf16')."""

AMP_CAST_BYTES_PER_WEIGHT = 12.0
"""Autocast re-casts every fp32 matmul weight to 16-bit in forward (read 4 + write 2 bytes) and
casts its 16-bit weight gradient back (read 2 + write 4): 12 bytes per matmul weight per
micro-batch (op census, third regressor of the 'amp_bf16' fit: 11.8)."""

CHECKPOINT_NONMATMUL_FACTOR = (573.0 / 449.0, 54.7 / 36.6)
"""Elementwise traffic with full activation recomputation relative to without, for the d and f
terms (op census 'sdpa-ckpt-bf16' over 'sdpa-bf16'): the forward runs twice."""

LORA_NONMATMUL_BYTES_PER_TOKEN_PER_MODULE = 102.0
"""Extra elementwise bytes per token per LoRA-adapted matrix, in units of d (dropout on the input,
scaling, the add into the base output, and their backward): PEFT LoRA r=8 on q_proj and v_proj
added 204*d per layer (op census 'sdpa-bf16-lora8' over 'sdpa-bf16')."""

EAGER_ATTENTION_BYTES_PER_SCORE = 61.6
"""Bytes per attention score (per head, per query token, per key) that the 'eager' math path moves
in forward + backward (QK^T written, fp32 softmax, probabilities read by PV, and backward):
op census fit 'eager-bf16', third regressor (heads x seq per token)."""

EAGER_ATTENTION_SAVED_BYTES_PER_SCORE = 6.0
"""Activation memory the 'eager' path keeps per score for backward: the fp32 softmax output (4) and
the 16-bit probabilities the PV matmul saves (2) (Hugging Face eager_attention_forward)."""

LOGITS_BYTES_PER_TOKEN_PER_VOCAB = {"half": 70.4, "fp32": 65.7, "amp": 87.3}
"""Bytes the LM head's loss moves per token per vocabulary entry outside the matmul: logits cast
to fp32, log-softmax, NLL and their backward (op census 'outside_layers_bytes_per_token_per_vocab';
the embedding lookup is included and negligible next to it). Zero with a fused cross-entropy."""

NON_TRANSFORMER_NONMATMUL_TOUCHES = 5.0
"""CNN/MLP elementwise traffic per step as a multiple of the activation memory kept for backward:
each conv/linear output passes a normalisation and an activation in forward (read + write each)
and again in backward. An assumption (convolution nets were not in the op census)."""

FUSED_NONMATMUL_FRACTION = 0.3
"""Share of the eager elementwise traffic left when elementwise ops are fused (torch.compile's
Inductor, Megatron/Transformer Engine and apex fused norms/activations): a fused RMSNorm reads and
writes each element once instead of ~9 eager kernels doing so. An assumption."""

FUSED_KERNEL_FRACTION = 0.25
"""Share of the eager kernel launches left when elementwise ops are fused. An assumption."""

FUSED_FRAMEWORKS = ("megatron", "nemo", "torchtitan", "composer-fsdp", "deepspeed", "dle-ngc")
"""Software stacks whose training steps use fused elementwise kernels by default (Megatron-Core /
Transformer Engine, NeMo, torchtitan's compiled runs, LLM Foundry's fused norms, Megatron-DeepSpeed,
NVIDIA's DeepLearningExamples with apex)."""

DEQUANT_WRITE_BYTES_PER_WEIGHT = 2.0
"""A 4/8-bit base weight is dequantized to 16-bit before every matmul that uses it (bitsandbytes
`dequantize_4bit` / int8 `CB*SCB`): 2 bytes written per weight, then read by the matmul, in
forward, in backward (input gradient) and again when recomputing. QLoRA is therefore slower per
step than LoRA on the same base (Dettmers et al. 2023, section 4: "QLoRA ... slower")."""

OPTIMIZER_BYTES_PER_TRAINABLE = {
    "adam": 28.0,
    "adam_half": 14.0,
    "one_state": 20.0,
    "one_state_half": 10.0,
    "sgd": 12.0,
    "sgd_half": 6.0,
}
"""HBM bytes one optimizer step moves per trainable parameter: AdamW reads weight, gradient and two
moments and writes weight and moments (fp32: 4 x 4 + 3 x 4 = 28; all in 16-bit: 14); one-state
optimizers (Lion, SGD with momentum) 20 / 10; plain SGD reads weight and gradient and writes the
weight: 12 / 6 (torch.optim foreach implementations, one pass each)."""

# --- host overhead: kernel launches -----------------------------------------------------------

EAGER_KERNELS_PER_LAYER = {"half": 122, "fp32": 114, "amp": 148}
"""Kernels one transformer layer launches in forward + backward in eager PyTorch (Hugging Face
Llama, SDPA): 21 matmuls, 2 attention kernels, the rest elementwise/reductions (op census
'layer_kernels'; fp32 has no upcasts, autocast adds casts)."""

EAGER_KERNELS_CHECKPOINT_EXTRA_PER_LAYER = 38
"""Extra kernels per layer with full activation recomputation (op census 'sdpa-ckpt-bf16': 160 - 122)."""

EAGER_KERNELS_PER_LORA_MODULE = 15.5
"""Extra kernels per LoRA-adapted matrix (op census 'sdpa-bf16-lora8': 153 - 122 over 2 modules)."""

EAGER_KERNELS_EAGER_ATTENTION_EXTRA_PER_LAYER = 22
"""Extra kernels per layer of the 'eager' attention path over SDPA (op census: 144 - 122)."""

DEQUANT_KERNELS_PER_MATRIX_PASS = 2
"""Kernels per quantized matrix per pass (dequantize, plus a cast/transpose): an assumption."""

EAGER_KERNELS_OUTSIDE_LAYERS = 51
"""Embedding, final norm, LM head, loss and their backward (op census 'outside_layers_kernels')."""

OPTIMIZER_FOREACH_OPS = 12
"""torch.optim AdamW foreach ops per step (`_multi_tensor_adamw`: lerp, mul, addcmul, sqrt, div,
add, ...); each launches ceil(tensors / OPTIMIZER_TENSORS_PER_LAUNCH) kernels on a GPU."""

OPTIMIZER_TENSORS_PER_LAUNCH = 110
"""Tensors one multi_tensor_apply launch covers (PyTorch's depth_to_max_tensors for 4-list ops)."""

HOST_SECONDS_PER_KERNEL = 8e-6
"""Host time to dispatch one eager op on CPU tensors (Python, autograd, ATen dispatcher): 8.5 us
measured for a tiny 8-layer Hugging Face Llama step on this project's 2-core CPU host (op census
timing, bench/op_census.py). On a CPU the same cores run the ops, so host and device time add up."""
HOST_SECONDS_PER_KERNEL_ACCELERATOR = 16e-6
"""Host time to dispatch one eager op on an accelerator: the CPU path above plus what a device op
adds on the host (the CUDA caching allocator, stream and device guards, the driver's launch call):
5-25 us is the range usually quoted for eager PyTorch. 16 us is what the host-bound rows say: the
B200 eager Llama-3.2-1B steps at micro-batch 1 x 512 (ml-engineering's torch-compile bench,
48.8 ms measured against a device time of ~20 ms: ~19.7 us per op of the plan), and issue 21's
H200 check (micro-batches 1-4 host-bound and predicted too fast at 8 us). Chosen after seeing
those rows (docs/accuracy-history.md). The host runs ahead of the device, so a micro-batch takes the
larger of the two; `perfmodel calibrate` measures the user's own host."""


def host_seconds_per_kernel(vendor: str) -> float:
    """Host seconds per eager op: on CPU tensors (vendor 'cpu') or on an accelerator."""
    return HOST_SECONDS_PER_KERNEL if vendor == "cpu" else HOST_SECONDS_PER_KERNEL_ACCELERATOR

# --- communication -------------------------------------------------------------------------

FALLBACK_INTRA_NODE_GB_PER_S = 16.0
"""Per-GPU peer bandwidth when the catalog has none: PCIe 3.0 x16 (~16 GB/s one way)."""

FALLBACK_INTER_NODE_GB_PER_S = 12.5
"""Per-GPU network bandwidth when the catalog has none: 100 Gb/s Ethernet/InfiniBand EDR."""

# --- run totals ----------------------------------------------------------------------------

STORAGE_BANDWIDTH_GB_PER_S = 2.0
"""Checkpoint write / model load bandwidth, GB/s: a local NVMe SSD sustains 2-7 GB/s sequential
(PCIe 4 datacenter drives), a network filesystem less; 2 GB/s is the conservative end."""

STARTUP_FIXED_S = 60.0
"""Process start, imports, data loader and CUDA initialisation before the first step (s). An
assumption (no measured spread) for every framework without measured terms below; framework
`ludwig` has its own (LUDWIG_STARTUP_S, totals.startup_s)."""

# --- Ludwig (framework `ludwig`): measured terms ---------------------------------------------
# Real Ludwig 0.17.10 on a 2-core x86_64 CPU (torch 2.11, 18 runs with CPU contention <= 0.21;
# issue 16 phase 1: datasets/heldout/ludwig-lab/lab/overheads_fit.json by fit_overheads.py, FINDINGS.md section 5;
# the runs are the held-out set of docs/ludwig.md). Each entry: (estimate, low, high) in seconds,
# low/high = the smallest / largest value measured (or the range stated).

LUDWIG_STARTUP_S: dict[str, tuple[float, float, float]] = {
    "import": (9.13, 8.60, 9.69),  # process start + import torch + import ludwig.api (n=18, sd 0.30)
    "ctor_ecd": (2.43, 2.29, 2.58),  # LudwigModel(config): validation, backend (n=16)
    "ctor_llm": (0.38, 0.37, 0.39),  # (n=2)
    "build_ecd": (0.06, 0.01, 0.11),  # LudwigModel.create_model, small ECD models
    # a 338k-parameter local Llama + LoRA (larger weights: + bytes / STORAGE_BANDWIDTH_GB_PER_S)
    "build_llm": (0.44, 0.43, 0.46),
    # eval_batch_size null (the ECD default) is tuned: 1.62-3.29 s measured; 0 when it is given
    "eval_batch_tuning_ecd": (2.35, 0.0, 3.29),
    # batch_size auto: 0.79 s in two runs, 1.5-13 s in isolated repeats of the tuner
    "train_batch_tuning": (0.79, 0.79, 13.0),
    "to_first_step_other": (0.3, 0.1, 0.6),  # train() -> first batch besides preprocessing, build and tuning
    "after_last_step": (0.45, 0.06, 1.11),  # final evaluation bookkeeping, calibration, model save
    # NOT measured (no Ludwig run on a GPU yet): CUDA context, cuBLAS/cuDNN init, moving (and for
    # QLoRA quantizing) the weights on the device. An assumption with a wide range.
    "gpu_init": (5.0, 1.0, 30.0),
}
"""Ludwig's start-up and wind-down terms, measured on a CPU host (see the block comment); `gpu_init`
is the one assumed term, added on GPU hosts."""

LUDWIG_PREPROCESS_S: dict[str, tuple[float, float]] = {
    "tabular": (0.0565, 0.0225),  # (fixed s, s per 1,000 dataset rows), 6 runs, residual sd 0.010 s
    "text": (0.1228, 0.1020),  # space_punct tokenizer + vocabulary build, 8 runs, residual sd 0.041 s
    "image": (0.0640, 0.0105),  # lazy images: paths only (decoded per batch during training), 2 runs
    "llm": (0.0923, 0.1368),  # Hugging Face tokenizer of the base model, 2 runs
}
"""Ludwig's preprocessing by dataset rows (first run: the cache beside the dataset is written)."""

LUDWIG_TINY_MODEL_STEP_S = 4.6e-3
"""Measured: the median step of a 1,990-parameter model (the lab's concat tabular model) at batch
size 1 under Ludwig 0.17 was 4.1-5.1 ms (p10-p90 3.3-6.8 ms) on the 2-core CPU
(datasets/heldout/ludwig-lab/lab/FINDINGS.md, section 5)."""
LUDWIG_TINY_MODEL_PLAN_S = 0.15e-3
"""What the step plan itself prices for that model's step on that CPU in plain eager PyTorch with
Ludwig's gradient clipping (its kernels and their host launches; tests/test_ludwig_steps.py
recomputes it from the lab's record)."""
LUDWIG_PER_BATCH_FLOOR_S = LUDWIG_TINY_MODEL_STEP_S - LUDWIG_TINY_MODEL_PLAN_S
"""Ludwig's own work per batch (its training loop, metrics, callbacks): the tiny model's measured
step less what the plan already prices for it, so that its clipping and optimizer call are not
counted twice. Added to each micro-batch of framework `ludwig`
(overhead.framework_floor_per_micro_batch_s)."""

CPU_DROPOUT_S_PER_ELEMENT = 8.0e-9
"""Host seconds per element of a dropout's forward on a CPU, beyond its memory traffic: PyTorch's CPU
dropout draws the mask element by element (aten::dropout -> empty_like, bernoulli_, div_, mul:
aten/src/ATen/native/Dropout.cpp _dropout_impl; the fused native_dropout is CUDA-only), and
bernoulli_ with a scalar p runs serially. Measured (issue 24, torch 2.11, the 2-core CPU under a
1-minute load of 12): 11.1 ns of main-thread CPU per element for nn.Dropout(0.1) on 2.0 M and
0.3 M fp32 elements (bernoulli_ alone 7.5 ns), where the same host's CPU times ran 1.5-1.9x their
quiet values (two configs timed quiet and under that load: collectors/ludwig_profile.py); fitted:
8.0 ns makes the quiet collector run text_transformer_bs128_3000 (3 dropouts of 2.0 M elements per
batch; 166.6 ms measured) come out at its measured step time. Not counted for GPUs (one fused
kernel there)."""

LUDWIG_TUNER_MAX_CPU_BATCH = 128
"""Ludwig's batch-size tuner caps at MAX_CPU_BATCH_SIZE = 128 without CUDA (ludwig/trainers/trainer.py:
Trainer.tune_batch_size) and only tries sizes <= 0.2 x training rows (ludwig/utils/batch_size_tuner.py)."""

# --- gradient-boosted trees (LightGBM) -------------------------------------------------------

GBM_HOST_BANDWIDTH_GB_PER_S = 10.0
"""Effective host-memory bandwidth of one LightGBM process building histograms over its binned
matrix (GB/s): a fraction of a server's ~20-40 GB/s single-socket STREAM bandwidth, since
histogram construction gathers by row index. An assumption, corrected by the learned model on
the collectors' LightGBM slices."""

GBM_BYTES_PER_CELL = 1
"""Binned feature matrix: one uint8 bin per (row, feature) with LightGBM's max_bin = 255
(LightGBM docs, Parameters: max_bin default 255)."""

GBM_GRADIENT_BYTES_PER_ROW = 16
"""float64 gradient and hessian per row and boosting round (LightGBM's score_t/ double)."""

GBM_HISTOGRAM_BINS = 256
GBM_HISTOGRAM_BYTES_PER_BIN = 16
"""Per-feature histogram: 256 bins x (sum gradient, sum hessian) as float64."""

GBM_NUM_LEAVES = 32
"""Histograms kept per leaf: LightGBM num_leaves default 31 (rounded to 32)."""


def gbm_visits_per_round(num_leaves: float = GBM_NUM_LEAVES) -> float:
    """Histogram visits of each cell in one round: leaf-wise growth builds the smaller child's
    histogram at each split and subtracts for the larger (LightGBM's histogram subtraction), so
    each level of the tree visits at most half the rows: ~log2(leaves) / 2 visits per cell."""
    return max(1.0, math.log2(max(num_leaves, 2.0)) / 2.0)

GBM_SECONDS_PER_CELL_VISIT = 6.5e-9
"""Thread-seconds to add one (row, feature) cell to a histogram: LightGBM's own benchmark, Higgs
(10.5 M rows x 28 dense features, num_leaves 255, 500 rounds, 16 threads on 2x E5-2670 v3) in 238.5 s
(microsoft/LightGBM@01a8c0a9 docs/Experiments.rst, "Speed"): 0.477 s per round over 294 M cells is
26 thread-ns per cell, over ~4 histogram visits per cell and round at 255 leaves
(GBM_VISITS_PER_ROUND) = 6.5 thread-ns per visit."""

GBM_DEFAULT_HOST_THREADS = 8
"""Host threads LightGBM uses when the workload's device is not a CPU (a GPU host's CPU is not in the
workload): an assumption."""

GBM_HOST_OVERHEAD_GB = 0.2
"""LightGBM process and Python interpreter resident memory besides the data (GB). An assumption."""


def optimizer_state_bytes(precision: str) -> int:
    return OPTIMIZER_STATE_BYTES.get(precision, 4)
