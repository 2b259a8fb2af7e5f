"""The adapters over the monitor core: StepTimer (hand-written loops), the Ludwig callback (driven
through Ludwig's callback interface), utilisation sampling with a faked NVML, bottleneck hints,
and the run record they leave for `perfmodel ingest`."""

from __future__ import annotations

import inspect
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from perfmodel.monitor import StepTimer
from perfmodel.monitor.eta import StepTimePrior
from perfmodel.monitor.report import ConsoleReporter
from perfmodel.monitor.utilization import SystemSampler, bottleneck_hints, summarize

ROOT = Path(__file__).resolve().parents[1]
LUDWIG_CONFIG = ROOT / "examples" / "ludwig-llama2-7b-qlora.yaml"


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FixedSampler:
    def __init__(self, cpu: float | None, gpu: float | None) -> None:
        self.cpu, self.gpu = cpu, gpu

    def read(self) -> tuple[float | None, float | None]:
        return self.cpu, self.gpu


class FakeNvml:
    """The few pynvml calls the sampler makes, for two GPUs at 30% and 50%."""

    def __init__(self) -> None:
        self.inits = 0

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=[30, 50][handle], memory=10)


class FakePsutil:
    def __init__(self) -> None:
        self.calls = 0

    def cpu_percent(self, interval: float | None = None) -> float:
        self.calls += 1
        return 85.0


def run_timer(timer: StepTimer, clock: FakeClock, times: list[float]) -> None:
    with timer:
        for t in times:
            clock.t += t
            timer.step()


# --- utilisation and hints ---------------------------------------------------------------------


def test_system_sampler_reads_nvml_and_psutil():
    nvml, ps = FakeNvml(), FakePsutil()
    sampler = SystemSampler(psutil_module=ps, nvml_module=nvml)
    assert sampler.read() == (None, 40.0)  # psutil's first reading has no interval behind it
    assert sampler.read() == (85.0, 40.0)
    assert nvml.inits == 1


def test_sampler_without_a_gpu_reads_none():
    class Broken:
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    sampler = SystemSampler(psutil_module=FakePsutil(), nvml_module=Broken())
    sampler.read()
    assert sampler.read() == (85.0, None)


@pytest.mark.parametrize(
    ("cpu", "gpu", "expected"),
    [
        (90.0, 40.0, "data loading is the bottleneck: GPU busy 40% (< 70%) while the CPU is at 90%"),
        (20.0, 40.0, "GPU busy only 40% of the time (< 70%, CPU 20%): the batch is too small"),
        (90.0, 95.0, None),
        (90.0, None, None),
    ],
)
def test_bottleneck_hints_follow_the_rules(cpu, gpu, expected):
    from perfmodel.monitor.utilization import UtilSample

    stats = summarize([UtilSample(t_s=float(i), cpu_pct=cpu, gpu_pct=gpu) for i in range(5)])
    hints = bottleneck_hints(stats)
    if expected is None:
        assert hints == []
    else:
        assert len(hints) == 1 and hints[0].startswith(expected)


def test_noisy_steps_are_flagged_and_few_samples_give_no_hint():
    from perfmodel.monitor.utilization import UtilSample

    stats = summarize([UtilSample(t_s=0.0, cpu_pct=90.0, gpu_pct=10.0)])
    assert bottleneck_hints(stats, step_time_cv=0.4) == [h for h in bottleneck_hints(None, step_time_cv=0.4)]
    assert bottleneck_hints(None, step_time_cv=0.4)[0].startswith(
        "noisy stable phase: step-time coefficient of variation 0.40"
    )


# --- StepTimer ---------------------------------------------------------------------------------


def test_step_timer_gives_eta_hints_and_a_record(tmp_path):
    clock, out = FakeClock(), io.StringIO()
    timer = StepTimer(
        total_steps=60,
        prior=StepTimePrior(estimate_s=0.2, low_s=0.1, high_s=0.4),
        clock=clock,
        sampler=FixedSampler(cpu=92.0, gpu=35.0),
        sample_every_s=0.0,
        reporter=ConsoleReporter(out),
        report_every_s=2.0,
        record_path=tmp_path,
    )
    run_timer(timer, clock, [2.0, 0.9] + [0.25] * 58)
    text = out.getvalue()
    assert "[perfmodel] step 1/60" in text and "ETA" in text
    assert "hint: data loading is the bottleneck: GPU busy 35%" in text
    final = timer.last
    assert final is not None and final.finished
    assert final.warmup_steps == 2 and final.observed.median_s == pytest.approx(0.25)
    assert final.utilization.gpu_mean_pct == pytest.approx(35.0)
    record = json.loads((tmp_path / "perfmodel_run.json").read_text())
    assert record["format"] == "perfmodel-run" and record["source"] == "step-timer" and record["finished"]
    assert [s for _, s in record["intervals"]] == pytest.approx([2.0, 0.9] + [0.25] * 58)
    assert record["prediction"]["step_time_s"]["estimate"] == 0.2
    assert record["hardware"]["hardware_id"]  # this host's fingerprint


def test_step_timer_left_by_an_exception_records_an_unfinished_run(tmp_path):
    clock = FakeClock()
    timer = StepTimer(
        total_steps=100,
        clock=clock,
        sampler=False,
        reporter=ConsoleReporter(io.StringIO()),
        record_path=tmp_path / "run.json",
    )
    with pytest.raises(RuntimeError), timer:
        for _ in range(5):
            clock.t += 1.0
            timer.step()
        raise RuntimeError("loss is nan")
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["finished"] is False and len(record["intervals"]) == 5


def test_step_timer_predicts_its_prior_from_a_config(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        "model: {name: gpt2}\ntraining: {seq_len: 128, micro_batch_size: 4, precision: fp32, steps: 500}\nhardware: {gpu: cpu}\n"
    )
    clock = FakeClock()
    timer = StepTimer(config=config, clock=clock, sampler=False, reporter=ConsoleReporter(io.StringIO()))
    run_timer(timer, clock, [0.5] * 3)
    assert timer.session.info.prior is not None
    assert timer.monitor.total_steps == 500  # the config's step count when none is given
    assert timer.session.info.config["model"]["hidden_size"] == 768


def test_a_config_that_cannot_be_predicted_never_stops_training():
    clock = FakeClock()
    timer = StepTimer(
        total_steps=10,
        config={"model": {"name": "no-such-model-xyz"}},
        clock=clock,
        sampler=False,
        reporter=ConsoleReporter(io.StringIO()),
    )
    run_timer(timer, clock, [0.5] * 10)
    assert timer.session.info.prior is None
    assert "no prediction to start from" in timer.session.info.notes[0]


# --- Ludwig --------------------------------------------------------------------------------------

LUDWIG_SIGNATURES = {  # ludwig/callbacks.py of Ludwig 0.17.10: method -> parameter names (all end in **kwargs)
    "on_train_init": [
        "base_config",
        "experiment_directory",
        "experiment_name",
        "model_name",
        "output_directory",
        "resume_directory",
    ],
    "on_train_start": ["model", "config", "config_fp"],
    "on_batch_end": ["trainer", "progress_tracker", "save_path", "sync_step"],
    "on_epoch_end": ["trainer", "progress_tracker", "save_path"],
    "on_train_end": ["output_directory"],
}


def test_ludwig_adapter_has_ludwigs_callback_interface():
    from perfmodel.monitor.ludwig import PerfmodelLudwigCallback

    for name, params in LUDWIG_SIGNATURES.items():
        signature = inspect.signature(getattr(PerfmodelLudwigCallback, name))
        assert list(signature.parameters)[1:] == [*params, "kwargs"], name
        base = inspect.signature(getattr(PerfmodelLudwigCallback.__mro__[1], name))
        assert list(base.parameters)[1:] == [*params, "kwargs"], name


def test_ludwig_adapter_driven_like_ludwig_drives_it(tmp_path):
    import yaml

    from perfmodel.monitor.ludwig import PerfmodelLudwigCallback

    clock, out = FakeClock(), io.StringIO()
    cb = PerfmodelLudwigCallback(
        clock=clock, sampler=False, reporter=ConsoleReporter(out), report_every_s=5.0
    )
    config = yaml.safe_load(LUDWIG_CONFIG.read_text())
    cb.on_train_init(config, str(tmp_path), "exp", "run", str(tmp_path / "out"), None)
    cb.on_train_start(
        model=None, config=config, config_fp=None
    )  # Ludwig passes the dict and no path from the API
    assert cb.session.info.prior is not None  # perfmodel's prediction for the Ludwig config itself
    trainer = SimpleNamespace(total_steps=120)
    tracker = SimpleNamespace(steps=0, epoch=0)
    for i in range(120):
        clock.t += 3.0 if i == 0 else 1.0
        tracker.steps = i + 1
        cb.on_batch_end(trainer, tracker, str(tmp_path))
        if (i + 1) % 40 == 0:
            tracker.epoch += 1
            cb.on_epoch_end(trainer, tracker, str(tmp_path))
    mid = cb.last
    assert mid is not None and mid.total_steps is not None
    cb.on_train_end(str(tmp_path / "out"))
    assert cb.final.finished and cb.final.steps_done == 119  # timing starts at the first batch's end
    assert cb.final.observed.median_s == pytest.approx(1.0)
    record = json.loads((tmp_path / "out" / "perfmodel_run.json").read_text())
    assert record["source"] == "ludwig" and record["total_steps"] == 120
    assert record["config"]["training"]["quantization_bits"] == 4
    assert "[perfmodel] step" in out.getvalue()


def test_importing_the_monitor_loads_no_heavy_library():
    import subprocess
    import sys

    code = (
        "import sys, perfmodel.monitor.steptimer, perfmodel.monitor.ludwig, perfmodel.monitor.watch; "
        "print([m for m in ('torch', 'transformers', 'mlflow', 'lightgbm', 'pandas', 'ludwig') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
