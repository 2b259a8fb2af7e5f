"""The memory model's properties, its optimizer and offload variants, and the one fit verdict."""

from __future__ import annotations

import dataclasses
import random

import pytest

from perfmodel.analytic.fit_verdict import VERDICTS, decide, verdict_of
from perfmodel.analytic.memory import estimate_memory
from perfmodel.config import load_workload
from perfmodel.decide.fit import fits, peak_memory_gb
from perfmodel.prediction import predict

FRAMEWORKS = ("hf-eager", "torch-eager", "liger", "torchtune", "unsloth", "deepspeed", "torchtitan", "megatron")
MODELS = ("llama2-7b", "llama3.2-1b", "mistral-7b", "gpt2", "bert-base", "qwen2.5-0.5b", "llama3.1-8b")


def _w(model: str = "llama2-7b", framework: str = "hf-eager", gpu: str = "H200", **training):
    return load_workload({"model": {"name": model}, "training": {"tokens": 1e8, **training}, "hardware": {"gpu": gpu},
                          "framework": framework})  # fmt: skip


def _random_workloads(n: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        training = {
            "seq_len": rng.choice((128, 512, 2048, 8192)),
            "micro_batch_size": rng.choice((1, 2, 4, 16)),
            "grad_accum_steps": rng.choice((1, 4)),
            "precision": rng.choice(("bf16", "amp_bf16", "fp32")),
            "activation_checkpointing": rng.random() < 0.3,
        }
        if rng.random() < 0.4:
            training["lora_r"] = rng.choice((8, 16, 64))
            training["lora_target_modules"] = rng.choice((2, 4, 7))
            training["quantization_bits"] = rng.choice((None, 4))
        if rng.random() < 0.3:
            training["optimizer_state"] = rng.choice(("8bit", "paged-8bit", "fp32"))
        out.append(_w(rng.choice(MODELS), rng.choice(FRAMEWORKS), **{k: v for k, v in training.items() if v is not None}))
    return out


def _both(w) -> tuple[float, float]:
    m = estimate_memory(w)
    return m.allocated_gb, m.total_gb


@pytest.mark.parametrize("field,values", [("micro_batch_size", (1, 2, 3, 8, 17)), ("seq_len", (64, 512, 1000, 4096, 16384))])
def test_growing_micro_batch_or_sequence_never_lowers_the_peak(field, values):
    for w in _random_workloads(60, seed=28):
        peaks = [_both(dataclasses.replace(w, training=dataclasses.replace(w.training, **{field: v}))) for v in values]
        for (a0, d0), (a1, d1) in zip(peaks, peaks[1:], strict=False):
            assert a1 >= a0 - 1e-9 and d1 >= d0 - 1e-9, (w.model.name, w.framework, w.training, field, peaks)


def test_a_higher_lora_rank_never_lowers_the_peak():
    for w in _random_workloads(80, seed=29):
        if not w.training.lora_r:
            continue
        peaks = [_both(dataclasses.replace(w, training=dataclasses.replace(w.training, lora_r=r))) for r in (4, 8, 16, 64, 256)]
        for (a0, d0), (a1, d1) in zip(peaks, peaks[1:], strict=False):
            assert a1 >= a0 - 1e-9 and d1 >= d0 - 1e-9, (w.model.name, w.training, peaks)


def test_checkpointing_never_raises_the_peak():
    for w in _random_workloads(80, seed=30):
        t = w.training
        off = dataclasses.replace(w, training=dataclasses.replace(t, activation_checkpointing=False))
        full = dataclasses.replace(w, training=dataclasses.replace(t, activation_checkpointing=True, checkpointing_policy="full"))
        selective = dataclasses.replace(full, training=dataclasses.replace(full.training, checkpointing_policy="selective"))
        a_off, a_full, a_sel = (estimate_memory(x).allocated_gb for x in (off, full, selective))
        assert a_full <= a_off + 1e-9 and a_full <= a_sel + 1e-9 and a_sel <= a_off + 1e-9, (w.model.name, w.framework, t)


def test_8_bit_and_paged_states_and_the_step_in_backward_and_offload_each_save_what_they_should():
    base = _w(seq_len=2048, micro_batch_size=2, precision="bf16")
    p = 6.74e9  # Llama 2 7B parameters, about
    m = estimate_memory(base)
    eight = estimate_memory(_w(seq_len=2048, micro_batch_size=2, precision="bf16", optimizer_state="8bit"))
    paged = estimate_memory(_w(seq_len=2048, micro_batch_size=2, precision="bf16", optimizer_state="paged-8bit"))
    # torch.optim keeps two bf16 moments (4 bytes a parameter); bitsandbytes two uint8 + absmax
    assert m.optimizer_gb == pytest.approx(4 * p / 1e9, rel=0.02)
    assert eight.optimizer_gb == pytest.approx(2 * (1 + 4 / 256) * p / 1e9, rel=0.02)
    # paged: in CUDA managed memory, outside the allocator and off the device total
    assert paged.optimizer_gb == 0 and paged.paged_gb == pytest.approx(eight.optimizer_gb, rel=1e-6)
    in_bwd = estimate_memory(_w(seq_len=2048, micro_batch_size=1, precision="bf16", optimizer_state="paged-fp32",
                                optimizer_in_backward=True, activation_checkpointing=True))  # fmt: skip
    # torchtune's 7B_full_low_memory: paged AdamW, the step in backward, checkpointing: a 24 GB card
    assert in_bwd.gradients_gb < 1.0 and in_bwd.total_gb < 24
    assert verdict_of(_w(gpu="RTX4090", seq_len=2048, micro_batch_size=1, precision="bf16", optimizer_state="paged-fp32",
                         optimizer_in_backward=True, activation_checkpointing=True)).fits  # fmt: skip
    offload = _w(seq_len=2048, micro_batch_size=2, precision="bf16")
    offload = dataclasses.replace(offload, parallel=dataclasses.replace(offload.parallel, cpu_offload=True))
    assert estimate_memory(offload).optimizer_gb == 0 and estimate_memory(offload).offloaded_gb == pytest.approx(m.optimizer_gb)


def test_zero_stages_shard_states_then_gradients_then_weights():
    def per_gpu(strategy: str) -> tuple[float, float, float]:
        w = load_workload({"model": {"name": "llama2-7b"}, "training": {"tokens": 1e8, "seq_len": 2048, "micro_batch_size": 1,
                           "precision": "bf16"}, "hardware": {"gpu": "H200", "num_gpus": 8, "strategy": strategy}})  # fmt: skip
        m = estimate_memory(w)
        return m.weights_gb, m.optimizer_gb, m.total_gb

    ddp, z1, z2, z3 = (per_gpu(s) for s in ("ddp", "zero1", "zero2", "zero3"))
    assert z1[1] == pytest.approx(ddp[1] / 8) and z1[0] == ddp[0]
    assert z3[0] == pytest.approx(ddp[0] / 8)
    assert ddp[2] > z1[2] > z2[2] > z3[2]


def test_the_recipe_names_its_optimizer_state_and_the_config_wins():
    assert estimate_memory(_w(framework="unsloth", lora_r=16, lora_target_modules=2, quantization_bits=4, precision="bf16")).optimizer_gb < 0.05
    plain = estimate_memory(_w(framework="unsloth", precision="bf16", seq_len=512, micro_batch_size=1))
    asked = estimate_memory(_w(framework="unsloth", precision="bf16", seq_len=512, micro_batch_size=1, optimizer_state="fp32"))
    assert asked.optimizer_gb == pytest.approx(plain.optimizer_gb * 4 / (2 * (1 + 4 / 256)), rel=0.01)


def test_the_three_numbers_are_ordered_and_each_has_an_interval():
    for w in _random_workloads(40, seed=31):
        r = estimate_memory(w).ranges()
        for name in ("allocated", "reserved", "device"):
            lo, est, hi = r[name]
            assert lo <= est <= hi, (name, r)
        assert r["allocated"][1] <= r["reserved"][1] <= r["device"][1]


def test_the_verdict_rule():
    assert decide(50, 60, 70, 80).verdict == "fits"
    assert decide(60, 75, 85, 80).verdict == "tight"
    assert decide(78, 85, 95, 80).verdict == "does not fit"
    assert decide(78, 85, 95, 0).verdict == "fits"  # no capacity known
    v = decide(60, 75, 85, 80)
    assert v.fits and v.margin_gb == pytest.approx(5) and "tight" in v.line()
    assert set(VERDICTS) == {"fits", "tight", "does not fit"}


def test_predict_and_the_fit_search_use_the_same_verdict():
    for w in _random_workloads(25, seed=32):
        if w.model.arch == "gbm":
            continue
        run = predict(w, use_learned=False)
        v = verdict_of(w)
        assert run.memory_verdict == v and run.fits_in_memory == v.fits == fits(w)
        assert peak_memory_gb(w) == pytest.approx(v.device_gb)
        assert run.peak_memory_gb.estimate == pytest.approx(estimate_memory(w).allocated_gb)
        doc = run.to_json()
        assert doc["peak_memory_kind"] == "allocated"
        assert doc["device_memory_gb"]["estimate"] == pytest.approx(v.device_gb)
        assert doc["memory_verdict"]["verdict"] == v.verdict
        assert doc["memory_margin_gb"] == pytest.approx(v.margin_gb)


def test_hugging_face_paged_8bit_optim_is_modelled():
    w = load_workload({"model": {"name": "llama2-7b"}, "training": {"tokens": 1e8, "optim": "paged_adamw_8bit",
                       "lora_r": 16}, "hardware": {"gpu": "A100-80GB"}})  # fmt: skip
    m = estimate_memory(w)
    assert w.training.optimizer_state == "paged-8bit" and m.optimizer_gb == 0 and m.paged_gb > 0


# Issue 28's held-out H200 measurements of a 7B LoRA in Hugging Face-style eager PyTorch, bf16, as the
# allocator reports them (torch.cuda.max_memory_allocated): typed from the issue, not from the code.
ISSUE_28_LORA_PEAKS_GB = {(8, 512): 52.0, (4, 2048): 89.0}


@pytest.mark.parametrize(("micro", "seq"), sorted(ISSUE_28_LORA_PEAKS_GB))
def test_a_7b_lora_config_without_targets_predicts_the_measured_peak(micro, seq):
    """A LoRA config that names no targets gets hf-eager's all-linear adapters (fp32, PEFT's
    autocast_adapter_dtype): within 5% of the measured peaks, where PEFT's own q, v default gave
    0.67-0.71x of them (a 'fits' on an 80 GB card for the 89 GB run)."""
    w = _w(lora_r=16, micro_batch_size=micro, seq_len=seq, precision="bf16")
    assert w.training.lora_target_modules == 7
    measured = ISSUE_28_LORA_PEAKS_GB[(micro, seq)]
    assert estimate_memory(w).allocated_gb == pytest.approx(measured, rel=0.05)
    qv = dataclasses.replace(w, training=dataclasses.replace(w.training, lora_target_modules=2))
    assert estimate_memory(qv).allocated_gb < 0.75 * measured


@pytest.mark.parametrize(("gpu", "micro", "seq"), [("A100-80GB", 4, 2048), ("A100-40GB", 8, 512)])
def test_the_issues_false_fits_now_say_does_not_fit(gpu, micro, seq):
    """The two false 'fits' the issue names: 89 GB measured posed on an A100-80GB, 52 GB on an A100-40GB."""
    w = _w(gpu=gpu, lora_r=16, micro_batch_size=micro, seq_len=seq, precision="bf16")
    assert verdict_of(w).verdict == "does not fit"


def test_a_torchtune_full_7b_finetune_on_a_24_gb_card_is_not_called_out_of_memory():
    """Issue 28: a full 7B fine-tune that its source runs on a 24 GB card (torchtune's single-device
    full config: paged 8-bit AdamW stepped in backward, checkpointing) was predicted at 63 GB and
    "does not fit"; a config naming only the framework now gets those optimizer defaults."""
    w = _w(framework="torchtune", gpu="RTX-4090", seq_len=2048, micro_batch_size=2, precision="bf16",
           activation_checkpointing=True)  # fmt: skip
    assert (w.training.optimizer_state, w.training.optimizer_in_backward) == ("paged-8bit", True)
    assert estimate_memory(w).allocated_gb < 24.0
    assert verdict_of(w).verdict != "does not fit"
