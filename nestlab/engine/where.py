"""Where a lab runs: the one record that says so (``/run/nestlab/LAB/site.json``), read and written here.

The sites themselves (this machine, SSH servers, Kubernetes) are plug-ins (nestlab/sites), found by
the word the record holds (``nestlab.sites.of``); what else the record holds is the site's own.  A lab
without a record runs on this machine.  The record is written before anything is made elsewhere, so a cleanup from
here always knows where to go.  A lab made from elsewhere (a NestLab an operator made) has no record here: its site is
found in its cluster and handed to its ``Lab`` (nestlab/operator/found.py).
"""

from __future__ import annotations

import json
import os
from typing import Any

from .. import names
from ..backends.kernel import files
from ..errors import LabError
from ..registry import SITES

RECORD = "site.json"
LOCAL = "local"


class DamagedRecord(LabError):
    """The record cannot be read: where the lab's shares went is unknown here."""


def _path(lab: str) -> str:
    return os.path.join(names.lab_dir(lab), RECORD)


def read(lab: str) -> tuple[str, dict[str, Any]] | None:
    """The lab's site word and the site's own data, or None for a lab on this machine."""
    try:
        with open(_path(lab), "rb") as fh:
            found = json.loads(fh.read())
        if not isinstance(found, dict) or found.get("site") not in SITES or not isinstance(found.get("data"), dict):
            raise ValueError("not a site record")
        for key, kind in SITES.get(found["site"]).keys.items():
            if not isinstance(found["data"].get(key), kind):
                raise ValueError(f"its {key} is not a {kind.__name__}")
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise DamagedRecord(
            f"{_path(lab)} is damaged ({exc}): where lab {lab} runs is unknown here; "
            f"run `nestlab cleanup {lab}` on each machine it ran on"
        ) from None
    return found["site"], found["data"]


def write(lab: str, site: str, data: dict[str, Any]) -> None:
    """Write the lab's record whole, or not at all."""
    files.make_dirs(names.lab_dir(lab), 0o700)
    files.write(_path(lab), json.dumps({"site": site, "data": data}), 0o600, sync=False)


def forget(lab: str) -> None:
    """Drop the record (once what it points at is gone)."""
    try:
        os.unlink(_path(lab))
    except FileNotFoundError:
        pass
