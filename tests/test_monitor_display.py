"""The live ETA fits the terminal: one line of at most 100 characters by default (the detail with
verbose), written above a trainer's tqdm bar or as a postfix on it (one ETA, not two), the batch
hint that names the largest micro-batch that fits, and the interval's level-shift floor."""

from __future__ import annotations

import io
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tqdm import tqdm

from perfmodel.errors import ConfigError
from perfmodel.monitor.core import RunMonitor
from perfmodel.monitor.display import BAR_FORMAT, BarReporter, find_bar
from perfmodel.monitor.eta import StepTimePrior
from perfmodel.monitor.report import (
    SHORT_WIDTH,
    VERBOSE_ENV,
    ConsoleReporter,
    format_line,
    format_short,
    resolve_verbose,
)
from perfmodel.monitor.session import MonitorSession, batch_limit
from perfmodel.monitor.utilization import UtilStats, bottleneck_hints

ROOT = Path(__file__).resolve().parents[1]


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class FixedSampler:
    def read(self) -> tuple[float | None, float | None]:
        return 95.0, 30.0


def run(monitor: RunMonitor, clock: FakeClock, times: list[float]) -> None:
    monitor.start()
    for i, t in enumerate(times, start=1):
        clock.t += t
        monitor.update(i)


def noisy(n: int, level: float, seed: int = 0, cv: float = 0.05) -> list[float]:
    rng = random.Random(seed)
    return [level * rng.lognormvariate(0.0, cv) for _ in range(n)]


def test_default_lines_fit_in_100_characters_and_verbose_gives_the_detail():
    clock, short, long = FakeClock(), io.StringIO(), io.StringIO()
    prior = StepTimePrior(estimate_s=0.8, low_s=0.4, high_s=1.6)
    for out, verbose in ((short, False), (long, True)):
        clock.t = 1000.0
        m = RunMonitor(
            total_steps=123_456,
            prior=prior,
            clock=clock,
            sampler=FixedSampler(),
            sample_every_s=0.0,
            reporter=ConsoleReporter(out, verbose=verbose),
            report_every_s=5.0,
        )
        run(m, clock, [6.0, 2.0] + noisy(300, 0.5))
    lines = [x for x in short.getvalue().splitlines() if x.startswith("[perfmodel] step")]
    assert lines and all(len(x) <= SHORT_WIDTH for x in lines)
    assert "ETA" in lines[-1] and "/123456" in lines[-1]
    detail = [x for x in long.getvalue().splitlines() if x.startswith("[perfmodel] step")]
    assert max(len(x) for x in detail) > SHORT_WIDTH and "p10-p90" in detail[-1]


def test_short_line_is_cut_at_the_width():
    clock = FakeClock()
    m = RunMonitor(total_steps=10**11, clock=clock)
    run(m, clock, noisy(30, 12345.6))
    snap = m.snapshot()
    assert len(format_short(snap, width=40)) == 40 and format_short(snap, width=40).endswith("…")
    assert len(format_line(snap)) > 40


def test_reports_go_above_a_live_tqdm_bar_not_into_it():
    """tqdm.write clears the bar, writes the line and redraws the bar: each report is a line of
    its own, never spliced after the bar's text."""
    out = io.StringIO()
    clock = FakeClock()
    bar = tqdm(total=50, file=out, ascii=True, mininterval=0, dynamic_ncols=False, ncols=80)
    m = RunMonitor(total_steps=50, clock=clock, reporter=ConsoleReporter(out), report_every_s=1.0)
    m.start()
    for i in range(1, 51):
        clock.t += 0.5
        bar.update(1)
        m.update(i)
    bar.close()
    for chunk in out.getvalue().replace("\r", "\n").splitlines():
        if "[perfmodel]" in chunk:
            assert chunk.startswith("[perfmodel]"), (
                chunk
            )  # the line starts a line: nothing of the bar before it


def test_bar_reporter_puts_the_eta_in_the_trainers_bar_and_drops_tqdms_own():
    out = io.StringIO()
    clock = FakeClock()
    bar = tqdm(total=60, file=out, ascii=True, mininterval=0)
    try:
        assert find_bar(60) is bar and find_bar(61) is None
        reporter = BarReporter(out)
        m = RunMonitor(total_steps=60, clock=clock, reporter=reporter, report_every_s=1.0)
        m.start()
        for i in range(1, 41):
            clock.t += 0.25
            bar.update(1)
            m.update(i)
        assert reporter.bar is bar and bar.bar_format == BAR_FORMAT
        assert "perfmodel ETA" in bar.postfix and "ms/step" in bar.postfix
        bar.refresh()
        shown = out.getvalue().replace("\r", "\n").splitlines()[-1]
        assert "perfmodel ETA" in shown and "<" not in shown  # tqdm's own remaining time is gone
        assert "[perfmodel] step" not in out.getvalue()  # no separate lines while the bar shows it
    finally:
        bar.close()


def test_bar_reporter_without_a_bar_writes_the_short_line():
    out = io.StringIO()
    clock = FakeClock()
    m = RunMonitor(total_steps=77, clock=clock, reporter=BarReporter(out), report_every_s=1.0)
    run(m, clock, noisy(20, 0.3))
    lines = out.getvalue().splitlines()
    assert lines and all(x.startswith("[perfmodel] step") and len(x) <= SHORT_WIDTH for x in lines)


def test_batch_hint_names_the_largest_micro_batch_that_fits():
    cfg = yaml.safe_load((ROOT / "examples" / "llama2-7b-lora.yaml").read_text())
    micro, top = batch_limit(cfg)
    assert micro == 8 and top is not None and top > micro
    util = UtilStats(samples=10, cpu_mean_pct=20.0, gpu_mean_pct=40.0)
    (hint,) = bottleneck_hints(util, micro_batch=micro, largest_micro_batch=top)
    assert f"micro-batch up to {top} fits" in hint and f"now {micro}" in hint
    (hint,) = bottleneck_hints(util, micro_batch=top, largest_micro_batch=top)
    assert "already the largest that fits" in hint
    (hint,) = bottleneck_hints(util)
    assert "try a larger micro-batch" in hint
    cpu = dict(cfg, hardware={"gpu": "cpu", "num_gpus": 1})
    assert batch_limit(cpu)[1] is None and batch_limit(None) == (None, None)


def test_session_gives_the_monitor_the_batch_limit():
    cfg = yaml.safe_load((ROOT / "examples" / "llama2-7b-lora.yaml").read_text())
    session = MonitorSession(
        source="step-timer", config=cfg, sampler=False, reporter=ConsoleReporter(io.StringIO())
    )
    session.resolve()
    assert session.monitor.micro_batch == 8 and session.monitor.largest_micro_batch == batch_limit(cfg)[1]


def test_eta_interval_never_narrower_than_the_level_shift_risk():
    """A run whose level moved by 40% and back: the interval for the rest keeps at least z x the
    observed level sd on each side, however many steady steps follow."""
    clock = FakeClock()
    m = RunMonitor(total_steps=5000, clock=clock, report_every_s=1e9)
    times = [3.0] + noisy(200, 0.1, 1) + noisy(200, 0.14, 2) + noisy(400, 0.1, 3)
    run(m, clock, times)
    snap = m.snapshot()
    assert snap.level_shift_risk > 0.05
    rem = snap.remaining_s
    floor = 1.6448536 * snap.level_shift_risk
    assert math.log(rem.high / rem.estimate) >= floor - 1e-9
    assert math.log(rem.estimate / rem.low) >= floor - 1e-9
    steady = RunMonitor(total_steps=5000, clock=FakeClock(), report_every_s=1e9)
    run(steady, steady.clock, [3.0] + noisy(800, 0.1, 4))  # type: ignore[arg-type]
    s = steady.snapshot()
    assert s.level_shift_risk < 0.01
    assert s.remaining_s.high / s.remaining_s.low < rem.high / rem.low
    assert snap.to_dict()["level_shift_risk"] == pytest.approx(snap.level_shift_risk)


@pytest.mark.slow
def test_real_trainer_shows_the_eta_in_its_own_bar(tmp_path, capsys, monkeypatch):
    # torch, transformers: heavy, only this test needs them
    import torch
    import transformers.trainer
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    from perfmodel.monitor.hf import PerfmodelCallback

    # the repository's datasets/ folder imports as a package named `datasets` (see test_monitor_hf)
    monkeypatch.setattr(transformers.trainer, "is_datasets_available", lambda: False)

    class RandomTokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 1024

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            ids = torch.randint(0, 128, (16,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids.clone()}

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=128, n_positions=32))
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=60,
        per_device_train_batch_size=4,
        logging_steps=1000,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=False,
        dataloader_num_workers=0,
    )
    cb = PerfmodelCallback(report_every_s=0.0, record=False, sampler=False)
    Trainer(model=model, args=args, train_dataset=RandomTokens(), callbacks=[cb]).train()
    err = capsys.readouterr().err.replace("\r", "\n")
    bar_lines = [x for x in err.splitlines() if "/60 [" in x]
    assert any("perfmodel ETA" in x for x in bar_lines) and "perfmodel finished in" in bar_lines[-1]
    first = next(i for i, x in enumerate(bar_lines) if "perfmodel" in x)
    assert first <= 2, bar_lines[:5]  # restyled at the first report (the bar starts at step 0)
    assert not any("<" in x.split("[", 1)[1] for x in bar_lines[first:]), bar_lines  # one ETA: tqdm's is gone
    assert "[perfmodel] step" not in err  # no report lines beside the bar


# --- the user-facing switch: PERFMODEL_VERBOSE and `perfmodel monitor --follow --verbose` --------


def _lines(reporter_out: io.StringIO, reporter) -> list[str]:
    clock = FakeClock()
    m = RunMonitor(total_steps=123_456, clock=clock, reporter=reporter, report_every_s=5.0)
    run(m, clock, [6.0, 2.0] + noisy(200, 0.5))
    return [x for x in reporter_out.getvalue().splitlines() if x.startswith("[perfmodel] step")]


@pytest.mark.parametrize("make", [ConsoleReporter, BarReporter])
def test_perfmodel_verbose_turns_on_the_detail_where_the_code_does_not_say(make, monkeypatch):
    for value, detailed in (("1", True), ("TRUE", True), ("0", False), ("off", False), ("", False)):
        monkeypatch.setenv(VERBOSE_ENV, value)
        out = io.StringIO()
        lines = _lines(out, make(out))
        assert lines, value
        assert (max(len(x) for x in lines) > SHORT_WIDTH) is detailed, (value, lines[-1])
    monkeypatch.setenv(VERBOSE_ENV, "1")
    out = io.StringIO()
    assert all(len(x) <= SHORT_WIDTH for x in _lines(out, make(out, verbose=False)))  # the code wins
    monkeypatch.delenv(VERBOSE_ENV)
    assert resolve_verbose() is False and resolve_verbose(True) is True


def test_a_bad_perfmodel_verbose_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(VERBOSE_ENV, "loud")
    with pytest.raises(ConfigError, match="PERFMODEL_VERBOSE='loud': give 1"):
        ConsoleReporter(io.StringIO())


def test_the_callbacks_read_perfmodel_verbose(monkeypatch):
    monkeypatch.setenv(VERBOSE_ENV, "1")
    session = MonitorSession(source="test", sampler=False)
    assert session.monitor.reporter.console.verbose is True
    # perfmodel.monitor.hf imports transformers (installed in the venv)
    from perfmodel.monitor.hf import PerfmodelCallback

    assert PerfmodelCallback(record=False, sampler=False).session.monitor.reporter.verbose is True
    monkeypatch.setenv(VERBOSE_ENV, "0")
    assert PerfmodelCallback(record=False, sampler=False).session.monitor.reporter.verbose is False


def _monitor_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> list[str]:
    path = tmp_path / "trainer_state.json"  # a finished Trainer run: --follow reads it once and stops
    history = [{"step": i, "perfmodel_elapsed_s": sum(0.5 + 0.01 * (j % 3) for j in range(1, i + 1))} for i in range(1, 61)]
    history.append({"step": 60, "train_loss": 1.0, "train_runtime": history[-1]["perfmodel_elapsed_s"]})
    path.write_text(json.dumps({"global_step": 60, "max_steps": 60, "log_history": history}))
    environ = {k: v for k, v in os.environ.items() if k != VERBOSE_ENV}
    environ.update({"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200", **(env or {})})
    done = subprocess.run(
        [sys.executable, "-m", "perfmodel", "monitor", str(path), "--follow", "--interval-s", "0.1", *args],
        env=environ, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.slow
def test_monitor_follow_prints_one_short_line_and_the_full_report_under_verbose(tmp_path):
    short = _monitor_cli(tmp_path)
    assert short and all(len(x) <= SHORT_WIDTH for x in short), short
    assert short[0].startswith("[perfmodel] step 60/60") and "finished" in short[0]
    for detailed in (_monitor_cli(tmp_path, "--verbose"), _monitor_cli(tmp_path, env={VERBOSE_ENV: "1"})):
        text = "\n".join(detailed)
        assert "perfmodel monitor" in text and "Stable phase" in text and "Finished" in text
