"""Ludwig's step counting, start-up and the total-time interval, against what real Ludwig 0.17.10 did.

Oracles: Ludwig's own counts and times, measured (issue 16 phase 1, datasets/heldout/ludwig-lab/runs, the
held-out set of docs/ludwig.md; and the `ludwig` collector's records in datasets/raw/ludwig_runs/):
- 2,012 rows, batch 64, 2 epochs: Ludwig ran 46 batches (ceil(0.7 x 2,012) = 1,409 training rows,
  ceil(1,409 / 64) = 23 per epoch); 3,000 rows, batch 16, 2 epochs: 264 batches;
- train_steps 30 with gradient_accumulation_steps 4: 30 batches (9 optimizer steps);
- everything outside the training steps: ECD 14.2-18.8 s, LLM 10.5-11.2 s on a 2-core CPU;
- `batch_size: auto`, 2,000 rows, 3 epochs: the tuner chose 1 and the run took 35.1 s (4,200 batches).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from collectors.ludwig_eval import LAB_HARDWARE_ID
from collectors.ludwig_rows import record_workload
from perfmodel.analytic import conventions as cv
from perfmodel.catalog.frameworks import get_recipe
from perfmodel.config import load_workload
from perfmodel.prediction import predict

TAB = {
    "input_features": [
        {"name": "a", "type": "number"},
        {"name": "b", "type": "number"},
        {"name": "c", "type": "number"},
    ],
    "output_features": [{"name": "y", "type": "binary"}],
}


def cfg_file(tmp_path: Path, trainer: dict, base: dict | None = None, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({**(base or TAB), "trainer": trainer}))
    return path


def run(tmp_path: Path, trainer: dict, rows: int, **kw):
    w = load_workload(cfg_file(tmp_path, trainer), rows=rows, gpu="cpu", **kw)
    return w, predict(w, use_learned=False)


@pytest.mark.parametrize(
    "rows,batch,epochs,ludwig_batches", [(2012, 64, 2, 46), (3000, 16, 2, 264), (4000, 64, 3, 132)]
)
def test_steps_are_ludwigs_batches_rounded_up_per_epoch(tmp_path, rows, batch, epochs, ludwig_batches):
    w, p = run(tmp_path, {"batch_size": batch, "epochs": epochs}, rows)
    assert p.total_steps == ludwig_batches
    assert any("steps are Ludwig's: batches" in x for x in p.warnings)


def test_train_steps_count_batches_and_a_step_is_one_batch_with_accumulation(tmp_path):
    _, acc4 = run(tmp_path, {"batch_size": 64, "train_steps": 30, "gradient_accumulation_steps": 4}, 2000)
    _, acc1 = run(tmp_path, {"batch_size": 64, "train_steps": 30}, 2000)
    assert acc4.total_steps == acc1.total_steps == 30  # Ludwig ran 30 batches
    assert acc4.workload.training.grad_accum_steps == 4
    assert acc4.plan.samples_per_step == 64 and acc4.throughput_samples_per_s.estimate == pytest.approx(
        64 / acc4.step_time_s.estimate
    )
    # a batch costs about the same with or without accumulation (one optimizer step per 4 batches instead of 1)
    assert acc4.step_time_s.estimate == pytest.approx(acc1.step_time_s.estimate, rel=0.25)
    assert acc4.step_time_s.estimate <= acc1.step_time_s.estimate
    assert any("optimizer steps every 4 batches" in x for x in acc4.warnings)


def test_start_up_is_ludwigs_measured_terms_with_their_spread(tmp_path):
    _, ecd = run(tmp_path, {"batch_size": 64, "epochs": 1}, 2000)
    start = ecd.plan
    assert 14.2 <= start.startup_s <= 18.8  # Ludwig's outside-the-loop time, ECD, measured
    assert start.startup_low_s < start.startup_s < start.startup_high_s
    total = ecd.total_time_s
    assert (
        total.estimate - total.low >= start.startup_s - start.startup_low_s
    )  # the start-up's own interval is in it
    assert total.high - total.estimate >= start.startup_high_s - start.startup_s
    tiny = tmp_path / "tiny-llama"  # the measured LLM: a 338k-parameter Llama on disk
    tiny.mkdir()
    (tiny / "config.json").write_text(
        '{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, '
        '"intermediate_size": 128, "vocab_size": 2000}'
    )
    llm = {
        "model_type": "llm",
        "base_model": str(tiny),
        "adapter": {"type": "lora"},
        "input_features": [{"name": "q", "type": "text"}],
        "output_features": [{"name": "a", "type": "text"}],
    }
    w = load_workload(
        cfg_file(tmp_path, {"type": "finetune", "epochs": 1}, llm, "llm.yaml"), rows=500, gpu="cpu"
    )
    assert 10.5 - 1.0 <= predict(w, use_learned=False).plan.startup_s <= 11.2 + 1.0
    big = load_workload(
        cfg_file(tmp_path, {"type": "finetune", "epochs": 1}, {**llm, "base_model": "llama2-7b"}, "big.yaml"),
        rows=500,
        gpu="cpu",
    )
    # 6.7 B parameters in 16 bits from a 2 GB/s disk: 6.7 s more to load
    assert predict(big, use_learned=False).plan.startup_s - predict(w, use_learned=False).plan.startup_s > 6.0


def test_other_frameworks_keep_the_fixed_start_up(tmp_path):
    w = load_workload(
        None, overrides=["model.name=llama2-7b", "training.tokens=1e6", "framework=hf-eager"], gpu="A100-80GB"
    )
    p = predict(w, use_learned=False)
    assert p.plan.startup_s == p.plan.startup_low_s == p.plan.startup_high_s and p.plan.startup_s >= 60.0


def test_per_batch_floor_makes_tiny_models_cost_ludwigs_own_work(tmp_path):
    _, p = run(tmp_path, {"batch_size": 1, "epochs": 1}, 100)
    # a few-parameter model at batch 1: Ludwig's loop took 4.1-5.1 ms per batch (median, 1,990 parameters)
    assert p.analytic.t_host_s >= 4.1e-3 and p.analytic.t_bound_s >= 4.1e-3
    w2 = load_workload(
        cfg_file(tmp_path, {"batch_size": 1, "epochs": 1}),
        rows=100,
        gpu="cpu",
        overrides=["framework=torch-eager", "training.gradient_clipping=true"],
    )
    # no Ludwig, no floor: the same model in plain eager PyTorch, clipping its gradients as Ludwig does,
    # is the floor faster (its own kernels, the FT-Transformer's of issue 24 included, cost the same)
    assert p.analytic.t_bound_s - predict(w2, use_learned=False).analytic.t_bound_s == pytest.approx(
        cv.LUDWIG_PER_BATCH_FLOOR_S
    )


def test_the_floor_is_the_tiny_models_measured_step_less_what_the_plan_prices_for_it():
    # the lab's concat tabular model (1,990 parameters; Ludwig's tuner chose batch 1): its measured median
    # step was 4.079 ms (4.1-5.1 ms over the lab's quiet runs, FINDINGS.md section 5: 4.6 ms)
    runs = Path(__file__).resolve().parents[1] / "datasets/heldout/ludwig-lab/runs"
    rec = json.loads((runs / "ecd_tab_concat_2000.json").read_text())
    assert rec["steps"]["median_s"] == pytest.approx(4.079e-3)
    w = record_workload(rec, dataset=runs.parent / rec["dataset"], actual_batch=True, gpu=LAB_HARDWARE_ID)
    assert w.training.micro_batch_size == 1 and w.framework == "ludwig"
    ludwig = predict(w, use_learned=False).analytic.t_bound_s
    eager = dataclasses.replace(
        w, framework="torch-eager", training=dataclasses.replace(w.training, gradient_clipping=True)
    )
    plan = predict(eager, use_learned=False).analytic.t_bound_s
    assert plan == pytest.approx(cv.LUDWIG_TINY_MODEL_PLAN_S, rel=0.25)  # the plan's own share, not counted twice
    assert ludwig == pytest.approx(cv.LUDWIG_TINY_MODEL_STEP_S, rel=0.03)
    assert get_recipe("ludwig").host_s_per_micro_batch == pytest.approx(cv.LUDWIG_PER_BATCH_FLOOR_S)


def test_early_stopping_is_the_low_end(tmp_path):
    _, on = run(tmp_path, {"batch_size": 64}, 20_000)  # epochs default 100, early_stop default 5
    _, off = run(tmp_path, {"batch_size": 64, "early_stop": -1}, 20_000)
    assert on.total_steps == off.total_steps == 100 * 219  # ceil(14,000 / 64) per epoch
    assert on.plan.total_steps_low == 6 * 219 and off.plan.total_steps_low == off.total_steps
    assert (
        on.total_time_s.low < off.total_time_s.low and on.total_time_s.estimate == off.total_time_s.estimate
    )
    assert any("the earliest early stop is after 6 epochs" in a for a in on.workload.assumptions)


def test_batch_size_auto_is_the_tuners_cap_and_the_interval_covers_batch_1(tmp_path):
    base = {
        "input_features": [
            *TAB["input_features"],
            {"name": "d", "type": "category"},
            {"name": "e", "type": "binary"},
        ],
        "output_features": TAB["output_features"],
        "combiner": {"type": "concat"},
    }
    w = load_workload(cfg_file(tmp_path, {"batch_size": "auto", "epochs": 3}, base), rows=2000, gpu="cpu")
    p = predict(w, use_learned=False)
    assert w.training.micro_batch_size == 128 and p.total_steps == 3 * 11  # ceil(1,400 / 128)
    assert p.total_time_s.low <= 35.1 <= p.total_time_s.high  # Ludwig's tuner chose 1: 4,200 batches, 35.1 s
    assert any("tuned at run time by Ludwig's batch-size tuner" in a for a in w.assumptions)
    pinned = load_workload(
        cfg_file(tmp_path, {"batch_size": "auto", "epochs": 3}, base),
        rows=2000,
        gpu="cpu",
        overrides=["training.micro_batch_size=128"],
    )
    assert (
        predict(pinned, use_learned=False).total_time_s.high < 35.1
    )  # a batch size given: no tuner, no widening
    small = load_workload(cfg_file(tmp_path, {"batch_size": "auto", "epochs": 1}, base), rows=100, gpu="cpu")
    assert small.training.micro_batch_size == 8  # the tuner only tries sizes <= 0.2 x 70 training rows


def test_tokens_count_batches_whatever_the_accumulation():
    """--tokens 1e8 on a Ludwig LLM config with micro-batch 4 and a 512-token sequence: Ludwig's steps
    are batches of 4 x 512 = 2,048 tokens, so ceil(1e8 / 2,048) = 48,829 of them for any
    gradient_accumulation_steps (accumulation groups batches into optimizer steps, it does not
    make a batch bigger), and the total time barely moves."""
    base = {
        "model_type": "llm",
        "base_model": "meta-llama/Llama-2-7b-hf",
        "adapter": {"type": "lora"},
        "input_features": [{"name": "instruction", "type": "text"}],
        "output_features": [{"name": "output", "type": "text"}],
        "preprocessing": {"global_max_sequence_length": 512},
    }
    totals = []
    for accumulation in (1, 4, 16):
        trainer = {"type": "finetune", "batch_size": 4, "gradient_accumulation_steps": accumulation}
        w = load_workload({**base, "trainer": trainer}, tokens=1e8, gpu="A100-80GB")
        assert w.training.seq_len == 512 and w.training.micro_batch_size == 4
        run_ = predict(w, use_learned=False)
        assert run_.total_steps == 48_829
        totals.append(run_.total_time_s.estimate)
    assert max(totals) / min(totals) < 1.25
