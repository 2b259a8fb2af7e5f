"""Source families with no per-step meaning: every row is skipped with its reason.

- mlperf_training_results_runs: time-to-accuracy runs. Wall time runs from run_start to
  run_stop and includes evaluation (benchmark-specific cadence) and, for gpt3/llama31_405b, a
  checkpoint-relative sample count; per-step time is not logged and cannot be separated from
  evaluation without the per-benchmark eval schedule.
- modded_nanogpt_speedrun_records: time-to-target-loss records; each record changes algorithm,
  architecture and software, and the table gives no token count or step count.
- deepspeed_blog_datapoints: the SQuAD samples/s tables state neither the GPU count, the
  sequence length nor the precision (the per-GPU reading is the curator's); the other rows are
  time-to-accuracy or TFLOPs-only figures.
"""

from __future__ import annotations

from pathlib import Path

from collectors.public._common import ImportResult, RowSink, read_csv


def _skip_all(path: str | Path, reason: str) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    sink.skip(reason, len(read_csv(path)))
    return sink.result()


def import_mlperf_training_results_runs(path: str | Path) -> ImportResult:
    return _skip_all(path, "time-to-accuracy run: wall time includes evaluation; no per-step time")


def import_modded_nanogpt_speedrun_records(path: str | Path) -> ImportResult:
    return _skip_all(
        path, "time-to-target-loss record (algorithm changes per record; no token or step count)"
    )


def import_deepspeed_blog_datapoints(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    for _, r in read_csv(path).iterrows():
        if r["metric"] == "samples/second":
            sink.skip("SQuAD samples/s: GPU count, sequence length and precision not stated")
        elif "time" in r["metric"]:
            sink.skip("time-to-accuracy (end-to-end pre-training time)")
        else:
            sink.skip("TFLOPs/GPU figure without batch or step time")
    return sink.result()
