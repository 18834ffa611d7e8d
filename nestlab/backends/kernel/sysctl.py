"""Sysctls: writing one inside the calling thread's namespaces (what each kind gets: nestlab/kinds)."""

from __future__ import annotations

from ...errors import LabError


def write(key: str, value: str) -> None:
    """Write a sysctl as seen from the calling thread's namespaces."""
    try:
        with open("/proc/sys/" + key.replace(".", "/"), "w") as fh:
            fh.write(str(value))
    except FileNotFoundError:
        raise LabError(f"sysctl {key} does not exist in a network namespace of this kernel") from None
    except OSError as exc:
        raise LabError(f"sysctl {key}={value}: {exc.strerror}") from None
