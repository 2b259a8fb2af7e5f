"""Collect on a fleet: the profile runs as Ray tasks pinned to the nodes of a cluster, once per
distinct accelerator type (or per distinct node), and this driver writes their rows as ordinary
shards in its output folder.

    perfmodel collect --ray auto --profile gpu                 # one task per GPU type
    perfmodel collect --ray 10.0.0.5:6379 --profile quick --per node --plan

1. Connect (`ray.init(address=...)`) and list the live nodes (`ray.nodes()`: CPUs, GPUs, Ray's
   `accelerator_type:*` resource).
2. Fingerprint each node (perfmodel.measure.fingerprint) with a tiny task holding the same resources as
   its measuring task will (the node's CPUs, plus one GPU on a GPU node), so both see the same
   devices and agree on the hardware id.
3. Group into targets: `--per gpu-type`, one per accelerator type (the catalog key; a CPU host's
   type is its hardware id); `--per node`, one per distinct hardware id (identical nodes share an
   id and their rows would share row ids, so one of them measures). The node whose hardware id
   already has the most rows here goes first, so a re-run resumes there; the others are spares.
4. Hold the output folder (collectors.lock) for the rest of the run and set damaged shards aside.
   Each target's task is given what its hardware id already has here (row ids, micro-benchmark
   keys) and skips it (collectors.harness.run_profile's skip hooks): one host's resume rule.
5. Each task (a Ray streaming generator; NodeAffinitySchedulingStrategy, soft=False)
   fingerprints itself, builds the profile for its device and runs the harness under its budget
   into a scratch folder, yielding each row as it is measured. The driver waits on all tasks at
   once (`ray.wait`) and writes each hardware id's rows as shards (every `flush_every` rows, and
   when its task ends or fails): a failing node never costs what the others measured, and costs
   itself at most the configuration in progress.
6. A failed task (its worker or node died, or it raised) runs again, up to `max_retries` times, on
   the next live node of its group (the same node when it has no spare), skipping what the shards
   now hold; then it is reported. A task running OVERRUN_GRACE_S past its budget is cancelled and
   reported. Ctrl-C, SIGTERM or SIGHUP cancels every task and keeps what arrived.

Ray sets OMP_NUM_THREADS to the CPUs a task holds: a measuring task holds all of its node's
logical CPUs, so nothing else Ray schedules shares the node. On an SMT host torch alone would use
one thread per physical core; set OMP_NUM_THREADS on that node's `ray start` to match rows
measured there without Ray.

Modules follow a run: `cluster` (Ray: connecting, pinning a task to a node) -> `nodes` (listing,
fingerprinting and grouping the nodes into targets) -> `tasks` (what runs on a node) -> `runner`
(the driver's loop, shown by `progress`, reported in `results`) -> `driver` (collect_fleet);
`plan` (plan_fleet) projects a run instead. Importing this package does not import Ray or torch.
"""

from __future__ import annotations

from collectors.fleet.cluster import CONNECT_TIMEOUT_S, FleetError, connected, import_ray
from collectors.fleet.driver import DEFAULT_MAX_RETRIES, collect_fleet
from collectors.fleet.nodes import (
    FINGERPRINT_TIMEOUT_S,
    PER,
    FleetNode,
    FleetTarget,
    discover_nodes,
    group_targets,
)
from collectors.fleet.plan import FleetPlan, TargetPlan, plan_fleet
from collectors.fleet.progress import FleetProgress
from collectors.fleet.results import FleetResult, TargetOutcome
from collectors.fleet.runner import OVERRUN_GRACE_S, POLL_S
from collectors.fleet.tasks import DEFAULT_HOOKS, NodeJob, TaskHooks, measure_on_node

__all__ = [
    "CONNECT_TIMEOUT_S",
    "DEFAULT_HOOKS",
    "DEFAULT_MAX_RETRIES",
    "FINGERPRINT_TIMEOUT_S",
    "OVERRUN_GRACE_S",
    "PER",
    "POLL_S",
    "FleetError",
    "FleetNode",
    "FleetPlan",
    "FleetProgress",
    "FleetResult",
    "FleetTarget",
    "NodeJob",
    "TargetOutcome",
    "TargetPlan",
    "TaskHooks",
    "collect_fleet",
    "connected",
    "discover_nodes",
    "group_targets",
    "import_ray",
    "measure_on_node",
    "plan_fleet",
]
