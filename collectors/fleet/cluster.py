"""Ray plumbing of a fleet collection: importing and connecting to Ray, the options that pin a
task to a node, cancelling, the live nodes, and one-line reports of a task's failure. Ray is
imported only when a collection connects."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, Protocol

from perfmodel.errors import ConfigError, PerfModelError


class PinnableNode(Protocol):
    """What `pinned` needs of a node (`collectors.fleet.nodes.FleetNode`)."""

    @property
    def node_id(self) -> str: ...

    def task_resources(self) -> dict[str, Any]: ...


class FleetError(PerfModelError, RuntimeError):
    """The Ray cluster cannot be reached or used, or a node's task failed."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray, which is not installed: pip install 'perfmodel[fleet]'") from None
    return ray


@contextlib.contextmanager
def connected(address: str) -> Iterator[Any]:
    """The `ray` module, connected to the cluster at `address` ('auto': the one this machine
    belongs to) for the block; an existing connection is reused and left open."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    # Ray prints the cluster's error messages (a worker died, ...) on stdout: they are logs here.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False, namespace="perfmodel")
        except Exception as exc:  # noqa: BLE001 - ConnectionError, ValueError, RuntimeError ... one line
            raise FleetError(
                f"cannot connect to the Ray cluster at {address!r}: "
                f"{(first_line(exc) or type(exc).__name__)[:200]}; start one (`ray start --head`) "
                "or pass its address: --ray HOST:PORT"
            ) from None
        try:
            yield ray
        finally:
            ray.shutdown()


def live_node_entries(ray: Any) -> list[dict[str, Any]]:
    """`ray.nodes()` entries of the nodes that are alive."""
    return [e for e in ray.nodes() if e.get("Alive")]


def pinned(node: PinnableNode) -> dict[str, Any]:
    """Task options: the node's task resources, on that node only, never retried by Ray."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {
        **node.task_resources(),
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        "max_retries": 0,  # the driver retries, with what has arrived since
        "retry_exceptions": False,
    }


def cancel_quietly(ray: Any, ref: Any) -> None:
    """Force-cancel a task (or streaming generator); one that has already ended is no error."""
    with contextlib.suppress(Exception):
        ray.cancel(ref, force=True)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message ('' when it has none)."""
    return (str(exc).strip().splitlines() or [""])[0]


def one_line(exc: BaseException) -> str:
    """'Type: first line' of a task's failure (the task's own exception when Ray wraps it)."""
    cause = getattr(exc, "cause", None)  # RayTaskError wraps the task's exception
    exc = cause if isinstance(cause, BaseException) else exc
    text = first_line(exc)
    if text.startswith("ray::") or not text:  # the traceback header of a RayTaskError
        text = ""
    return f"{type(exc).__name__}: {text}"[:240] if text else type(exc).__name__
