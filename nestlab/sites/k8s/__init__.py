"""Labs on Kubernetes (docs/servers.md): the site (site.py)."""

from . import site  # noqa: F401 - importing it registers the site (SITES)
