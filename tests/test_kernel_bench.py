"""The collectors' kernel benchmarks (collectors/kernel_bench.py): Hugging Face's modules as they
run, timed on a (faked) GPU, imported into the kernel table with the work the step plan prices."""

from __future__ import annotations

import pandas as pd
import pytest

from collectors.kernel_bench import (
    BENCHES,
    DTYPES,
    GPU_SIZES,
    PHASES,
    apply_rotary_pos_emb_hf,
    causal_lm_loss_hf,
    parse_bench,
    plan_entries,
    rms_norm_hf,
    work_of,
)
from collectors.microbench import MicrobenchPlan, run_microbench
from collectors.profiles import gpu_microbench, quick_microbench
from collectors.public.kernels_misc import import_microbench
from perfmodel.kernels import work as W
from perfmodel.measure.device import CpuDevice
from perfmodel.measure.fingerprint import GpuInfo, collect_fingerprint
from perfmodel.schema import MICROBENCH_COLUMNS, conform
from tests.fake_devices import FakeGpu

torch = pytest.importorskip("torch")

TINY = {
    "norm/rms": ((32, 64),),
    "norm/layer": ((32, 64),),
    "activation/swiglu": ((32, 96),),
    "rotary/rope": ((16, 4, 2, 32),),
    "loss/cross_entropy": ((16, 300),),
    "embedding/lookup": ((16, 300, 32),),
}


def _rows(device, gpus, sizes=TINY):
    fp = collect_fingerprint(lambda: gpus)
    plan = MicrobenchPlan(matmul_dtypes=(), copy_mb=(), attention_shapes=(), kernels=plan_entries(sizes),
                          iters=2, sample_target_s=0.0005)  # fmt: skip
    return list(run_microbench(plan, device=device, fingerprint=fp))


def _import(rows, tmp_path):
    conform(pd.DataFrame(rows), MICROBENCH_COLUMNS).to_parquet(tmp_path / "microbench__h__20261207__001.parquet")
    return import_microbench(tmp_path)


def test_the_written_out_modules_are_transformers_own():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    loss_utils = pytest.importorskip("transformers.loss.loss_utils")
    torch.manual_seed(0)
    x = torch.randn(8, 64, dtype=torch.bfloat16)
    norm = llama.LlamaRMSNorm(64, eps=1e-6).to(torch.bfloat16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    assert torch.equal(rms_norm_hf(x, norm.weight), norm(x))
    q, k = torch.randn(1, 4, 8, 32), torch.randn(1, 2, 8, 32)
    cos, sin = torch.randn(1, 8, 32), torch.randn(1, 8, 32)
    for ours, theirs in zip(apply_rotary_pos_emb_hf(q, k, cos, sin), llama.apply_rotary_pos_emb(q, k, cos, sin), strict=True):
        assert torch.equal(ours, theirs)
    logits = torch.randn(1, 8, 50, dtype=torch.bfloat16)
    labels = torch.randint(0, 50, (1, 8))
    assert torch.equal(causal_lm_loss_hf(logits, labels, 50), loss_utils.ForCausalLMLoss(logits, labels, vocab_size=50))


def test_every_benchmark_runs_on_a_gpu_and_imports_with_the_plans_work(tmp_path):
    rows = _rows(FakeGpu(), [GpuInfo(name="NVIDIA H200", memory_total_mib=143771)])
    assert len(rows) == len(TINY) * len(DTYPES) * len(PHASES)
    assert {r["status"] for r in rows} == {"ok"} and {r["gpu"] for r in rows} == {"H200"}
    imported = _import(rows, tmp_path)
    assert len(imported.rows) == len(rows) and not imported.skipped
    by = {(r["kernel_kind"], r["variant"], r["dtype"], r["phase"], r["shape"]): r for r in imported.rows}
    # the rows carry the step plan's own work: the same function, the same dims
    rms = by[("norm", "rms", "bf16", "full", "32x64")]
    plan_rms = W.norm_work(32, 64, "bf16", variant="rms", phase="full")
    assert (rms["bytes_moved"], rms["launches"]) == (plan_rms.bytes_moved, plan_rms.launches)
    emb = by[("embedding", "lookup", "fp32", "forward", "16x300x32")]
    assert emb["bytes_moved"] == W.embedding_work(16, 300, 32, "fp32", phase="forward").bytes_moved
    rope = by[("rotary", "rope", "fp32", "full", "16x4x2x32")]
    assert rope["bytes_moved"] == W.rotary_work(16, 4, 2, 32, "fp32", phase="full").bytes_moved
    assert {r["gpu"] for r in imported.rows} == {"H200"} and all(r["time_s"] > 0 for r in imported.rows)
    raw = {(r["bench"], r["dtype"], r["shape"]): r for r in rows}
    loss = raw[("kernel loss/cross_entropy forward", "bf16", "16x300")]
    assert loss["achieved_gb_per_s"] == pytest.approx(W.loss_work(16, 300, "bf16").bytes_moved / loss["median_time_s"] / 1e9)


def test_a_cpus_kernel_benchmarks_stay_out_of_the_kernel_table(tmp_path):
    # the kind factors are shared by every accelerator; a CPU's eager modules must not move them
    rows = _rows(CpuDevice(), [], {"loss/cross_entropy": TINY["loss/cross_entropy"]})
    assert {r["gpu"] for r in rows} == {"cpu"} and {r["status"] for r in rows} == {"ok"}
    imported = _import(rows, tmp_path)
    assert imported.rows == [] and sum(imported.skipped.values()) == len(rows)


def test_the_gpu_profile_times_each_benchmark_in_both_phases_and_dtypes_and_the_cpu_profile_none():
    entries = gpu_microbench().kernels
    assert {parse_bench(b, s)[0].key for b, _, s in entries} == set(BENCHES) == set(GPU_SIZES)
    assert len(entries) == sum(len(v) for v in GPU_SIZES.values()) * len(DTYPES) * len(PHASES)
    assert quick_microbench("cpu").kernels == () and quick_microbench("cuda").kernels == ()
    # the largest call stays a few GB (an H100 has 80)
    biggest = max(work_of(b, "fp32", s).bytes_moved for b, dtype, s in entries)
    assert 1e9 < biggest < 60e9


@pytest.mark.parametrize(
    "bench,shape,message",
    [
        ("kernel norm/rms sideways", "8x8", "not a kernel benchmark"),
        ("kernel norm/batch full", "8x8", "not a kernel benchmark"),
        ("kernel rotary/rope full", "8x4x2", "TOKENSxQ_HEADSxKV_HEADSxHEAD_DIM"),
        ("kernel embedding/lookup forward", "8xax2", "TOKENSxVOCABxDIM"),
    ],
)
def test_a_malformed_benchmark_row_is_refused_in_one_line(bench, shape, message):
    with pytest.raises(ValueError, match=message):
        work_of(bench, "fp32", shape)
