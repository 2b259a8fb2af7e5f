"""Parameter counts: total, embedding, matmul (FLOP-bearing), active (MoE) and trainable (LoRA)."""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.workload import ModelSpec, TrainingSpec

# PEFT LoRA default targets q_proj and v_proj; each adds r * (d_in + d_out) parameters.


@dataclass(frozen=True, kw_only=True)
class ParamCounts:
    """Parameter counts of one model (all in parameters, not bytes)."""

    total: float
    """Every parameter, including embeddings (a tied LM head counted once)."""
    embedding: float
    """Input token embedding plus learned position table (lookups, not matmuls)."""
    blocks: float
    """Transformer blocks plus final norm (all experts for MoE)."""
    lm_head: float
    """Weights of the output projection used as a matmul (d x V for decoders, even when tied)."""
    matmul_active: float
    """Weights each token multiplies with: active block weights + LM head (the N of 6N)."""
    lora: float
    """LoRA adapter parameters (0 for full fine-tuning)."""
    trainable: float
    """Parameters receiving gradients and optimizer state."""

    @property
    def frozen(self) -> float:
        return self.total - self.trainable + self.lora


def _layer_params(model: ModelSpec) -> tuple[float, float, float]:
    """(attention, one expert's MLP, norms) parameters of one transformer layer."""
    d = float(model.hidden_size or 0)
    q = model.attention_width
    kv = model.kv_heads * model.head_width
    attention = 2 * d * q + 2 * d * kv  # q: d x q, o: q x d; k, v: d x kv
    mlp = (3 if model.gated_mlp else 2) * d * model.ffn_size
    norms = 2 * d
    return attention, mlp, norms


def count_params(model: ModelSpec, training: TrainingSpec | None = None) -> ParamCounts:
    """Parameter counts; LoRA and freezing come from `training` when given."""
    if not model.is_transformer:
        total = float(model.params_total or 0)
        trainable = total * trainable_fraction(training)
        return ParamCounts(
            total=total,
            embedding=0.0,
            blocks=total,
            lm_head=0.0,
            matmul_active=total,
            lora=0.0,
            trainable=trainable,
        )
    d = float(model.hidden_size or 0)
    layers = float(model.num_layers or 0)
    attention, mlp, norms = _layer_params(model)
    router = d * model.num_experts if model.num_experts > 1 else 0.0
    cross_attention = 0.0
    if model.arch == "encoder-decoder":  # decoder half has cross-attention (q,k,v,o) + a norm
        cross_attention = (layers / 2) * (4 * d * d + d)
    blocks = layers * (attention + mlp * model.num_experts + router + norms) + cross_attention + d
    vocab = float(model.vocab_size or 0)
    embedding = vocab * d + float(model.learned_pos_embeddings) * d
    has_head = model.arch in ("decoder", "encoder-decoder")
    lm_head = vocab * d if has_head else 0.0
    total = blocks + embedding + (0.0 if model.tied_embeddings else lm_head)
    if model.params_total:
        total = float(model.params_total)
    active_blocks = layers * (attention + mlp * model.experts_per_token + router + norms) + cross_attention
    lora = 0.0
    if training is not None and training.lora_r:
        q = model.attention_width
        kv = model.kv_heads * model.head_width
        # q (d->q) and v (d->kv) by default; more targets use the mean matrix shape.
        per_matrix = training.lora_r * ((d + q) + (d + kv)) / 2
        lora = layers * training.lora_target_modules * per_matrix
    if training is not None and training.lora_r:
        trainable = lora
    else:
        trainable = total * trainable_fraction(training)
    return ParamCounts(
        total=total + lora,
        embedding=embedding,
        blocks=blocks,
        lm_head=lm_head,
        matmul_active=active_blocks + lm_head,
        lora=lora,
        trainable=trainable,
    )


def trainable_fraction(training: TrainingSpec | None) -> float:
    """The share of the parameters that get gradients without LoRA: `training.trainable_fraction`, or 1
    (a partly frozen model's trainable parameters are taken as spread over its weights in proportion)."""
    if training is None or training.trainable_fraction is None:
        return 1.0
    return float(training.trainable_fraction)
