"""Ray plumbing of a fleet collection: importing and connecting to Ray, the options that pin a
task to a node, cancelling, the live nodes, and one-line reports of a task's failure. Ray is
imported only when a collection connects."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
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


CONNECT_TIMEOUT_S = 30.0
"""Seconds `connected` waits for a Ray cluster before it gives up (`--ray-timeout-s`)."""


def _fail(address: str, why: str) -> FleetError:
    return FleetError(
        f"cannot connect to the Ray cluster at {address!r}: {why[:200]}; start one (`ray start --head`) "
        "or pass its address: --ray HOST:PORT"
    )


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a HOST:PORT address (a ray:// client address too); None for 'auto' and
    anything else Ray resolves itself."""
    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


def check_reachable(address: str, timeout_s: float) -> None:
    """FleetError unless something accepts a TCP connection at `address` (HOST:PORT) within
    `timeout_s`: nothing listening is known at once, an unreachable host within the bound, where
    Ray itself would retry for minutes."""
    target = _host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout_s):
            pass
    except TimeoutError:
        raise _fail(address, f"no answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise _fail(address, exc.strerror or type(exc).__name__) from None


def _init_within(ray: Any, address: str, timeout_s: float, bound_s: float) -> None:
    """`ray.init(address)` bounded by `timeout_s`: it runs in a helper thread while this thread
    waits (so SIGINT / SIGTERM still interrupt the wait); past the bound, FleetError (naming
    `bound_s`, the whole connection's)."""
    done = threading.Event()
    failure: list[BaseException] = []

    def init() -> None:
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False, namespace="perfmodel")
        except BaseException as exc:  # noqa: BLE001 - reported by the waiting thread
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=init, name="perfmodel-ray-connect", daemon=True).start()
    if not done.wait(timeout_s):
        raise _fail(address, f"no Ray cluster answered within {bound_s:g} s (--ray-timeout-s)")
    if failure:
        exc = failure[0]
        raise _fail(address, first_line(exc) or type(exc).__name__) from None


@contextlib.contextmanager
def connected(address: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator[Any]:
    """The `ray` module, connected to the cluster at `address` ('auto': the one this machine
    belongs to) for the block; an existing connection is reused and left open. Connecting takes
    at most `timeout_s` (then FleetError, one line); SIGINT / SIGTERM interrupt it."""
    if not timeout_s > 0:
        raise ConfigError(f"--ray-timeout-s must be > 0; got {timeout_s}")
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    start = time.monotonic()
    check_reachable(address, timeout_s)
    # Ray prints the cluster's error messages (a worker died, ...) on stdout: they are logs here.
    with contextlib.redirect_stdout(sys.stderr):
        _init_within(ray, address, max(timeout_s - (time.monotonic() - start), 0.1), timeout_s)
        try:
            yield ray
        finally:
            ray.shutdown()


def live_node_entries(ray: Any) -> list[dict[str, Any]]:
    """`ray.nodes()` entries of the nodes that are alive."""
    return [e for e in ray.nodes() if e.get("Alive")]


def pinned(node: PinnableNode) -> dict[str, Any]:
    """Task options: the node's task resources, on that node only, never retried by Ray."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # Ray: only when connected

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
