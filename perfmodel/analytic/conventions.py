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

# --- traffic -------------------------------------------------------------------------------

CHECKPOINT_ACTIVATION_TRAFFIC_FACTOR = 1.5
"""Activation HBM traffic with full recomputation relative to without: the recomputed forward
writes the layer's activations again (read once in backward), the stored layer inputs add a
little. An assumption (one extra write of the kept set, half of write+read)."""

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
assumption; measured start-up terms per framework replace it where the project has them."""

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

GBM_HOST_OVERHEAD_GB = 0.2
"""LightGBM process and Python interpreter resident memory besides the data (GB). An assumption."""


def optimizer_state_bytes(precision: str) -> int:
    return OPTIMIZER_STATE_BYTES.get(precision, 4)
