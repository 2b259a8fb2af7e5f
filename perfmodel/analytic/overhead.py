"""Host overhead: the time the host needs to launch a step's kernels one by one (eager PyTorch).

A small model's step is often bound by this, not by the device: a Hugging Face Llama layer
launches ~120 kernels in forward + backward (op census, conventions.py), each costing the host
several microseconds. On a GPU the host runs ahead of the device, so a micro-batch takes the
larger of host and device time; on a CPU the same cores do both, so they add.
"""

from __future__ import annotations

import math

from perfmodel.analytic import conventions as cv
from perfmodel.analytic.traffic import is_fused, precision_group
from perfmodel.workload import Workload


def kernels_per_micro_batch(w: Workload) -> float:
    """Kernels one micro-batch launches on one GPU (forward, loss, backward)."""
    t, m, par = w.training, w.model, w.parallel
    if not m.is_transformer:
        return 0.0  # convolution nets: kernel counts vary per architecture; large batches hide them
    per_layer = float(cv.EAGER_KERNELS_PER_LAYER[precision_group(t.precision)])
    if t.activation_checkpointing:
        per_layer += cv.EAGER_KERNELS_CHECKPOINT_EXTRA_PER_LAYER
    if t.attention_kernel == "eager":
        per_layer += cv.EAGER_KERNELS_EAGER_ATTENTION_EXTRA_PER_LAYER
    if t.lora_r:
        per_layer += cv.EAGER_KERNELS_PER_LORA_MODULE * t.lora_target_modules
    if t.quantization_bits:
        matrices = 7 if m.gated_mlp else 6
        passes = 2 + (1 if t.activation_checkpointing else 0)
        per_layer += cv.DEQUANT_KERNELS_PER_MATRIX_PASS * matrices * passes
    layers = float(m.num_layers or 0) / par.pipeline_parallel
    kernels = per_layer * layers + cv.EAGER_KERNELS_OUTSIDE_LAYERS
    return kernels * (cv.FUSED_KERNEL_FRACTION if is_fused(w) else 1.0)


def trainable_tensors(w: Workload) -> float:
    """Parameter tensors the optimizer updates: LoRA A and B per adapted matrix, or every weight
    and norm of every layer plus embeddings and head."""
    t, m = w.training, w.model
    layers = float(m.num_layers or 0)
    if t.lora_r:
        return 2.0 * t.lora_target_modules * layers
    if not m.is_transformer and m.part_layers:
        return part_tensors(w)
    if not m.is_transformer:
        return 0.0
    per_layer = 9.0 if m.gated_mlp else 8.0  # q, k, v, o, MLP matrices, two norms
    return per_layer * layers + 3.0


PART_TENSORS_PER_LAYER = 16
"""Parameter tensors of one Ludwig TransformerBlock (ludwig/modules/attention_modules.py): q, k, v and
combine_heads Linear weights and biases (8), two LayerNorms' weight and bias (4), the feed-forward's
two Linear weights and biases (4)."""


def part_tensors(w: Workload) -> float:
    """Trainable tensors of a model with a transformer part (model.part_*): its blocks, one weight and
    bias per per-feature projection and the [CLS] token (FT-Transformer), the token and position
    embeddings (a sequence encoder), and the decoder's weight and bias."""
    m = w.model
    projections = 2.0 * m.part_inputs + (1.0 if m.part_inputs else 0.0)
    embeddings = 2.0 if m.part_vocab_size else 0.0
    return PART_TENSORS_PER_LAYER * float(m.part_layers) + projections + embeddings + 2.0


def optimizer_kernels_per_step(w: Workload) -> float:
    """Kernels of one optimizer step: foreach ops over the trainable tensors on a GPU, one op per
    tensor on a CPU (PyTorch uses the for-loop implementation there)."""
    if w.training.optimizer == "none":
        return 0.0
    tensors = trainable_tensors(w)
    if w.gpu.vendor == "cpu":
        return cv.OPTIMIZER_FOREACH_OPS * tensors
    return cv.OPTIMIZER_FOREACH_OPS * math.ceil(tensors / cv.OPTIMIZER_TENSORS_PER_LAUNCH)


def framework_floor_per_micro_batch_s(w: Workload) -> float:
    """Host time a training framework spends per micro-batch besides launching the model's kernels
    (its own loop, metrics, callbacks): Ludwig's measured floor for framework `ludwig`, else 0."""
    return cv.LUDWIG_PER_BATCH_FLOOR_S if w.framework == "ludwig" else 0.0


def host_time_per_micro_batch_s(w: Workload) -> float:
    return kernels_per_micro_batch(w) * cv.host_seconds_per_kernel(w.gpu.vendor) + framework_floor_per_micro_batch_s(w)


def host_time_per_optimizer_step_s(w: Workload) -> float:
    return optimizer_kernels_per_step(w) * cv.host_seconds_per_kernel(w.gpu.vendor)
