"""The Hugging Face adapter in a real `transformers.Trainer` run: a 2-layer GPT-2 (hidden 32),
randomly initialised, trained on CPU for a few dozen steps with PerfmodelCallback."""

from __future__ import annotations

import io
import json
import time

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from perfmodel.monitor.hf import PerfmodelCallback  # noqa: E402
from perfmodel.monitor.report import AutoReporter  # noqa: E402

STEPS = 60
SEQ = 32


class RandomTokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 512

    def __getitem__(self, i: int) -> dict:
        ids = torch.randint(0, 128, (SEQ,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


class EtaAt(TrainerCallback):
    """Reads the perfmodel callback's ETA at one step and the time then (an independent clock)."""

    def __init__(self, cb: PerfmodelCallback, step: int) -> None:
        self.cb, self.step = cb, step
        self.eta: tuple[float, float, float] | None = None
        self.begin = self.at = self.end = 0.0

    def on_train_begin(self, args, state, control, **kw):
        self.begin = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        if state.global_step == self.step:
            r = self.cb.session.monitor.snapshot().remaining_s
            self.eta = (r.estimate, r.low, r.high)
            self.at = time.perf_counter()

    def on_train_end(self, args, state, control, **kw):
        self.end = time.perf_counter()


@pytest.fixture(autouse=True)
def _no_hf_datasets(monkeypatch):
    # The repository's datasets/ folder imports as a namespace package named `datasets`, which
    # transformers then takes for the Hugging Face library; these tests use a torch Dataset.
    import transformers.trainer

    monkeypatch.setattr(transformers.trainer, "is_datasets_available", lambda: False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a busy shared host, spinning intra-op threads make step times erratic
    yield
    torch.set_num_threads(threads)


def train(tmp_path, cb: PerfmodelCallback, *extra: TrainerCallback) -> Trainer:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=STEPS,
        per_device_train_batch_size=8,
        logging_steps=5,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(), callbacks=[cb, *extra])
    trainer.train()
    return trainer


@pytest.mark.slow
def test_trainer_run_prints_eta_lines_and_the_eta_is_close(tmp_path):
    out = io.StringIO()
    cb = PerfmodelCallback(reporter=AutoReporter(out), report_every_s=0.0)
    probe = EtaAt(cb, STEPS // 2)
    trainer = train(tmp_path, cb, probe)
    lines = [line for line in out.getvalue().splitlines() if line.startswith("[perfmodel] step")]
    assert len(lines) >= STEPS // 2  # no MLflow run is active: the compact line
    assert lines[0].startswith(f"[perfmodel] step 1/{STEPS}") and "ETA" in lines[0]
    assert "finished" in lines[-1]
    # the prior was predicted from the Trainer's own model, batch and sequence length
    info = cb.session.info
    assert info.prior is not None
    assert info.config["model"]["hidden_size"] == 32 and info.config["model"]["num_layers"] == 2
    assert info.config["training"]["seq_len"] == SEQ and info.config["training"]["micro_batch_size"] == 8
    # total time predicted half-way (elapsed + ETA) against the real total, both read with
    # perf_counter by another callback; the host is shared, so step times wander: 40% tolerance
    # (the prediction alone, the prior, was 4x off for this tiny model on this CPU)
    estimate, _, _ = probe.eta
    total = probe.end - probe.begin
    assert abs((probe.at - probe.begin) + estimate - total) / total < 0.4, (
        probe.eta,
        probe.at - probe.begin,
        total,
    )
    final = cb.final
    assert final.finished and final.steps_done == STEPS and final.warmup_steps >= 1
    # log entries carry the monitor's timing; the run record is beside the output
    timed = [e for e in trainer.state.log_history if "perfmodel_elapsed_s" in e]
    assert len(timed) >= STEPS // 5 - 1
    record = json.loads((tmp_path / "out" / "perfmodel_run.json").read_text())
    assert record["source"] == "hf-trainer" and record["finished"] and record["total_steps"] == STEPS


@pytest.mark.slow
def test_trainer_run_logs_the_series_to_the_active_mlflow_run(tmp_path):
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    out = io.StringIO()
    cb = PerfmodelCallback(reporter=AutoReporter(out), report_every_s=0.0, record=False)
    with mlflow.start_run() as run:
        train(tmp_path, cb)
    client = MlflowClient(uri)
    observed = client.get_metric_history(run.info.run_id, "perfmodel_observed_step_time_s")
    eta = client.get_metric_history(run.info.run_id, "perfmodel_eta_s")
    predicted = client.get_metric_history(run.info.run_id, "perfmodel_predicted_step_time_s")
    assert len(observed) >= STEPS - 5 and len(eta) >= STEPS - 5 and predicted
    assert sorted(m.step for m in eta)[-1] == STEPS
    low = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "perfmodel_eta_low_s")}
    high = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "perfmodel_eta_high_s")}
    assert all(low[m.step] <= m.value <= high[m.step] for m in eta)
    assert client.get_metric_history(run.info.run_id, "perfmodel_stable_median_step_time_s")
    assert "[perfmodel] step" not in out.getvalue()  # with an active run, MLflow instead of the line
