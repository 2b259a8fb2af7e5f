"""Communication per step: data-parallel gradient/parameter collectives, tensor-parallel
activation all-reduces, context-parallel key/value exchange and pipeline point-to-point sends,
and the time they take (hierarchical collectives: intra-node fabric, then the network)."""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.analytic import conventions as cv
from perfmodel.analytic.params import ParamCounts, count_params
from perfmodel.workload import Workload


@dataclass(frozen=True, kw_only=True)
class CommCost:
    """Bytes each GPU sends per optimizer step, and the time at the link bandwidth."""

    dp_bytes: float
    """Data-parallel collectives (ring all-reduce / reduce-scatter / all-gather) per GPU."""
    tp_bytes: float
    """Tensor-parallel activation all-reduces per GPU."""
    pp_bytes: float
    """Pipeline activation sends per GPU."""
    cp_bytes: float
    """Context-parallel key/value exchange per GPU (ring attention)."""
    dp_time_s: float
    tp_time_s: float
    pp_time_s: float
    cp_time_s: float
    """Overlaps the attention it feeds (ring attention); only the excess is exposed."""

    @property
    def total_bytes(self) -> float:
        return self.dp_bytes + self.tp_bytes + self.pp_bytes + self.cp_bytes


def _ring(n: int) -> float:
    """Bytes sent per GPU per byte of buffer in a ring all-gather or reduce-scatter."""
    return (n - 1) / n if n > 1 else 0.0


def _domain_gpus(w: Workload) -> int:
    """GPUs joined by the intra-node fabric: the node, or a larger NVLink domain (NVL72)."""
    par = w.parallel
    if par.num_nodes == 1:
        return par.num_gpus
    return max(par.gpus_per_node, min(w.gpu.scale_up_domain_gpus, par.num_gpus))


def _links_bytes_per_s(w: Workload) -> tuple[float, float]:
    """(intra-node fabric, network) bandwidth per GPU in bytes/s."""
    gpu = w.gpu
    intra = gpu.intra_node_bandwidth_gb_per_s or cv.FALLBACK_INTRA_NODE_GB_PER_S
    inter = gpu.inter_node_bandwidth_gb_per_s or cv.FALLBACK_INTER_NODE_GB_PER_S
    return intra * 1e9, inter * 1e9


def _members_per_domain(w: Workload, group: int, stride: int) -> int:
    """How many of a group's ranks (`stride` ranks apart) share one scale-up domain."""
    return max(1, min(group, _domain_gpus(w) // max(stride, 1)))


def collective_time_s(w: Workload, buffer_bytes: float, group: int, stride: int) -> float:
    """Time of one ring all-gather or reduce-scatter of a `buffer_bytes` buffer over `group`
    ranks whose members are `stride` ranks apart (an all-reduce is one of each).

    Hierarchical, as NCCL runs it across nodes: the members inside one scale-up domain (g of
    them) exchange over the intra-node fabric (buffer x (g-1)/g per GPU), and the k domains
    exchange over the network, each GPU carrying 1/g of the inter-domain traffic on its own NIC
    (buffer x (k-1)/k / g per GPU). The two phases are added."""
    if group <= 1 or buffer_bytes <= 0:
        return 0.0
    intra, inter = _links_bytes_per_s(w)
    per_domain = _members_per_domain(w, group, stride)
    domains = -(-group // per_domain)
    return buffer_bytes * _ring(per_domain) / intra + buffer_bytes * _ring(domains) / (per_domain * inter)


def send_time_s(w: Workload, nbytes: float, stride: int) -> float:
    """Time to send `nbytes` to the rank `stride` ranks away (pipeline stages): over the
    intra-node fabric when both share a scale-up domain, else over the network."""
    intra, inter = _links_bytes_per_s(w)
    return nbytes / (intra if _members_per_domain(w, 2, stride) == 2 else inter)


def estimate_comm(w: Workload, params: ParamCounts | None = None) -> CommCost:
    p = params or count_params(w.model, w.training)
    t, par = w.training, w.parallel
    tp, cp, pp = par.tensor_parallel, par.context_parallel, par.pipeline_parallel
    group = par.shard_group  # gradients are reduced over data x context parallel ranks
    grad_bytes = float(cv.GRAD_BYTES[t.precision])
    if t.lora_r:
        grad_bytes = 4.0
    shard_params = p.trainable / par.model_split
    if par.strategy in ("fsdp", "zero3"):
        # all-gather 16-bit weights in forward and backward for every micro-batch, reduce-scatter grads
        gathers = [(p.total / par.model_split) * 2.0] * (2 * t.grad_accum_steps)
        dp_buffers = [*gathers, *[shard_params * grad_bytes] * t.grad_accum_steps]
    elif par.strategy == "zero2":
        # gradients partitioned: reduce-scattered after every micro-batch's backward (DeepSpeed
        # engine.allreduce_gradients, ZeRO stage >= 2; DeepSpeed issue #2252), weights all-gathered once
        dp_buffers = [*[shard_params * grad_bytes] * t.grad_accum_steps, shard_params * 2.0]
    elif par.strategy == "zero1":
        dp_buffers = [
            shard_params * grad_bytes,
            shard_params * 2.0,
        ]  # reduce-scatter grads once per step, all-gather weights
    else:  # ddp all-reduce = reduce-scatter + all-gather
        dp_buffers = [shard_params * grad_bytes] * 2
    dp_bytes = sum(dp_buffers) * _ring(group)
    dp_time = sum(collective_time_s(w, b, group, tp) for b in dp_buffers)
    tp_bytes = tp_time = pp_bytes = pp_time = cp_bytes = cp_time = 0.0
    if w.model.is_transformer:
        tokens = float(t.seq_len) / cp * t.micro_batch_size  # this rank's share of the sequence
        act = tokens * float(w.model.hidden_size or 0) * 2.0
        layers = float(w.model.num_layers or 0) / pp
        if tp > 1:
            # Megatron: 2 all-reduces in forward + 2 in backward per layer (Narayanan et al. 2021);
            # with sequence parallelism the same bytes as all-gathers + reduce-scatters
            n = 4 * 2 * layers * t.grad_accum_steps
            tp_bytes = n * act * _ring(tp)
            tp_time = n * collective_time_s(w, act, tp, 1)
        if cp > 1:
            # ring attention: every rank's keys and values (its tensor-parallel share of the heads)
            # visit the cp-1 others in forward; in backward keys/values again and their gradients
            # (3x the forward bytes)
            kv = tokens * 2 * max(w.model.kv_heads / tp, 1.0) * w.model.head_width * 2.0
            n = 3 * layers * t.grad_accum_steps
            cp_bytes = n * kv * cp * _ring(cp)
            cp_time = n * collective_time_s(w, kv * cp, cp, tp)
        if pp > 1:
            pp_bytes = 2 * act * t.grad_accum_steps
            pp_time = send_time_s(w, pp_bytes, tp * cp * par.data_parallel)
    return CommCost(
        dp_bytes=dp_bytes,
        tp_bytes=tp_bytes,
        pp_bytes=pp_bytes,
        cp_bytes=cp_bytes,
        dp_time_s=dp_time,
        tp_time_s=tp_time,
        pp_time_s=pp_time,
        cp_time_s=cp_time,
    )
