"""The operator's loop: a watch of every NestLab in the cluster (listed again every ``RESYNC`` seconds and
whenever the watch ends) feeding a :class:`~.queue.WorkQueue` that ``workers`` threads reconcile from."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from ..backends.remote.kube import Cluster
from .policy import Policy
from .queue import WorkQueue
from .reconcile import Reconciler, Say
from .resource import GROUP, PLURAL, VERSION

RESYNC = 60  # seconds: a watch is closed and every NestLab listed again this often
RETRY = 5.0  # seconds before a key whose reconcile raised is tried again, doubled each time it raises again
RETRY_MOST = 300.0  # ... up to this


def run(kube: Cluster, image: str, timeout: float, workers: int, say: Say, policy: Policy = Policy()) -> None:
    """Reconcile every NestLab on ``kube``'s cluster until the process ends, as ``policy`` says (install's)."""
    queue = WorkQueue(policy.per_namespace)
    reconciler = Reconciler(kube, image, timeout, say, policy)
    failures: dict[str, int] = {}  # key -> how often in a row its reconcile raised (a key is one worker's at a time)
    threads = [threading.Thread(target=_work, args=(queue, reconciler, say, failures), daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    try:
        _watch(reconciler, queue, say)
    finally:
        queue.close()


def _work(queue: WorkQueue, reconciler: Reconciler, say: Say, failures: dict[str, int]) -> None:
    while (key := queue.get()) is not None:
        namespace, name = key.split("/", 1)
        try:
            again = reconciler.reconcile(namespace, name)
            failures.pop(key, None)
        except Exception as exc:  # noqa: BLE001 - one resource's failure is its own, never the operator's
            failures[key] = failures.get(key, 0) + 1
            again = min(RETRY_MOST, RETRY * 2 ** (failures[key] - 1))
            said = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
            say(f"{key}: {said} (again in {again:.0f} s)")  # the operator's log; the status names the kind alone
            message = f"its reconcile raised {type(exc).__name__}, tried again in {again:.0f} s (the operator's log says more)"
            with contextlib.suppress(Exception):
                reconciler.failed(namespace, name, message)
        finally:
            queue.done(key)
        if again is not None:
            queue.add_after(key, again)


def _watch(reconciler: Reconciler, queue: WorkQueue, say: Say) -> None:
    from kubernetes import watch

    custom = reconciler.custom
    while True:
        try:
            listed: dict[str, Any] = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, _request_timeout=30)
            for item in listed["items"]:
                queue.add(f"{item['metadata']['namespace']}/{item['metadata']['name']}")
            stream = watch.Watch().stream(
                custom.list_cluster_custom_object,
                GROUP,
                VERSION,
                PLURAL,
                resource_version=listed["metadata"]["resourceVersion"],
                timeout_seconds=RESYNC,
            )
            for event in stream:
                meta = event["object"].get("metadata", {})
                if event["type"] != "ERROR" and "namespace" in meta:
                    queue.add(f"{meta['namespace']}/{meta['name']}")
        except Exception as exc:  # noqa: BLE001 - the API went away for a while: list again
            say(f"watching NestLabs: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            time.sleep(RETRY)
