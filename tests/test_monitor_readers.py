"""`perfmodel monitor` on every file format it reads (fixtures written here, with known step times),
`--follow` on a file that holds no times, and the command through its real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.errors import DataError
from perfmodel.monitor.readers import read_trace
from perfmodel.monitor.watch import follow_path, monitor_path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "perfmodel", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def hf_state(
    path: Path, *, logged_to: int, max_steps: int, key: str = "perfmodel_elapsed_s", final: bool = False
) -> Path:
    """Logs every 5 steps of 0.2 s each, the first 5 steps slow (warm-up: 3 s)."""
    history, t = [], 0.0
    for step in range(5, logged_to + 1, 5):
        t += 3.0 if step == 5 else 5 * 0.2
        history.append({"loss": 2.0, "step": step, "epoch": step / 100, key: round(t, 6)})
    if final:
        history.append({"train_runtime": t + 1.0, "train_loss": 1.9, "step": logged_to, "epoch": 1.0})
    path.write_text(json.dumps({"global_step": logged_to, "max_steps": max_steps, "log_history": history}))
    return path


def test_hf_trainer_state_with_perfmodel_times(tmp_path):
    report = monitor_path(hf_state(tmp_path / "trainer_state.json", logged_to=100, max_steps=300))
    s = report.snapshot
    assert report.trace.format == "hf-trainer-state" and not s.finished
    assert s.warmup_steps == 5 and s.warmup_s == pytest.approx(3.0)
    assert s.observed.mean_s == pytest.approx(0.2)
    assert s.remaining_s.estimate == pytest.approx(200 * 0.2, rel=1e-6)
    assert s.remaining_s.low < 40 < s.remaining_s.high


def test_hf_trainer_state_with_train_runtime_logs(tmp_path):
    report = monitor_path(
        hf_state(
            tmp_path / "trainer_state.json", logged_to=100, max_steps=100, key="train_runtime", final=True
        )
    )
    assert report.snapshot.finished and report.snapshot.observed.mean_s == pytest.approx(0.2)


def test_hf_trainer_state_with_only_the_final_runtime(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(
        json.dumps(
            {
                "global_step": 50,
                "max_steps": 50,
                "log_history": [
                    {"loss": 1.0, "step": 50},
                    {"train_runtime": 12.5, "train_loss": 1.0, "step": 50},
                ],
            }
        )
    )
    report = monitor_path(path)
    assert report.trace.intervals == [(50, 12.5)]
    assert report.snapshot.finished and report.snapshot.elapsed_s == pytest.approx(12.5)
    assert any("only the total train_runtime" in n for n in report.notes)


def test_hf_output_folder_timed_by_checkpoint_saves(tmp_path):
    for i, step in enumerate((100, 200, 300, 400, 500, 600, 700, 800)):
        ckpt = tmp_path / f"checkpoint-{step}"
        ckpt.mkdir()
        state = ckpt / "trainer_state.json"
        state.write_text(
            json.dumps({"global_step": step, "max_steps": 1000, "log_history": [{"loss": 1.0, "step": step}]})
        )
        os.utime(state, (1_000_000 + 50.0 * i, 1_000_000 + 50.0 * i))  # a save every 100 steps of 0.5 s
    report = monitor_path(tmp_path)
    assert report.trace.format == "hf-checkpoints" and report.trace.start_step == 100
    assert report.snapshot.observed.mean_s == pytest.approx(0.5)
    assert report.snapshot.remaining_s.estimate == pytest.approx(200 * 0.5)


def ludwig_run(tmp_path: Path, steps: int, runtime_us: float | None) -> Path:
    model = tmp_path / "results" / "experiment_run" / "model"
    model.mkdir(parents=True)
    (model / "training_progress.json").write_text(
        json.dumps({"epoch": 3, "steps": steps, "batch_size": 128, "checkpoint_number": 3})
    )
    if runtime_us is not None:
        prof = tmp_path / "results" / "system_resource_usage" / "trainer.train"
        prof.mkdir(parents=True)
        (prof / "run_0.json").write_text(
            json.dumps(
                {
                    "code_block_tag": "trainer.train",
                    "num_cpu": 8,
                    "total_execution_time": runtime_us,
                    "average_cpu_utilization": 11.0,
                    "average_global_cpu_utilization": 64.0,
                    "max_cpu_utilization": 20.0,
                }
            )
        )
    return tmp_path


def test_ludwig_progress_with_the_profilers_resource_usage(tmp_path):
    report = monitor_path(ludwig_run(tmp_path, 600, 150e6), total_steps=600)
    trace = report.trace
    assert trace.format == "ludwig" and trace.intervals == [(600, pytest.approx(150.0))]  # microseconds -> s
    assert report.snapshot.utilization.cpu_mean_pct == pytest.approx(64.0)


def test_ludwig_progress_without_times_is_timed_by_follow(tmp_path):
    root = ludwig_run(tmp_path, 100, None)
    progress = root / "results" / "experiment_run" / "model" / "training_progress.json"
    assert monitor_path(root).trace.intervals == []
    state = {"reads": 0}

    def advance(_seconds: float) -> None:  # the run moves 100 steps of 0.3 s between reads
        state["reads"] += 1
        steps = 100 + 100 * state["reads"]
        progress.write_text(json.dumps({"epoch": 1, "steps": steps, "batch_size": 16}))
        os.utime(progress, (2_000_000 + 30.0 * state["reads"],) * 2)

    os.utime(progress, (2_000_000,) * 2)
    reports = list(follow_path(root, interval_s=0.0, sleep=advance, max_reads=12, total_steps=2000))
    assert len(reports) == 12  # one per change of the step count
    last = reports[-1]
    assert last.trace.intervals == [(100, 30.0)] * 11
    assert last.snapshot.observed.mean_s == pytest.approx(0.3)  # the first interval is warm-up by rule
    assert last.snapshot.remaining_s.estimate == pytest.approx(800 * 0.3)


def test_csv_of_step_times_with_utilisation_gives_hints(tmp_path):
    path = tmp_path / "steps.csv"
    rows = ["step,step_time_s,gpu_util_pct,cpu_util_pct"] + [
        f"{i},{2.0 if i == 1 else 0.5},{45},{93}" for i in range(1, 41)
    ]
    path.write_text("\n".join(rows) + "\n")
    report = monitor_path(path, total_steps=100)
    s = report.snapshot
    assert report.trace.format == "steps-csv" and s.warmup_steps == 1
    assert s.remaining_s.estimate == pytest.approx(60 * 0.5)
    assert s.hints and s.hints[0].startswith("data loading is the bottleneck: GPU busy 45%")


def test_jsonl_of_cumulative_times(tmp_path):
    path = tmp_path / "steps.jsonl"
    path.write_text("".join(json.dumps({"step": 10 * i, "elapsed_s": 1.5 * i}) + "\n" for i in range(0, 30)))
    trace = read_trace(path)
    assert trace.format == "steps-jsonl" and trace.start_step == 0 and trace.steps_done == 290
    assert trace.intervals == [(10, pytest.approx(1.5))] * 29


def test_a_run_record_keeps_its_prior(tmp_path):
    record = {
        "format": "perfmodel-run",
        "version": 1,
        "source": "step-timer",
        "finished": False,
        "start_step": 0,
        "total_steps": 100,
        "intervals": [[1, 2.0]] + [[1, 0.4]] * 30,
        "prediction": {"step_time_s": {"estimate": 0.5, "low": 0.25, "high": 1.0}, "confidence_level": 0.9},
    }
    path = tmp_path / "perfmodel_run.json"
    path.write_text(json.dumps(record))
    s = monitor_path(tmp_path).snapshot
    assert s.predicted_step_time_s.estimate == 0.5
    assert s.remaining_s.estimate == pytest.approx(69 * 0.4, rel=0.02)


def test_unreadable_inputs_are_data_errors(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(DataError, match="not a perfmodel run record"):
        read_trace(tmp_path / "x.json")
    with pytest.raises(DataError, match="needs a column"):
        (tmp_path / "y.csv").write_text("a,b\n1,2\n")
        read_trace(tmp_path / "y.csv")
    with pytest.raises(DataError, match="holds no perfmodel_run.json"):
        read_trace(tmp_path)


@pytest.mark.slow
def test_monitor_command_json_and_text(tmp_path):
    path = hf_state(tmp_path / "trainer_state.json", logged_to=100, max_steps=300)
    res = run_cli("monitor", str(path), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["format"] == "hf-trainer-state" and data["warmup_steps"] == 5
    assert data["remaining_s"]["estimate"] == pytest.approx(40.0, rel=1e-6)
    text = run_cli("monitor", str(path))
    assert text.returncode == 0 and "ETA" in text.stdout and "Warm-up" in text.stdout
    bad = run_cli("monitor", str(tmp_path / "missing.json"))
    assert bad.returncode == 1 and bad.stderr.startswith("error: ") and len(bad.stderr.splitlines()) == 1


# --- bad rows, big files, special files -------------------------------------------------------


def _csv(path: Path, rows: list[str], header: str = "step,step_time_s") -> Path:
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def test_a_nan_step_time_is_skipped_and_counted_and_later_steps_still_count(tmp_path):
    """One NaN used to make every later cumulative time NaN: all later steps were dropped."""
    rows = [f"{i},{2.0 if i == 1 else 0.5}" for i in range(1, 41)]
    rows[9] = "10,nan"
    trace = read_trace(_csv(tmp_path / "steps.csv", rows))
    assert len(trace.intervals) == 39 and trace.steps_done == 40
    assert trace.notes == ["skipped 1 of 40 rows: 1 with a missing, NaN, infinite or negative time"]
    report = monitor_path(trace.path, trace=trace, total_steps=100)
    assert report.snapshot.observed.mean_s == pytest.approx(0.5)
    assert report.snapshot.remaining_s.estimate == pytest.approx(60 * 0.5)
    assert report.notes[0].startswith("skipped 1 of 40 rows")


def test_an_absurd_step_number_is_skipped_not_a_huge_interval(tmp_path):
    """Step 10^23 used to become one interval of 10^23 steps: 'mean step 2e-21 ms'."""
    rows = [f"{i},0.5" for i in range(1, 41)]
    rows[20] = "100000000000000000000000,0.5"
    rows[25] = "26.5,0.5"
    trace = read_trace(_csv(tmp_path / "steps.csv", rows))
    assert trace.steps_done == 40 and max(k for k, _ in trace.intervals) == 2  # 22 and 27 time 2 steps each
    assert "2 whose step is not a whole number in 0..1e+12" in trace.notes[0]
    assert monitor_path(trace.path, trace=trace).snapshot.observed.median_s == pytest.approx(0.5)


def test_a_step_that_goes_back_is_counted_and_does_not_stop_the_steps_after_it(tmp_path):
    rows = [f"{i},0.5" for i in range(1, 31)]
    rows.insert(14, "3,0.5")  # a repeated old step
    trace = read_trace(_csv(tmp_path / "steps.csv", rows))
    assert trace.steps_done == 30 and trace.intervals.total_steps() == 30 and len(trace.intervals) == 30
    assert "1 whose step (or time) does not pass the rows before" in trace.notes[0]


def test_cumulative_times_with_a_nan_and_a_clock_that_goes_back(tmp_path):
    rows = [f"{10 * i},{1.5 * i}" for i in range(0, 30)]
    rows[5] = "50,nan"
    rows[8] = "80,1.0"  # the clock went back: not a point
    trace = read_trace(_csv(tmp_path / "steps.csv", rows, header="step,elapsed_s"))
    assert trace.steps_done == 290 and trace.intervals.total_steps() == 290
    assert trace.intervals.total_seconds() == pytest.approx(1.5 * 29)
    assert "skipped 2 of 30 rows" in trace.notes[0]


def test_a_table_read_in_chunks_is_the_table_read_whole(tmp_path, monkeypatch):
    from perfmodel.monitor import readers

    rng = [0.5 + 0.01 * ((i * 7) % 5) for i in range(200)]
    rows = [f"{i},{t},{40 + i % 7},{90}" for i, t in enumerate(rng, start=1)]
    rows[50], rows[120] = "51,nan,40,90", "x,0.5,40,90"
    path = _csv(tmp_path / "steps.csv", rows, header="step,step_time_s,gpu_util_pct,cpu_util_pct")
    whole = read_trace(path)
    monkeypatch.setattr(readers, "CHUNK_ROWS", 7)
    chunked = read_trace(path)
    assert chunked.intervals == whole.intervals and chunked.samples == whole.samples
    assert chunked.notes == whole.notes and chunked.steps_done == whole.steps_done == 200
    monkeypatch.setattr(readers, "MAX_UTIL_SAMPLES", 50)  # a long table keeps a regular subsample
    thinned = read_trace(path)
    assert 25 <= len(thinned.samples) <= 50 and thinned.samples[0] == whole.samples[0]


def test_trainer_state_entries_with_a_nan_time_or_an_absurd_step_are_skipped(tmp_path):
    path = hf_state(tmp_path / "trainer_state.json", logged_to=100, max_steps=300)
    state = json.loads(path.read_text())
    state["log_history"][7]["perfmodel_elapsed_s"] = float("nan")
    state["log_history"][9]["step"] = 1e23
    path.write_text(json.dumps(state))
    report = monitor_path(path)
    assert report.trace.notes == ["skipped 2 log entries whose step or perfmodel_elapsed_s is not a number in range"]
    assert report.snapshot.observed.mean_s == pytest.approx(0.2)  # the later entries still count


@pytest.mark.parametrize("name", ["steps.csv", "trainer_state.json", "steps.jsonl"])
def test_a_fifo_run_file_is_refused_at_once(tmp_path, name):
    """monitor and ingest used to block forever reading a FIFO."""
    import time

    path = tmp_path / name
    os.mkfifo(path)
    start = time.monotonic()
    with pytest.raises(DataError, match="is a FIFO \\(named pipe\\), not a regular file"):
        read_trace(path)
    assert time.monotonic() - start < 2.0


def test_a_device_named_json_is_refused_and_a_json_over_the_limit_too(tmp_path, monkeypatch):
    """/dev/zero's size reads as 0, so a size check alone let it through (2.6 GB read)."""
    from perfmodel.monitor import readers

    link = tmp_path / "trainer_state.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(DataError, match="is a character device, not a regular file"):
        read_trace(link)
    big = hf_state(tmp_path / "big.json", logged_to=100, max_steps=300)
    monkeypatch.setattr(readers, "MAX_JSON_BYTES", 1000)
    with pytest.raises(DataError, match=r"bytes; the limit is 1,000"):
        read_trace(big)


def test_forty_thousand_trainer_state_entries_replay_in_linear_time(tmp_path, monkeypatch):
    """17 s before (a snapshot recomputing statistics over every interval each 10 s of run
    time); now one pass. Counted in operations, not seconds: every interval is replayed once."""
    from perfmodel.monitor import core

    path = hf_state(tmp_path / "trainer_state.json", logged_to=200_000, max_steps=400_000)
    calls = {"snapshots": 0}
    real = core.RunMonitor.snapshot

    def counting(self, *args, **kwargs):
        calls["snapshots"] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(core.RunMonitor, "snapshot", counting)
    report = monitor_path(path)
    assert len(report.trace.intervals) == 40_000 and calls["snapshots"] == 1
