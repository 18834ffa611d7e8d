"""Errors nestlab reports to users (topology errors live in :mod:`nestlab.model.errors`)."""


class LabError(RuntimeError):
    """A lab operation that cannot go ahead; the message says what to do."""
