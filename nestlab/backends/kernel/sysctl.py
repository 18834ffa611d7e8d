"""Sysctls: writing one inside the calling thread's namespaces (what each kind gets: nestlab/kinds)."""

from __future__ import annotations

from ...errors import LabError
from . import files


def write(key: str, value: str) -> None:
    """Write a sysctl as seen from the calling thread's namespaces."""
    try:
        files.in_place("/proc/sys/" + key.replace(".", "/"), str(value))
    except FileNotFoundError:
        raise LabError(f"sysctl {key} does not exist in a network namespace of this kernel") from None
    except OSError as exc:
        raise LabError(f"sysctl {key}={value}: {exc.strerror}") from None
