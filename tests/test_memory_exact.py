"""`perfmodel predict --memory exact` (perfmodel/measure/memory_exact.py): the FakeTensor oracle's
allocated peak in place of the analytic model's, reserved / device total / verdict / fit
suggestions from it by the analytic rule, and a one-line error where the oracle cannot run.

The fast tests stand a fake oracle module in for perfmodel.measure.memory_oracle (no torch
import; its numbers are chosen to sit on either side of a verdict's boundary); the slow ones run
the real oracle on a small model and on a config it cannot run.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

import perfmodel
import perfmodel.measure
from perfmodel.analytic import peak_memory
from perfmodel.analytic.memory import (
    ALLOCATED_INTERVAL,
    CUDA_CONTEXT_GB,
    ORACLE_INTERVAL,
    PARTS,
    RESERVED_FACTOR,
)
from perfmodel.api import predict_document, resolve_workload
from perfmodel.cli import main
from perfmodel.errors import ConfigError, UnsupportedError
from perfmodel.measure import memory_exact

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
SMALL = {"model": {"name": "small", "arch": "decoder", "hidden_size": 128, "num_layers": 2, "num_heads": 4,
                   "num_kv_heads": 2, "ffn_hidden_size": 352, "vocab_size": 2000, "gated_mlp": True},
         "training": {"tokens": 1e6, "seq_len": 256, "micro_batch_size": 4, "precision": "bf16"},
         "hardware": {"gpu": "H200"}}  # fmt: skip


@dataclass
class FakeCount:
    """What perfmodel.measure.memory_oracle.oracle_memory returns (OracleMemory's fields)."""

    at_peak_gb: dict[str, float]
    paged_gb: float = 0.0
    model: str = "a fake model"
    seconds: float = 0.01
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def peak_allocated_gb(self) -> float:
        return sum(self.at_peak_gb.values())


def fake_oracle(monkeypatch, *, at_peak_gb=None, reason=None, fails=None) -> list:
    """Stand a fake perfmodel.measure.memory_oracle in; returns the workloads it was asked about."""
    asked: list = []

    def oracle_memory(w):
        asked.append(w)
        if fails is not None:
            raise fails
        return FakeCount(at_peak_gb=dict(at_peak_gb(w) if callable(at_peak_gb) else at_peak_gb))

    module = types.SimpleNamespace(unsupported_reason=lambda w: reason, oracle_memory=oracle_memory)
    monkeypatch.setitem(sys.modules, "perfmodel.measure.memory_oracle", module)
    monkeypatch.setattr(perfmodel.measure, "memory_oracle", module, raising=False)
    return asked


def analytic_kinds(w, factor: float = 1.0) -> dict[str, float]:
    """The analytic breakdown of `w` in MemTracker's kinds, times `factor`."""
    m = peak_memory(w)
    return {"parameters": m.weights_gb * factor, "gradients": m.gradients_gb * factor, "optimizer": m.optimizer_gb * factor,
            "activations": m.activations_gb * factor, "temporary": m.temporary_gb * factor}  # fmt: skip


def boundary_gb(capacity_gb: float) -> float:
    """The allocated peak whose device total's estimate is exactly the capacity (one GPU)."""
    return (capacity_gb - CUDA_CONTEXT_GB[1]) / RESERVED_FACTOR[1]


def test_exact_memory_is_the_oracles_count_with_its_narrow_interval(monkeypatch):
    asked = fake_oracle(monkeypatch, at_peak_gb={"parameters": 2.0, "buffers": 0.5, "gradients": 1.0,
                                                 "optimizer": 4.0, "activations": 3.0, "temporary": 0.25,
                                                 "other": 0.25})  # fmt: skip
    run = perfmodel.predict(SMALL, memory="exact")
    assert len(asked) == 1 and asked[0].model.name == "small"
    assert run.memory_method == "exact"
    assert run.peak_memory_gb.estimate == pytest.approx(11.0)
    assert run.peak_memory_gb.low == pytest.approx(11.0 * ORACLE_INTERVAL[0])
    assert run.peak_memory_gb.high == pytest.approx(11.0 * ORACLE_INTERVAL[1])
    assert ORACLE_INTERVAL[1] - ORACLE_INTERVAL[0] < ALLOCATED_INTERVAL[1] - ALLOCATED_INTERVAL[0]
    # reserved and device total by the analytic rule, from the oracle's peak
    assert run.peak_memory_reserved_gb.estimate == pytest.approx(11.0 * RESERVED_FACTOR[1])
    assert run.device_memory_gb.estimate == pytest.approx(11.0 * RESERVED_FACTOR[1] + CUDA_CONTEXT_GB[1])
    assert run.device_memory_gb.high == pytest.approx(11.0 * ORACLE_INTERVAL[1] * RESERVED_FACTOR[2] + CUDA_CONTEXT_GB[2])
    doc = run.to_json()
    assert doc["memory_method"] == "exact"
    assert doc["memory_oracle"]["peak_allocated_gb"] == pytest.approx(11.0)
    assert doc["memory_oracle"]["analytic_peak_allocated_gb"] == pytest.approx(peak_memory(run.workload).allocated_gb)
    assert doc["memory_breakdown_gb"]["weights"] == pytest.approx(2.5)  # parameters + buffers
    assert doc["memory_breakdown_gb"]["temporary"] == pytest.approx(0.5)  # temporary + other
    assert sum(doc["memory_breakdown_gb"][k] for k in PARTS) == pytest.approx(doc["peak_memory_gb"]["estimate"])
    assert any("FakeTensor oracle" in a for a in doc["assumptions"])
    assert doc["memory_verdict"]["device_gb"] == pytest.approx(doc["device_memory_gb"]["estimate"])


def test_the_default_is_analytic_and_its_document_has_no_new_keys(monkeypatch):
    asked = fake_oracle(monkeypatch, at_peak_gb={"parameters": 1.0})
    doc = predict_document(EXAMPLE)
    assert not asked
    assert "memory_method" not in doc and "memory_oracle" not in doc  # the goldens stay byte-identical
    assert predict_document(EXAMPLE, memory="analytic") == doc
    assert not asked


@pytest.mark.parametrize(
    "gpu,offset,verdict",
    [("A100-80GB", -1e-6, "tight"), ("A100-80GB", +1e-6, "does not fit"),
     ("A100-40GB", -1e-6, "tight"), ("A100-40GB", +1e-6, "does not fit")],
)  # fmt: skip
def test_the_verdict_flips_where_the_oracles_device_total_reaches_the_capacity(monkeypatch, gpu, offset, verdict):
    capacity = {"A100-80GB": 80.0, "A100-40GB": 40.0}[gpu]
    alloc = boundary_gb(capacity) * (1 + offset)
    fake_oracle(monkeypatch, at_peak_gb={"parameters": alloc})
    run = perfmodel.predict(SMALL, gpu=gpu, memory="exact")
    assert run.memory_verdict.verdict == verdict
    assert run.fits_in_memory is (verdict != "does not fit")
    assert perfmodel.predict(SMALL, gpu=gpu).memory_verdict.verdict == "fits"  # the small model, analytically


def test_a_peak_whose_high_end_fits_is_fits(monkeypatch):
    capacity = 80.0
    alloc = (capacity - CUDA_CONTEXT_GB[2]) / (ORACLE_INTERVAL[1] * RESERVED_FACTOR[2]) * 0.999
    fake_oracle(monkeypatch, at_peak_gb={"parameters": alloc})
    assert perfmodel.predict(SMALL, gpu="A100-80GB", memory="exact").memory_verdict.verdict == "fits"
    fake_oracle(monkeypatch, at_peak_gb={"parameters": alloc / 0.998})
    assert perfmodel.predict(SMALL, gpu="A100-80GB", memory="exact").memory_verdict.verdict == "tight"


def test_when_the_oracle_says_it_does_not_fit_the_suggestions_are_sized_by_the_anchored_model(monkeypatch):
    """The 7B LoRA example fits on its A100-80GB by the analytic model; an oracle count twice as
    large does not, and every suggestion fits by the analytic model scaled to the oracle's count."""
    analytic = predict_document(EXAMPLE)
    assert analytic["memory_verdict"]["verdict"] == "fits" and analytic["fit_suggestions"] == []
    fake_oracle(monkeypatch, at_peak_gb=lambda w: analytic_kinds(w, 2.0))
    doc = predict_document(EXAMPLE, memory="exact")
    assert doc["memory_verdict"]["verdict"] == "does not fit"
    assert doc["peak_memory_gb"]["estimate"] == pytest.approx(2 * analytic["peak_memory_gb"]["estimate"])
    kinds = {s["kind"]: s for s in doc["fit_suggestions"]}
    assert "micro_batch" in kinds, doc["fit_suggestions"]
    for s in doc["fit_suggestions"]:
        assert s["memory_verdict"] in ("fits", "tight"), s
    mb = kinds["micro_batch"]["changes"]["training.micro_batch_size"]
    assert mb < 8
    # the suggestion is what fits under the anchored model: the next micro-batch up does not
    w = resolve_workload(EXAMPLE)
    from perfmodel.decide.fit import fits, with_training

    assert fits(with_training(w, micro_batch_size=mb, grad_accum_steps=32 // mb), 2.0)
    assert not fits(with_training(w, micro_batch_size=8, grad_accum_steps=4), 2.0)


def test_a_config_the_oracle_cannot_run_is_one_line_and_exit_1(monkeypatch, capsys, tmp_path):
    fake_oracle(monkeypatch, reason="the oracle runs one device (sharding and parallelism are analytic only)")
    with pytest.raises(UnsupportedError, match="cannot run this config: the oracle runs one device"):
        perfmodel.predict(SMALL, memory="exact")
    config = tmp_path / "small.yaml"
    config.write_text(yaml.safe_dump(SMALL))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "-c", str(config), "--memory", "exact", "--json"])
    out, err = capsys.readouterr()
    assert exit_.value.code == 1 and out == ""
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "one device" in errors[0] and "drop --memory exact" in errors[0], err
    assert "Traceback" not in err
    assert all(line.startswith(("error:", "memory:")) for line in err.splitlines()), err


def test_no_torch_and_a_failing_step_are_one_line_too(monkeypatch):
    monkeypatch.setitem(sys.modules, "perfmodel.measure.memory_oracle", None)  # import fails, as without torch
    monkeypatch.delattr(perfmodel.measure, "memory_oracle", raising=False)
    with pytest.raises(UnsupportedError, match="needs PyTorch") as err:
        perfmodel.predict(SMALL, memory="exact")
    assert "\n" not in str(err.value)
    fake_oracle(monkeypatch, fails=RuntimeError("aten::something has no fake kernel\nand a second line"))
    with pytest.raises(UnsupportedError, match=r"failed on this config \(RuntimeError: aten::something has no fake kernel\)") as err:
        perfmodel.predict(SMALL, memory="exact")
    assert "\n" not in str(err.value)


def test_a_bad_method_and_exact_outside_predict_are_config_errors(monkeypatch, capsys):
    with pytest.raises(ConfigError, match="--memory must be one of analytic, exact"):
        perfmodel.predict(SMALL, memory="magic")
    with pytest.raises(ConfigError, match="for predict only"):
        perfmodel.sweep(SMALL, {"training.micro_batch_size": [1, 2]}, memory="exact")
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "--set", "model.name=llama2-7b", "--memory", "magic"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "-c", str(EXAMPLE), "--vary", "training.micro_batch_size=1,2", "--memory", "exact"])
    assert exit_.value.code == 2  # sweep has no --memory


def test_progress_goes_to_stderr_and_the_json_to_stdout(monkeypatch, capsys):
    fake_oracle(monkeypatch, at_peak_gb=analytic_kinds)
    capsys.readouterr()
    main(["predict", "-c", str(EXAMPLE), "--memory", "exact", "--json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["memory_method"] == "exact"
    assert "FakeTensorMode" in err and "the oracle counted" in err
    main(["predict", "-c", str(EXAMPLE), "--memory", "exact"])
    out, _ = capsys.readouterr()
    assert "exact: FakeTensor oracle" in out


def test_the_heartbeat_says_the_oracle_still_runs():
    lines: list[str] = []
    import time

    with memory_exact._heartbeat(lines.append, time.perf_counter(), every_s=0.02):
        time.sleep(0.15)
    assert lines and all("still running" in line for line in lines)
    count = len(lines)
    time.sleep(0.05)
    assert len(lines) == count  # stopped with the block


# --- the real oracle ------------------------------------------------------------------------------


@pytest.mark.slow
def test_exact_mode_gives_the_real_oracles_peak_on_a_small_model():
    from perfmodel.measure.memory_oracle import oracle_memory

    w = resolve_workload(SMALL)
    count = oracle_memory(w).peak_allocated_gb
    run = perfmodel.predict(SMALL, memory="exact")
    assert run.peak_memory_gb.estimate == pytest.approx(count, rel=1e-12)
    assert run.peak_memory_gb.low == pytest.approx(count * ORACLE_INTERVAL[0], rel=1e-12)
    assert run.peak_memory_gb.high == pytest.approx(count * ORACLE_INTERVAL[1], rel=1e-12)
    assert run.to_json()["memory_oracle"]["model"].startswith("transformers LlamaForCausalLM")
    assert run.memory_verdict.verdict == "fits"


@pytest.mark.slow
def test_the_real_oracle_refuses_several_gpus_in_one_line(capsys):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "-c", str(ROOT / "examples" / "llama3-8b-pretrain-fsdp.yaml"), "--memory", "exact"])
    out, err = capsys.readouterr()
    assert exit_.value.code == 1 and out == ""
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "one device" in errors[0], err
    assert "Traceback" not in err
