"""A NestLab's files: every key the model reads a file for is given in a resource as the text itself, or as a
reference to a ConfigMap or Secret of the lab's own namespace (as a Pod's ``valueFrom``), never as a path: the
operator's disk (its service account's token) is not a lab's.

    startup-config: |                      # the text itself: a block with a newline
      hostname r1
    startup-config:                        # or a key of a ConfigMap or Secret of the lab's namespace
      valueFrom: {secretKeyRef: {name: r1-frr, key: frr.conf}}
    binds:                                 # a file at path: in the node, from its content or a reference
      - {path: /etc/motd, content: "hello\\n", mode: ro}
      - {path: /etc/app.conf, valueFrom: {configMapKeyRef: {name: app, key: app.conf}}}
    params: {trace: {valueFrom: {configMapKeyRef: {name: traces, key: lte.trace}}}}

:data:`FILE_KEYS` names every such key, wherever the topology's schema has it; :func:`resolve` gives the spec the
model reads (each file a path under :data:`FOLDER`, where the lab's pods find it in the lab's Secret) and those
files, which the model reads through ``model.files.only`` and nothing else.  Each value is bounded
(:data:`MAX_VALUE`, all of them :data:`MAX_FILES`); no message quotes a file's content.  A reference names a
ConfigMap or Secret of the lab's namespace by what Kubernetes allows as a name and a key (:func:`referable`), read
through the client's typed calls (each segment of the path quoted), and never a Secret of a type no lab is given
(:data:`WITHHELD`, unless an administrator allows the type at install).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import posixpath
import re
from collections.abc import Callable, Collection
from typing import Any

from ..backends.remote.kube import Cluster, ClusterError
from ..model.errors import dotted
from ..names import looks_like_path

FOLDER = "/etc/nestlab/files"  # where a lab's pod has the lab's Secret's files
MAX_VALUE = 512 * 1024  # bytes of one file's content
MAX_FILES = 900 * 1024  # bytes of all of a lab's files: they go in its Secret, which holds 1 MiB

# Every key the model reads a file for, and what it takes in a resource: text (the content itself goes into the
# spec), file (a path to its content), files (a list of those), binds (path + content each); refused: none.
FILE_KEYS: dict[str, str] = {
    "startup-config": "text",
    "license": "text",
    "trace": "file",
    "graph": "file",
    "env-files": "files",
    "binds": "binds",
    "identity-file": "refused",
}
_HOW = "give the text itself (a block with a newline) or valueFrom: {configMapKeyRef|secretKeyRef: {name: NAME, key: KEY}}"

Fetch = Callable[[str, str, str], bytes]  # (ConfigMap or Secret, its name, its key) -> the key's content

# Secrets no lab is given unless an administrator allows the type (operator install --allow-secret-type TYPE): they
# are credentials of the cluster itself (a service account's token, a registry's login, a TLS key, a node's join token)
WITHHELD = frozenset(
    {
        "kubernetes.io/service-account-token",
        "kubernetes.io/dockerconfigjson",
        "kubernetes.io/dockercfg",
        "kubernetes.io/tls",
        "bootstrap.kubernetes.io/token",
    }
)
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")  # a DNS-1123 subdomain
_KEY = re.compile(r"[-._a-zA-Z0-9]+")  # a ConfigMap's or Secret's key


def referable(name: str, key: str) -> str | None:
    """Why ``name`` is not a ConfigMap's or Secret's name or ``key`` not one of its keys, as Kubernetes allows them
    (a DNS-1123 subdomain of at most 253 characters; a key of letters, digits, '-', '_', '.', not '.' or '..'),
    or None."""
    if len(name) > 253 or not _NAME.fullmatch(name):
        return f"'{name[:60]}' is not a name Kubernetes allows (lower-case letters, digits, '-' and '.'): name an object of this namespace"
    if len(key) > 253 or not _KEY.fullmatch(key) or key in (".", "..") or key.startswith(".."):
        return f"'{key[:60]}' is not a key Kubernetes allows (letters, digits, '-', '_' and '.')"
    return None


def fetcher(kube: Cluster, allowed_types: Collection[str] = ()) -> Fetch:
    """A key of a ConfigMap or Secret of ``kube``'s namespace (the lab's), read with the operator's rights there by
    the client's typed calls; a Secret of a type of :data:`WITHHELD` not in ``allowed_types`` is refused."""

    def fetch(kind: str, name: str, key: str) -> bytes:
        if why := referable(name, key):
            raise LookupError(why)
        read = kube.core.read_namespaced_secret if kind == "Secret" else kube.core.read_namespaced_config_map
        try:
            found = kube.call(f"read {kind} {name}", read, name, kube.namespace)
        except ClusterError as exc:
            if exc.status == 404:
                raise LookupError(f"no {kind} {name} in namespace {kube.namespace}") from None
            raise LookupError(str(exc)) from None
        if kind == "Secret" and found.type in WITHHELD and found.type not in allowed_types:
            raise LookupError(
                f"Secret {name} is of type {found.type}, which no lab is given "
                "(an administrator may allow it: operator install --allow-secret-type TYPE)"
            )
        data, binary = found.data or {}, (found.binary_data if kind == "ConfigMap" else None) or {}
        if key in data:
            return base64.b64decode(data[key]) if kind == "Secret" else str(data[key]).encode()
        if key in binary:
            return base64.b64decode(binary[key])
        raise LookupError(f"{kind} {name} has no key {key}")

    return fetch


class Refused(ValueError):
    """A file key given as a path, a bad reference, a value too large: ``str()`` names each field."""


def resolve(spec: dict[str, Any], schema: dict[str, Any], fetch: Fetch) -> tuple[dict[str, Any], dict[str, bytes]]:
    """``spec`` with every file key's value read (``schema``: the topology's, which says where each key is) and the
    files that makes, by path."""
    out = copy.deepcopy(spec)
    walker = _Walker(fetch)
    walker.walk(out, schema, ())
    if walker.problems:
        raise Refused("; ".join(walker.problems))
    return out, walker.files


class _Walker:
    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch
        self.files: dict[str, bytes] = {}
        self.problems: list[str] = []
        self.size = 0

    def walk(self, value: Any, schema: dict[str, Any], path: tuple[str | int, ...]) -> None:
        if isinstance(value, dict):
            props, more = schema.get("properties") or {}, schema.get("additionalProperties")
            for key in list(value):
                where = (*path, key)
                if key in FILE_KEYS and (key in props or (key in ("env-files", "license") and "binds" in props)):
                    self._file_key(value, key, where)
                elif key == "image" and key in props and isinstance(value[key], str) and looks_like_path(value[key]):
                    self._refuse(where, f"'{value[key][:60]}' is a path: a resource's node runs an image by its name")
                elif key in props:
                    self.walk(value[key], props[key], where)
                elif isinstance(more, dict):
                    self.walk(value[key], more, where)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                self.walk(item, schema["items"], (*path, i))

    def _file_key(self, parent: dict[str, Any], key: str, where: tuple[str | int, ...]) -> None:
        how, value = FILE_KEYS[key], parent[key]
        if value is None:
            return
        if how == "refused":
            self._refuse(where, "a resource names no file (the operator's disk is not the lab's): leave it out")
        elif how == "text":
            if (text := self._content(value, where)) is not None:
                parent[key] = text if text.endswith("\n") else text + "\n"  # text, never taken for a path
        elif how == "file":
            if (text := self._content(value, where)) is not None:
                parent[key] = self._keep(text, key)
        elif how == "files":
            items = value if isinstance(value, list) else [value]
            kept = [(self._content(item, (*where, i)), i) for i, item in enumerate(items)]
            parent[key] = [self._keep(text, "env") for text, _i in kept if text is not None]
        elif not isinstance(value, list):
            self._refuse(where, "a list of {path: FILE, content: TEXT} or {path: FILE, valueFrom: ...}")
        else:
            parent[key] = [b for i, item in enumerate(value) if (b := self._bind(item, (*where, i)))]

    def _bind(self, item: Any, where: tuple[str | int, ...]) -> str | None:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            self._refuse(
                where,
                f"{_quoted(item)}a resource binds no file of the operator's: give {{path: FILE, content: TEXT}} "
                "or {path: FILE, valueFrom: {configMapKeyRef|secretKeyRef: {name: NAME, key: KEY}}} (mode: ro|rw)",
            )
            return None
        if set(item) - {"path", "content", "valueFrom", "mode"}:
            self._refuse(where, f"unknown keys {sorted(set(item) - {'path', 'content', 'valueFrom', 'mode'})}")
            return None
        given = {k: item[k] for k in ("content", "valueFrom") if k in item}
        text = self._content(given.get("content") if "content" in given else {"valueFrom": given.get("valueFrom")}, where)
        if text is None:
            return None
        target, mode = item["path"], item.get("mode")
        source = self._keep(text, posixpath.basename(target.rstrip("/")) or "file")
        return f"{source}:{target}:{mode}" if mode else f"{source}:{target}"

    def _content(self, value: Any, where: tuple[str | int, ...]) -> str | None:
        """The text a value gives (the text itself, or its reference's), or None after a problem."""
        if isinstance(value, str):
            if "\n" not in value:
                self._refuse(where, f"'{value[:60]}' would be a path (a resource names no file of the operator's): {_HOW}")
                return None
            data = value.encode()
        elif isinstance(value, dict) and set(value) == {"valueFrom"} and isinstance(value["valueFrom"], dict):
            referenced = self._referenced(value["valueFrom"], (*where, "valueFrom"))
            if referenced is None:
                return None
            data = referenced
        else:
            self._refuse(where, _HOW)
            return None
        self.size += len(data)
        if len(data) > MAX_VALUE or self.size > MAX_FILES:
            self._refuse(where, f"over {MAX_VALUE // 1024} KiB a file, or {MAX_FILES // 1024} KiB the lab's files together")
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            self._refuse(where, "not UTF-8 text")
            return None

    def _referenced(self, ref: dict[str, Any], where: tuple[str | int, ...]) -> bytes | None:
        kinds = {"configMapKeyRef": "ConfigMap", "secretKeyRef": "Secret"}
        if len(ref) != 1 or next(iter(ref)) not in kinds:
            self._refuse(where, "one of configMapKeyRef or secretKeyRef: {name: NAME, key: KEY}")
            return None
        which, named = next(iter(ref.items()))
        if not isinstance(named, dict) or not all(isinstance(named.get(k), str) and named[k] for k in ("name", "key")):
            self._refuse((*where, which), "name: and key: (strings)")
            return None
        if extra := sorted(set(named) - {"name", "key"}):  # a `namespace:` above all: a lab reads its own alone
            self._refuse((*where, which), f"{extra} not taken: name: and key: of an object of the lab's own namespace")
            return None
        if why := referable(named["name"], named["key"]):
            self._refuse((*where, which), why)
            return None
        try:
            return self.fetch(kinds[which], named["name"], named["key"])
        except LookupError as exc:
            self._refuse((*where, which), str(exc))
            return None

    def _keep(self, text: str, name: str) -> str:
        data = text.encode()
        path = f"{FOLDER}/{hashlib.sha256(data).hexdigest()[:16]}/{name}"
        self.files[path] = data
        return path

    def _refuse(self, where: tuple[str | int, ...], why: str) -> None:
        self.problems.append(f"spec.{dotted(where)}: {why}")


def _quoted(item: Any) -> str:
    return f"'{item[:60]}': " if isinstance(item, str) else ""
