"""An answer other than success: its HTTP status and the reason, sent as ``{"error": reason}``."""

from __future__ import annotations


class ApiError(Exception):
    """A request refused or failed, with the status to answer and the reason to give."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def not_found(lab: str) -> ApiError:
    """The answer for a lab the caller has none of (another user's is the same: it is not theirs to know)."""
    return ApiError(404, f"Lab '{lab}' not found.")
