"""A work queue of keys, as client-go's: a key is queued once however often it is added, handled by one worker
at a time, and handled again after if it was added while handled (the change it stands for was not seen)."""

from __future__ import annotations

import threading
import time
from collections import deque


class WorkQueue:
    """Keys (``namespace/name``) to reconcile: :meth:`add`, then a worker's :meth:`get` ... :meth:`done`."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._order: deque[str] = deque()
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._again: set[str] = set()
        self._due: dict[str, float] = {}  # key -> when its one pending add_after adds it
        self._closed = False

    def add(self, key: str) -> None:
        with self._cond:
            if key in self._active:
                self._again.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._order.append(key)
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
        """The next key, now the caller's until :meth:`done`; None once the queue is closed."""
        with self._cond:
            while not self._order and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            key = self._order.popleft()
            self._queued.discard(key)
            self._active.add(key)
            return key

    def done(self, key: str) -> None:
        with self._cond:
            self._active.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
