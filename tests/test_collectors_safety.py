"""Collectors sharing a folder, stopped by signals, meeting damaged shards and bad flags, run as
real processes through the real entry point (`python -m collectors` = `perfmodel collect`).

Run as a script, this file is a fake collector: the real CLI, lock, storage and signal handling,
with a profile of tiny llama configurations whose training steps sleep instead of training
(no torch), so each test takes seconds:

    python tests/test_collectors_safety.py LO:HI STEP_S GATE_AT [perfmodel collect flags]

measures configurations LO..HI-1 (each 1 warm-up + 10 measured steps of STEP_S seconds, a shard
every 3 configurations). With GATE_AT >= 0 and $FAKE_GATE naming a file, the collector touches
$FAKE_GATE.reached when it reaches configuration GATE_AT and waits there while $FAKE_GATE exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLUSH_EVERY = 3


def fake_config(i: int):
    from perfmodel.measure.configs import SliceConfig

    return SliceConfig(
        kind="llama",
        hidden_size=8 * (i + 1),
        num_layers=1,
        num_heads=2,
        num_kv_heads=2,
        ffn_hidden_size=16,
        vocab_size=32,
        seq_len=4,
        micro_batch_size=1,
        warmup_steps=1,
    )


def _fake_collector(argv: list[str]) -> int:
    sys.modules["torch"] = None  # type: ignore[assignment] # a host without torch: no 4 s import
    from collectors import harness
    from collectors.profiles import Profile
    from perfmodel.measure import fingerprint, slices

    lo, hi = (int(x) for x in argv[0].split(":"))
    step_s, gate_at = float(argv[1]), int(argv[2])
    gate = os.environ.get("FAKE_GATE", "")
    configs = tuple(fake_config(i) for i in range(lo, hi))
    profile = Profile(name="quick", configs=configs, microbench=None, budget_s=600, flush_every=FLUSH_EVERY)
    fingerprint._default_query = lambda: []  # the CPU host, no NVML query
    harness.build_profile = lambda name, kind, supports=None: profile

    def prepare(config, device):
        if gate and configs.index(config) + lo == gate_at:
            Path(gate + ".reached").touch()
            while os.path.exists(gate):
                time.sleep(0.02)
        return slices.PreparedSlice(
            step=lambda: time.sleep(step_s),
            device=device,
            facts={"params_total": 1000.0, "samples_per_step": 1, "tokens_per_step": 4},
        )

    slices.prepare_slice = prepare
    slices.fp32_matmul_mode = lambda precision: contextlib.nullcontext()
    from collectors.__main__ import main

    return main(argv[3:])


if __name__ == "__main__":
    raise SystemExit(_fake_collector(sys.argv[1:]))


import pandas as pd  # noqa: E402 - the script above needs none of this
import pytest  # noqa: E402

from collectors.lock import HOLDER_NAME  # noqa: E402
from perfmodel.measure import storage  # noqa: E402
from perfmodel.measure.configs import make_row_id  # noqa: E402


def _env() -> dict[str, str]:
    """The environment a child process gets: the test's own (its calibration folder included, set
    after this module is imported), wide and colourless."""
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def start(
    tmp_path: Path,
    span: str,
    *flags: str,
    step_s: float = 0.002,
    gate_at: int = -1,
    gate: Path | None = None,
    name: str = "a",
) -> subprocess.Popen[str]:
    """A fake collector writing into tmp_path/raw; its stdout and stderr go to tmp_path/{name}.out|err."""
    env = {**_env(), "FAKE_GATE": str(gate or "")}
    cmd = [sys.executable, __file__, span, str(step_s), str(gate_at), "--out", str(tmp_path / "raw"), *flags]
    with open(tmp_path / f"{name}.out", "w") as stdout, open(tmp_path / f"{name}.err", "w") as stderr:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, text=True, stdout=stdout, stderr=stderr)


def finish(proc: subprocess.Popen[str], tmp_path: Path, name: str = "a") -> tuple[int, str, str]:
    rc = proc.wait(timeout=120)
    return rc, (tmp_path / f"{name}.out").read_text(), (tmp_path / f"{name}.err").read_text()


def wait_for(predicate, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def stored_rows(out: Path) -> pd.DataFrame:
    return storage.read_rows(out)


def hardware_id() -> str:
    from perfmodel.measure.fingerprint import collect_fingerprint

    return collect_fingerprint(lambda: []).hardware_id


def expected_ids(indices) -> set[str]:
    hw = hardware_id()
    return {make_row_id(hw, fake_config(i), "cpu") for i in indices}


# --- two collectors, one folder -------------------------------------------------------------


@pytest.mark.slow
def test_a_second_collector_refuses_naming_the_holder_then_waits_its_turn(tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    first = start(tmp_path, "0:8", "--json", gate_at=2, gate=gate, name="first")
    wait_for(lambda: Path(str(gate) + ".reached").exists(), "the first collector to start measuring")
    holder = json.loads((tmp_path / "raw" / HOLDER_NAME).read_text())
    assert holder["pid"] == first.pid and holder["profile"] == "quick"

    refused = subprocess.run(
        [sys.executable, "-m", "collectors", "--out", str(tmp_path / "raw"), "--budget-s", "5"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 1
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: ") and "in use by another collector" in line
    assert f"pid {first.pid} on " in line and holder["started_at"] in line and "--wait" in line

    # configurations 5..11 overlap the first collector's 0..7; with --wait the second one starts
    # after the first is done, so it measures only 8..11
    second = start(tmp_path, "5:12", "--json", "--wait", name="second")
    wait_for(
        lambda: "waiting for the collector holding" in (tmp_path / "second.err").read_text(),
        "the wait notice",
    )
    gate.unlink()
    rc1, out1, err1 = finish(first, tmp_path, "first")
    rc2, out2, err2 = finish(second, tmp_path, "second")
    assert rc1 == 0 and rc2 == 0, err1 + err2
    r1, r2 = json.loads(out1), json.loads(out2)
    assert r1["rows_written"] == 8 and r1["stopped"] == "complete"
    assert r2["skipped_existing"] == 3 and r2["rows_written"] == 4
    rows = stored_rows(tmp_path / "raw")
    assert len(rows) == 12 and rows["row_id"].is_unique  # nothing lost, nothing measured twice
    assert set(rows["row_id"]) == expected_ids(range(12))
    assert not (tmp_path / "raw" / HOLDER_NAME).exists()  # the last holder cleared its note


@pytest.mark.slow
def test_shard_writes_from_two_processes_at_once_never_overwrite_each_other(tmp_path):
    # 2 processes x 25 flushes x 4 rows, started on the same instant, same profile, host and day:
    # every write must land in its own file (no lock here: this is the storage layer alone).
    script = f"""
import sys, time
sys.modules["torch"] = None
sys.path.insert(0, {str(ROOT)!r})
from perfmodel.measure.fingerprint import collect_fingerprint
from perfmodel.measure.slices import Measurement, slice_row
from perfmodel.measure.storage import write_shard
from tests.test_collectors_safety import fake_config
who, t0 = int(sys.argv[1]), float(sys.argv[2])
fp = collect_fingerprint(lambda: [])
ok = Measurement(status="ok", step_times_s=[0.1] * 10)
time.sleep(max(t0 - time.time() - 0.05, 0))
while time.time() < t0:
    pass
for k in range(25):
    rows = [slice_row(fake_config(1000 * who + 4 * k + j), ok, {{}}, fingerprint=fp, device_kind="cpu",
                      peak_memory_method="test") for j in range(4)]
    write_shard(rows, {str(tmp_path / "raw")!r}, prefix="quick", hardware_id=fp.hardware_id)
"""
    t0 = f"{time.time() + 3.0:.3f}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(who), t0], cwd=ROOT, env=_env(), text=True, stderr=subprocess.PIPE
        )
        for who in (1, 2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    shards = storage.list_shards(tmp_path / "raw")
    assert len(shards) == 50
    assert {storage.parse_shard_name(p)["writer"] for p in shards} == {str(p.pid) for p in procs}
    rows = stored_rows(tmp_path / "raw")
    assert len(rows) == 200 and rows["row_id"].is_unique
    assert not list((tmp_path / "raw").glob(".*.tmp"))  # no temporary file left behind


# --- stop signals ----------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.slow
def test_a_stop_signal_keeps_the_measured_rows_and_prints_the_summary(tmp_path, sig):
    gate = tmp_path / "gate"
    gate.touch()
    # configurations 0..3 are measured (a shard after 3, the 4th pending), then it waits at 4
    proc = start(tmp_path, "0:10", gate_at=4, gate=gate)
    wait_for(lambda: Path(str(gate) + ".reached").exists(), "the collector to reach configuration 4")
    proc.send_signal(sig)
    rc, out, err = finish(proc, tmp_path)
    assert rc == 130, err
    assert f"interrupted by {sig.name}" in out and "slice rows written" in out  # the summary table
    assert "Traceback" not in err and f"interrupted ({sig.name}): writing what was measured" in err
    rows = stored_rows(tmp_path / "raw")
    assert set(rows["row_id"]) == expected_ids(range(4)) and len(rows) == 4
    assert len(storage.list_shards(tmp_path / "raw")) == 2


@pytest.mark.slow
def test_a_stop_signal_while_waiting_for_the_folder_exits_cleanly(tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    first = start(tmp_path, "0:3", gate_at=0, gate=gate, name="first")
    wait_for(lambda: Path(str(gate) + ".reached").exists(), "the first collector")
    second = start(tmp_path, "0:3", "--wait", "--json", name="second")
    wait_for(lambda: "waiting for the collector" in (tmp_path / "second.err").read_text(), "the wait notice")
    second.send_signal(signal.SIGTERM)
    rc, out, err = finish(second, tmp_path, "second")
    assert rc == 130 and "Traceback" not in err
    result = json.loads(out)
    assert (
        result["stopped"] == "interrupted"
        and result["interrupted_by"] == "SIGTERM"
        and result["rows_written"] == 0
    )
    gate.unlink()
    assert finish(first, tmp_path, "first")[0] == 0
    assert len(stored_rows(tmp_path / "raw")) == 3


# --- damaged shards and bad output folders ---------------------------------------------------


@pytest.mark.slow
def test_a_damaged_shard_is_reported_in_one_line_and_set_aside(tmp_path):
    out = tmp_path / "raw"
    assert finish(start(tmp_path, "0:3"), tmp_path)[0] == 0
    (good,) = storage.list_shards(out)
    hw = hardware_id()
    truncated = out / f"quick__{hw}__20260101__001.parquet"
    truncated.write_bytes(good.read_bytes()[:-40])
    garbage = out / f"microbench__{hw}__20260101__001.parquet"
    garbage.write_text("not parquet")
    stale, fresh = out / f".quick__{hw}__20260101.1.ab.tmp", out / f".quick__{hw}__20260101.2.cd.tmp"
    stale.write_text("a write killed two hours ago")
    fresh.write_text("a write in flight (e.g. perfmodel keeping a probe row)")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))

    res = subprocess.run(
        [sys.executable, "-m", "collectors", "--summary", "--out", str(out)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1 and "damaged shard" in res.stderr

    rc, stdout, err = finish(start(tmp_path, "0:5", "--json", name="b"), tmp_path, "b")
    assert rc == 0 and "Traceback" not in err
    result = json.loads(stdout)
    assert len(result["damaged_shards"]) == 2 and result["rows_written"] == 2  # 0..2 were kept
    for name in (truncated.name, garbage.name):
        (line,) = [x for x in err.splitlines() if name in x]
        assert line.startswith("warning: damaged shard ") and "moved to" in line
        assert (out / "damaged" / name).is_file() and not (out / name).exists()
    assert set(stored_rows(out)["row_id"]) == expected_ids(range(5))
    assert not stale.exists() and fresh.exists()


@pytest.mark.slow
def test_output_folder_problems_are_one_line_errors(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for out in (blocker, blocker / "sub"):
        res = subprocess.run(
            [sys.executable, "-m", "collectors", "--out", str(out)],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 1, res.stderr
        (line,) = res.stderr.strip().splitlines()
        assert line.startswith("error: ") and str(out) in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_output_folder_is_a_one_line_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    res = subprocess.run(
        [sys.executable, "-m", "collectors", "--out", str(locked)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1 and res.stderr.strip().splitlines() == [res.stderr.strip()]
    assert "not writable" in res.stderr


# --- the budget flag ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-5"])
def test_a_budget_must_be_a_positive_finite_number(tmp_path, value):
    for entry in (["-m", "collectors"], ["-m", "perfmodel", "collect"]):
        res = subprocess.run(
            [sys.executable, *entry, "--budget-s", value, "--out", str(tmp_path)],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 2, res.stderr
        (line,) = res.stderr.strip().splitlines()
        assert "--budget-s" in line and "positive, finite" in line
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_the_library_refuses_a_nan_budget_too(tmp_path):
    from collectors.harness import collect, validate_budget_s
    from perfmodel.errors import ConfigError

    for value in (float("nan"), float("inf"), 0.0, -1.0):
        with pytest.raises(ConfigError, match="positive, finite"):
            collect("quick", out_dir=tmp_path, budget_s=value)
    assert validate_budget_s(0.5) == 0.5 and validate_budget_s("30") == 30.0
