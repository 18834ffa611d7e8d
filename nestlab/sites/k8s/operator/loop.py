"""The operator's loop: a watch of every NestLab in the cluster (listed again every ``RESYNC`` seconds and
whenever the watch ends) feeding a :class:`~.queue.WorkQueue` that ``workers`` threads reconcile from."""

from __future__ import annotations

import threading
import time
from typing import Any

from ....backends.remote.kube import Cluster
from .queue import WorkQueue
from .reconcile import Reconciler, Say
from .resource import GROUP, PLURAL, VERSION

RESYNC = 60  # seconds: a watch is closed and every NestLab listed again this often
RETRY = 5.0  # seconds before a key whose reconcile raised is tried again


def run(kube: Cluster, image: str, timeout: float, workers: int, say: Say) -> None:
    """Reconcile every NestLab on ``kube``'s cluster until the process ends."""
    queue = WorkQueue()
    reconciler = Reconciler(kube, image, timeout, say)
    threads = [threading.Thread(target=_work, args=(queue, reconciler, say), daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    try:
        _watch(reconciler, queue, say)
    finally:
        queue.close()


def _work(queue: WorkQueue, reconciler: Reconciler, say: Say) -> None:
    while (key := queue.get()) is not None:
        namespace, name = key.split("/", 1)
        try:
            again = reconciler.reconcile(namespace, name)
        except Exception as exc:  # noqa: BLE001 - one resource's failure must not stop the operator
            say(f"{key}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} (again in {RETRY:.0f} s)")
            again = RETRY
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
