"""Collecting on a Ray cluster (`perfmodel collect --ray`, collectors.fleet): a real local cluster
of two nodes on this machine (ray.cluster_utils.Cluster, one CPU each, no dashboard), driven
through the real entry point in a separate process, as a user would.

GPUs cannot be faked, so both nodes are CPU hosts; each node's raylet has its own
PERFMODEL_TEST_NODE, and the fake fingerprint below files the node's rows under a hardware id
named after it (real fingerprints need real, different machines). Run as a script, this file is
that driver with a fake profile: N tiny llama configurations whose training steps sleep instead
of training (no torch on the driver or the nodes), shipped to the nodes as collectors.fleet task
hooks:

    python tests/test_fleet.py N [perfmodel collect flags]

With $FLEET_GATE naming a file, the node named $FLEET_GATE_NODE, on reaching configuration
$FLEET_GATE_AT for the first time, writes its process id to $FLEET_GATE.reached and waits there
while $FLEET_GATE exists (so a test can kill it mid-run).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NODES = ("nodea", "nodeb")


def make_hooks(n_configs: int, gate: str = "", gate_node: str = "", gate_at: int = -1):
    """collectors.fleet task hooks: a fake profile of `n_configs` configurations, fake steps that
    note which node ran them, and a fingerprint named after the node."""
    from collectors.fleet import TaskHooks

    def no_torch() -> None:
        from perfmodel.measure import slices

        sys.modules["torch"] = None  # type: ignore[assignment] # the fake path needs no 4 s import
        slices.fp32_matmul_mode = lambda precision: contextlib.nullcontext()

    def fingerprint():
        import dataclasses

        from perfmodel.measure.fingerprint import collect_fingerprint, make_hardware_id

        no_torch()
        tag = os.environ["PERFMODEL_TEST_NODE"]
        real = collect_fingerprint(lambda: [])
        return dataclasses.replace(real, hardware_id=make_hardware_id({"node": tag}, f"cpu-{tag}"))

    def configs():  # tests/test_collectors_safety.py's fake_config, which the nodes cannot import
        from perfmodel.measure.configs import SliceConfig

        return tuple(
            SliceConfig(
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
            for i in range(n_configs)
        )

    def build_profile(name, device_kind, supports=None):
        from collectors.profiles import Profile

        return Profile(name=name, configs=configs(), microbench=None, budget_s=120.0, flush_every=100)

    def prepare(config, device):
        from perfmodel.measure import slices

        tag = os.environ["PERFMODEL_TEST_NODE"]
        reached = Path(gate + ".reached")
        if gate and tag == gate_node and configs().index(config) == gate_at and not reached.exists():
            time.sleep(0.5)  # the rows yielded so far reach the driver before the test kills us
            reached.write_text(str(os.getpid()))
            while os.path.exists(gate):
                time.sleep(0.02)
        return slices.PreparedSlice(
            step=lambda: time.sleep(0.002),
            device=device,
            facts={
                "params_total": 1000.0,
                "samples_per_step": 1,
                "tokens_per_step": 4,
                "notes": f"measured on {tag}",
            },
        )

    return TaskHooks(fingerprint=fingerprint, build_profile=build_profile, prepare=prepare)


def _fake_driver(argv: list[str]) -> int:
    from collectors import plan
    from collectors.fleet import tasks

    hooks = make_hooks(
        int(argv[0]),
        gate=os.environ.get("FLEET_GATE", ""),
        gate_node=os.environ.get("FLEET_GATE_NODE", ""),
        gate_at=int(os.environ.get("FLEET_GATE_AT", "-1")),
    )
    tasks.DEFAULT_HOOKS = hooks
    plan.build_profile = hooks.build_profile  # --plan projects the same fake profile
    from collectors.__main__ import main

    return main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(_fake_driver(sys.argv[1:]))


import json  # noqa: E402 - the script above needs none of this
import signal  # noqa: E402
import subprocess  # noqa: E402

import pytest  # noqa: E402

from collectors.fleet import FleetNode, group_targets  # noqa: E402
from perfmodel.measure import storage  # noqa: E402
from perfmodel.measure.fingerprint import Fingerprint  # noqa: E402


def _env() -> dict[str, str]:
    """The environment a child process gets: the test's own (its calibration folder included, set
    after this module is imported), wide and colourless."""
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


# --- grouping, without a cluster ------------------------------------------------------------------


def _node(node_id: str, gpu: str, hardware_id: str) -> FleetNode:
    fields = {f: "" for f in Fingerprint.__dataclass_fields__}
    fields.update(
        hardware_id=hardware_id,
        kind="cpu" if gpu == "cpu" else "cuda",
        gpu=gpu,
        gpu_count=1,
        gpu_memory_gb=80.0,
        sm_count=132,
        max_sm_clock_mhz=0,
        max_mem_clock_mhz=0,
        power_limit_w=0.0,
        cpu_cores=8,
        host_memory_gb=64.0,
    )
    return FleetNode(
        node_id=node_id,
        address="10.0.0.1",
        cpus=8,
        gpus=0 if gpu == "cpu" else 1,
        fingerprint=Fingerprint(**fields),
    )


def test_one_target_per_gpu_type_or_per_distinct_node_and_the_resumable_node_first():
    nodes = [
        _node("n1", "H100-SXM", "h100-1x-aaaaaa"),
        _node("n2", "H100-SXM", "h100-1x-bbbbbb"),  # same GPU, another host
        _node("n3", "A100-80GB", "a100-1x-cccccc"),
        _node("n4", "cpu", "cpu-8c-dddddd"),
        _node("n5", "cpu", "cpu-8c-eeeeee"),  # another CPU host: its own type
        _node("n6", "A100-80GB", "a100-1x-cccccc"),  # identical to n3
    ]
    by_type = group_targets(nodes, "gpu-type", {"h100-1x-bbbbbb": 12})
    assert [t.key for t in by_type] == ["H100-SXM", "A100-80GB", "cpu-8c-dddddd", "cpu-8c-eeeeee"]
    assert [n.node_id for n in by_type[0].nodes] == ["n2", "n1"]  # the one with rows resumes
    assert [n.node_id for n in by_type[1].nodes] == ["n3", "n6"]  # n6 is n3's spare
    by_node = group_targets(nodes, "node")
    assert [t.key for t in by_node] == [
        "h100-1x-aaaaaa",
        "h100-1x-bbbbbb",
        "a100-1x-cccccc",
        "cpu-8c-dddddd",
        "cpu-8c-eeeeee",
    ]
    assert [n.node_id for n in by_node[2].nodes] == ["n3", "n6"]  # identical hardware: one task
    unfingerprinted = FleetNode(node_id="n7", address="10.0.0.2", cpus=4, gpus=0, error="no answer")
    assert group_targets([unfingerprinted], "gpu-type") == []


def test_ray_resources_name_the_accelerator():
    entry = {
        "NodeID": "ab" * 28,
        "Alive": True,
        "NodeManagerAddress": "10.0.0.7",
        "Resources": {"CPU": 32.0, "GPU": 8.0, "accelerator_type:H100": 1.0, "node:10.0.0.7": 1.0},
    }
    node = FleetNode.from_ray(entry)
    assert (node.accelerator_type, node.gpus, node.cpus) == ("H100", 8.0, 32.0)
    assert node.task_resources() == {"num_cpus": 32.0, "num_gpus": 1.0}
    cpu_host = FleetNode.from_ray({"NodeID": "cd" * 28, "Resources": {"CPU": 4.0}})
    assert cpu_host.accelerator_type is None and cpu_host.task_resources() == {
        "num_cpus": 4.0,
        "num_gpus": 0.0,
    }


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch):
    from collectors import fleet
    from perfmodel.errors import ConfigError

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ConfigError, match=r"pip install 'perfmodel\[fleet\]'"):
        fleet.import_ray()


@pytest.mark.slow
def test_flags_that_name_one_device_are_usage_errors_with_ray():
    for flags in (["--device", "cpu"], ["--gpu", "h200", "--plan"], ["--per", "rack"], ["--summary"]):
        proc = subprocess.run(
            [sys.executable, "-m", "collectors", "--ray", "127.0.0.1:1", *flags],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, (flags, proc.stderr)
        assert proc.stderr.startswith("usage error:") and len(proc.stderr.splitlines()) == 1


# --- connecting: bounded, one line, interruptible ------------------------------------------------


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _silent_listener() -> Any:
    """A loopback port that accepts connections and never answers (not a Ray cluster)."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(50)
    accepted: list[Any] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                accepted.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield int(server.getsockname()[1])
    finally:
        server.close()
        for conn in accepted:
            conn.close()


def _collect(address: str, *flags: str, tmp: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "collectors", "--ray", address, "--out", str(tmp / "out"), *flags]
    return subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_port_nothing_listens_on_is_one_line_at_once(tmp_path):
    """Ray itself retried such an address for more than 280 s; the reachability check answers
    before Ray is asked (the bound is the default 30 s; this takes well under it)."""
    pytest.importorskip("ray")
    from collectors.fleet import FleetError, connected

    address = f"127.0.0.1:{_closed_port()}"
    start = time.monotonic()
    with pytest.raises(FleetError, match=r"cannot connect to the Ray cluster at '127\.0\.0\.1:\d+': Connection refused"):
        with connected(address):
            pass
    assert time.monotonic() - start < 5.0


@pytest.mark.slow
def test_collect_on_an_address_with_nothing_listening_exits_1_with_one_line(tmp_path):
    proc = _collect(f"127.0.0.1:{_closed_port()}", tmp=tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and out == ""
    assert err.startswith("error: cannot connect to the Ray cluster") and len(err.splitlines()) == 1, err


@pytest.mark.slow
def test_a_listener_that_is_not_ray_is_given_up_after_the_stated_time(tmp_path):
    """Something accepts TCP but never speaks Ray: --ray-timeout-s bounds the wait (Ray's own
    client may log a line of its own while it tries)."""
    with _silent_listener() as port:
        start = time.monotonic()
        proc = _collect(f"127.0.0.1:{port}", "--ray-timeout-s", "3", tmp=tmp_path)
        _, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - start
    assert proc.returncode == 1
    assert "no Ray cluster answered within 3 s (--ray-timeout-s)" in err.splitlines()[-1], err
    assert elapsed < 3 + 15  # the bound plus Python and Ray's start-up on a loaded host


@pytest.mark.slow
def test_sigterm_while_connecting_stops_the_collector(tmp_path):
    with _silent_listener() as port:
        proc = _collect(f"127.0.0.1:{port}", tmp=tmp_path)  # the default 30 s bound
        time.sleep(6)  # Python and Ray imported, the connection under way
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert proc.returncode == 130 and time.monotonic() - sent < 10


# --- a real two-node cluster ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    small = {"num_cpus": 1, "include_dashboard": False, "object_store_memory": 80 * 2**20}
    c = Cluster(
        initialize_head=True,
        head_node_args={
            **small,
            "env_vars": {"PERFMODEL_TEST_NODE": NODES[0]},
            "resources": {"accelerator_type:FAKE-A": 1},
        },
    )
    c.add_node(**small, env_vars={"PERFMODEL_TEST_NODE": NODES[1]}, resources={"accelerator_type:FAKE-B": 1})
    c.wait_for_nodes()
    yield c.address
    c.shutdown()


def drive(address: str, out: Path, n: int, *flags: str, env: dict | None = None, wait: bool = True):
    cmd = [
        sys.executable,
        __file__,
        str(n),
        "--ray",
        address,
        "--per",
        "node",
        "--out",
        str(out),
        "--budget-s",
        "60",
        "--json",
        *flags,
    ]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env={**_env(), **(env or {})}, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    if not wait:
        return proc
    stdout, stderr = proc.communicate(timeout=180)
    return proc.returncode, stdout, stderr


def rows_by_node(out: Path) -> dict[str, list[dict]]:
    """Stored rows by the node that measured them (from the fake steps' note), with the hardware
    id they were filed under."""
    found: dict[str, list[dict]] = {}
    for row in storage.read_rows(out).to_dict("records"):
        found.setdefault(row["notes"].split("measured on ")[1].split(";")[0], []).append(row)
    return found


@pytest.mark.slow
def test_each_node_measures_into_its_own_shard_and_a_rerun_measures_only_what_is_new(cluster, tmp_path):
    out = tmp_path / "raw"
    rc, stdout, stderr = drive(cluster, out, 4)
    assert rc == 0, stderr
    result = json.loads(stdout)
    assert result["stopped"] == "complete" and len(result["targets"]) == 2
    shards = storage.list_shards(out)
    assert len(shards) == 2  # one shard per node
    by_node = rows_by_node(out)
    assert sorted(by_node) == list(NODES)
    for tag, rows in by_node.items():
        assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
        (hw,) = {r["hardware_id"] for r in rows}
        assert hw.startswith(f"cpu-{tag}-")  # filed under the fingerprint of the node that ran them
        assert storage.list_shards(out, hardware_id=hw) == [p for p in shards if f"__{hw}__" in p.name]
        fingerprint = json.loads((out / f"fingerprint__{hw}.json").read_text())
        assert fingerprint["hardware_id"] == hw and fingerprint["kind"] == "cpu"
    assert not (out / ".collect.holder.json").exists()  # the driver let go of the folder

    rc, stdout, stderr = drive(cluster, out, 6)  # two more configurations in the profile
    assert rc == 0, stderr
    again = json.loads(stdout)
    assert sorted((t["skipped_existing"], t["rows_written"]) for t in again["targets"]) == [(4, 2), (4, 2)]
    by_node = rows_by_node(out)
    for rows in by_node.values():
        assert len(rows) == 6 and len({r["row_id"] for r in rows}) == 6
    assert len(storage.list_shards(out)) == 4

    rc, stdout, stderr = drive(cluster, out, 7, "--plan")
    assert rc == 0, stderr
    projected = json.loads(stdout)
    assert len(projected["targets"]) == 2 and projected["cost_usd"] is None  # CPU nodes: no price
    for target in projected["targets"]:
        assert target["device"] == "cpu" and target["projected_s"] > 0
        assert target["plan"]["counts"] == {"measured": 6, "measure": 1}
    assert len(storage.list_shards(out)) == 4  # a plan measures nothing


def kill_at_gate(proc: subprocess.Popen, gate: Path) -> None:
    """Wait for the gated node to reach its gate, then SIGKILL the Ray worker measuring there."""
    reached = Path(str(gate) + ".reached")
    deadline = time.monotonic() + 120
    while not reached.exists() or not reached.read_text():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the gated node never reached its gate"
        time.sleep(0.05)
    os.kill(int(reached.read_text()), signal.SIGKILL)


@pytest.mark.slow
def test_a_killed_task_loses_nothing_and_its_retry_measures_only_the_rest(cluster, tmp_path):
    out, gate = tmp_path / "raw", tmp_path / "gate"
    gate.touch()
    env = {"FLEET_GATE": str(gate), "FLEET_GATE_NODE": NODES[1], "FLEET_GATE_AT": "3"}
    proc = drive(cluster, out, 6, "--max-retries", "1", env=env, wait=False)
    kill_at_gate(proc, gate)
    gate.unlink()
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr
    result = json.loads(stdout)
    b = next(t for t in result["targets"] if t["hardware_id"].startswith("cpu-nodeb-"))
    assert b["attempts"] == 2 and b["stopped"] == "complete"
    assert "WorkerCrashedError" in b["errors"][0]
    assert b["skipped_existing"] == 3  # the retry skipped what had arrived before the kill
    by_node = rows_by_node(out)
    for tag in NODES:
        ids = [r["row_id"] for r in by_node[tag]]
        assert len(ids) == 6 and len(set(ids)) == 6, tag


@pytest.mark.slow
def test_a_node_that_keeps_failing_is_reported_and_what_it_measured_is_kept(cluster, tmp_path):
    out, gate = tmp_path / "raw", tmp_path / "gate"
    gate.touch()
    env = {"FLEET_GATE": str(gate), "FLEET_GATE_NODE": NODES[0], "FLEET_GATE_AT": "2"}
    proc = drive(cluster, out, 5, "--max-retries", "0", env=env, wait=False)
    kill_at_gate(proc, gate)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 1
    assert stderr.strip().splitlines()[-1].startswith("error: 1 of 2 targets did not finish")
    result = json.loads(stdout)
    assert result["stopped"] == "partial"
    a = next(t for t in result["targets"] if t["hardware_id"].startswith("cpu-nodea-"))
    assert a["stopped"] == "failed" and a["attempts"] == 1 and a["rows_written"] == 2
    by_node = rows_by_node(out)
    assert len(by_node[NODES[0]]) == 2 and len(by_node[NODES[1]]) == 5


# --- the real quick profile ----------------------------------------------------------------------

REAL_BUDGET_S = 75
"""Budget of each real run, s: micro-benchmarks get a fifth of it, the slices the rest (at 15 s a run on a
loaded host measured no slice at all; at 40 s a 2-core AMD EPYC host of the same kind, quiet, measured
none either: `python -m collectors --profile quick --budget-s 60` there took 83 s for 9 micro-benchmarks
and 5 slices)."""


def collect_real(address: str, out: Path, *flags: str) -> dict:
    """`python -m collectors --ray ADDRESS --profile quick` as a user runs it (the real
    fingerprint, profile and training steps on the nodes); its --json output."""
    cmd = [sys.executable, "-m", "collectors", "--ray", address, "--profile", "quick", "--out", str(out)]
    cmd += ["--budget-s", str(REAL_BUDGET_S), "--json", *flags]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def shard_rows(paths: list[Path]) -> list[dict]:
    import pyarrow.parquet as pq

    return [row for p in paths for row in pq.read_table(p).to_pylist()]


@pytest.mark.slow
def test_the_real_quick_profile_measures_on_the_cluster_and_a_rerun_resumes(cluster, tmp_path):
    """The real quick profile through `--ray`: real fingerprints, micro-benchmarks and training
    slices on the nodes, under a small budget, then a re-run that resumes.

    Both nodes run on this machine, so their real fingerprints are the same hardware id: the
    cluster is one target whose first node measures and whose other node is its spare (its rows
    would have the same row ids), hence one shard series, not one per node. That each node
    measures into its own shard is checked above with per-node hardware ids
    (test_each_node_measures_into_its_own_shard_and_a_rerun_measures_only_what_is_new): real
    fingerprints cannot differ between two nodes of one machine."""
    from perfmodel.measure.fingerprint import collect_fingerprint

    real = collect_fingerprint()  # this machine's real fingerprint, found here, not on the nodes
    out = tmp_path / "raw"

    planned = collect_real(cluster, out, "--plan")
    (target,) = planned["targets"]  # two nodes, one hardware id: one target ...
    assert target["hardware_id"] == real.hardware_id and target["spares"] == 1  # ... with a spare
    assert planned["left_out"] == []

    first = collect_real(cluster, out)
    assert first["unreachable"] == [] and first["stopped"] == "complete"
    (done,) = first["targets"]
    assert done["hardware_id"] == real.hardware_id and done["attempts"] == 1 and done["errors"] == []
    rows = storage.read_rows(out).to_dict("records")
    assert rows and len(rows) == done["rows_written"]
    shard_ids = {storage.parse_shard_name(p)["hw"] for p in storage.list_shards(out)}
    assert shard_ids == {real.hardware_id}  # the spare measured nothing under an id of its own
    for row in rows:  # real measured rows, filed under the real fingerprint
        assert row["status"] == "ok" and row["step_time_s"] > 0, row
        assert row["source"] == "perfmodel-collector" and row["hardware_id"] == real.hardware_id
        assert len(row["step_times_s"]) == row["measured_steps"] > 0
    microbench = storage.read_rows(out, microbench=True).to_dict("records")
    assert microbench and done["microbench_rows"] == len(microbench)
    assert {r["hardware_id"] for r in microbench} == {real.hardware_id}
    assert {r["bench"] for r in microbench if r["status"] == "ok"} >= {"matmul"}
    fingerprint = json.loads((out / f"fingerprint__{real.hardware_id}.json").read_text())
    assert fingerprint["hardware_id"] == real.hardware_id and fingerprint["kind"] == real.kind
    assert fingerprint["cpu_model"] == real.cpu_model and fingerprint["cpu_cores"] == real.cpu_cores

    measured_before = {r["row_id"] for r in rows}
    done_before = {
        (r["bench"], r["dtype"], r["shape"]) for r in microbench if r["status"] in ("ok", "unsupported")
    }
    shards_before = set(storage.list_shards(out)) | set(storage.list_shards(out, microbench=True))
    again = collect_real(cluster, out)
    (resumed,) = again["targets"]
    assert resumed["skipped_existing"] == len(measured_before)
    new_shards = sorted(
        (set(storage.list_shards(out)) | set(storage.list_shards(out, microbench=True))) - shards_before
    )
    assert sorted(Path(p) for p in again["shards"]) == new_shards
    new_rows = shard_rows([p for p in new_shards if not p.name.startswith(storage.MICROBENCH_PREFIX)])
    assert len(new_rows) == resumed["rows_written"]
    assert not {r["row_id"] for r in new_rows} & measured_before  # nothing measured twice
    new_benches = shard_rows([p for p in new_shards if p.name.startswith(storage.MICROBENCH_PREFIX)])
    assert not {(r["bench"], r["dtype"], r["shape"]) for r in new_benches} & done_before
    union = [r["row_id"] for r in storage.read_rows(out).to_dict("records")]
    assert len(union) == len(set(union)) == len(measured_before) + len(new_rows)
