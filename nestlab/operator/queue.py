"""A work queue of keys, as client-go's: a key is queued once however often it is added, handled by one worker
at a time, and handled again after if it was added while handled (the change it stands for was not seen).  Fair
between namespaces: they take turns (round-robin), and at most ``per_namespace`` keys of one namespace are handled at
once, so one namespace's hundred slow labs delay no other's."""

from __future__ import annotations

import threading
import time
from collections import deque

PER_NAMESPACE = 2  # keys of one namespace handled at once (operator install --labs-per-namespace)


class WorkQueue:
    """Keys (``namespace/name``) to reconcile: :meth:`add`, then a worker's :meth:`get` ... :meth:`done`."""

    def __init__(self, per_namespace: int = PER_NAMESPACE) -> None:
        self.per_namespace = per_namespace
        self._cond = threading.Condition()
        self._waiting: dict[str, deque[str]] = {}  # namespace -> its queued keys, in order
        self._turns: deque[str] = deque()  # namespaces with queued keys, the next to be served first
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._busy: dict[str, int] = {}  # namespace -> its keys being handled
        self._again: set[str] = set()
        self._due: dict[str, float] = {}  # key -> when its one pending add_after adds it
        self._closed = False

    def add(self, key: str) -> None:
        with self._cond:
            if key in self._active:
                self._again.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                namespace = _namespace(key)
                if namespace not in self._waiting:
                    self._waiting[namespace] = deque()
                    self._turns.append(namespace)
                self._waiting[namespace].append(key)
                self._cond.notify()

    def add_after(self, key: str, seconds: float) -> None:
        """:meth:`add` ``key`` in ``seconds``; one such wait per key, the soonest (each reconcile asking for a later
        look, and each watch event making one, must not each start a chain of looks of its own)."""
        due = time.monotonic() + seconds
        with self._cond:
            if key in self._due and self._due[key] <= due:
                return
            self._due[key] = due
        timer = threading.Timer(seconds, self._due_now, (key, due))
        timer.daemon = True
        timer.start()

    def _due_now(self, key: str, due: float) -> None:
        with self._cond:
            if self._due.get(key) != due:  # a sooner wait replaced this one
                return
            del self._due[key]
        self.add(key)

    def get(self) -> str | None:
        """The next key of the first namespace in turn below its limit, now the caller's until :meth:`done`; None
        once the queue is closed."""
        with self._cond:
            while not self._closed and (namespace := self._next()) is None:
                self._cond.wait()
            if self._closed or namespace is None:
                return None
            key = self._waiting[namespace].popleft()
            self._turns.remove(namespace)
            if self._waiting[namespace]:
                self._turns.append(namespace)  # its next key waits for every other namespace's turn
            else:
                del self._waiting[namespace]
            self._queued.discard(key)
            self._active.add(key)
            self._busy[namespace] = self._busy.get(namespace, 0) + 1
            return key

    def _next(self) -> str | None:
        return next((ns for ns in self._turns if self._busy.get(ns, 0) < self.per_namespace), None)

    def done(self, key: str) -> None:
        with self._cond:
            self._active.discard(key)
            namespace = _namespace(key)
            self._busy[namespace] -= 1
            if not self._busy[namespace]:
                del self._busy[namespace]
            self._cond.notify_all()  # a namespace below its limit again: its keys may go
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def _namespace(key: str) -> str:
    return key.split("/", 1)[0]
