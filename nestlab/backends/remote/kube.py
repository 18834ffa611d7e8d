"""A Kubernetes API server, through the official Python client (``kubernetes``, SIG API Machinery's).

It is chosen over lightkube and kr8s because it alone covers all that nestlab asks of a cluster
synchronously: typed CRUD, watches, and exec over the API's streaming protocol with exit codes.  Its
import takes ~0.5 s, so only ``nestlab k8s`` commands and labs running on a cluster load it.

Every failure becomes a one-line :class:`ClusterError`: no cluster reachable, credentials or RBAC
refused, an object refused by the API, an operation past its deadline.
"""

from __future__ import annotations

import copy
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote

from ...errors import LabError

if TYPE_CHECKING:
    from kubernetes.client.exceptions import ApiException


class ClusterError(LabError):
    """The cluster (not the file) refused or failed: exit 1; ``status``: the API's HTTP status, when it answered."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _kubernetes() -> tuple[Any, type[Exception]]:
    """The kubernetes package, imported when a cluster is first used, and urllib3's HTTPError (a request that got
    no answer)."""
    try:
        import kubernetes
    except ImportError:
        raise ClusterError(
            "labs on Kubernetes use the Python package kubernetes: pip install 'nestlab[k8s]' (make deps installs it)"
        ) from None
    from urllib3.exceptions import HTTPError

    return kubernetes, HTTPError


_POD_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
MAX_OUTPUT = (
    4 * 1024 * 1024
)  # bytes of an exec's output kept: a pod's root decides how much it prints  # a pod's service account: its token, CA and namespace


class Cluster:
    """One cluster and namespace, from a kubeconfig (``None``: $KUBECONFIG or ~/.kube/config, else the service
    account of the pod this runs in)."""

    def __init__(self, kubeconfig: str | None = None, namespace: str | None = None, timeout: float = 30):
        kubernetes, self._unanswered = _kubernetes()
        client, config = kubernetes.client, kubernetes.config
        self.timeout = timeout
        conf = client.Configuration()
        try:
            if kubeconfig is None and _in_pod():
                config.load_incluster_config(client_configuration=conf)
                with open(os.path.join(_POD_ACCOUNT, "namespace")) as fh:
                    active = {"context": {"namespace": fh.read().strip()}}
            else:
                config.load_kube_config(config_file=kubeconfig, client_configuration=conf)
                _contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
        except Exception as exc:  # noqa: BLE001 - the client raises several kinds for a bad or missing file
            raise ClusterError(f"no usable kubeconfig ({kubeconfig or '$KUBECONFIG or ~/.kube/config'}): {exc}") from None
        conf.retries = 1
        self.server = conf.host
        self.namespace = namespace or active.get("context", {}).get("namespace") or "default"
        self.api = client.ApiClient(conf)
        self.core = client.CoreV1Api(self.api)
        self._client = client
        self._stream = kubernetes.stream.stream
        self._conf = conf

    def scoped(self, namespace: str) -> Cluster:
        """This cluster (one connection pool) in another namespace."""
        other = copy.copy(self)
        other.namespace = namespace
        return other

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args)`` with this cluster's timeout; its failure as one line naming ``what``."""
        try:
            return fn(*args, _request_timeout=kwargs.pop("_request_timeout", min(self.timeout, 30)), **kwargs)
        except self._client.ApiException as exc:
            raise ClusterError(f"{what}: {_api_reason(exc, self.namespace)}", exc.status) from None
        except (self._unanswered, OSError) as exc:
            raise ClusterError(f"{what}: no Kubernetes API at {self.server} ({_root_cause(exc)})") from None

    # -- nodes ---------------------------------------------------------------------------------
    def nodes(self) -> dict[str, dict[str, Any]]:
        """Each node: whether it is Ready and schedulable, its InternalIP, why it is not ready, its container runtime
        (name://version), whether its runtime runs pods in user namespaces (as its kubelet reports), its labels and
        the effects of its taints (NoSchedule, NoExecute, ...)."""
        found = {}
        for node in self.call("list nodes", self.core.list_node).items:
            ready = next((c for c in node.status.conditions or [] if c.type == "Ready"), None)
            ip = next((a.address for a in node.status.addresses or [] if a.type == "InternalIP"), None)
            found[node.metadata.name] = {
                "ready": bool(ready and ready.status == "True"),
                "schedulable": not node.spec.unschedulable,
                "ip": ip,
                "why": (ready.message if ready else "no status yet") or "",
                "runtime": node.status.node_info.container_runtime_version if node.status.node_info else None,
                "userns": any(
                    h.features and h.features.user_namespaces for h in node.status.runtime_handlers or [] if not h.name
                ),
                "labels": dict(node.metadata.labels or {}),
                "taints": sorted({f"{t.key}:{t.effect}" for t in node.spec.taints or []}),
            }
        return found

    def wait_nodes_ready(self, wanted: Iterable[str], deadline: float, why: Callable[[str], str] = lambda _n: "") -> None:
        wanted = sorted(wanted)
        while True:
            try:
                nodes = self.nodes()
            except ClusterError:
                nodes = {}  # the API server may still be starting
            waiting = [n for n in wanted if not nodes.get(n, {}).get("ready")]
            if not waiting:
                return
            if time.monotonic() > deadline:
                first = waiting[0]
                state = nodes.get(first, {}).get("why") or "not registered"
                raise ClusterError(
                    f"node {first}{' (and ' + str(len(waiting) - 1) + ' more)' if len(waiting) > 1 else ''} "
                    f"not Ready in time: {state}; its kubelet: {why(first)}"
                )
            time.sleep(0.5)

    def wait_service_account(self, name: str, deadline: float, why: Callable[[], str] = lambda: "") -> None:
        while True:
            try:
                self.core.read_namespaced_service_account(name, self.namespace, _request_timeout=5)
                return
            except self._client.ApiException as exc:
                if exc.status != 404:
                    raise ClusterError(f"read service account {name}: {_api_reason(exc, self.namespace)}") from None
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"no service account {name} in namespace {self.namespace} in time (the controller manager: {why()})"
                )
            time.sleep(0.3)

    # -- objects -------------------------------------------------------------------------------
    def create(self, obj: dict[str, Any]) -> None:
        kind, name = obj["kind"], obj["metadata"]["name"]
        create = {
            "ConfigMap": self.core.create_namespaced_config_map,
            "Secret": self.core.create_namespaced_secret,
            "Service": self.core.create_namespaced_service,
            "Pod": self.core.create_namespaced_pod,
        }[kind]
        self.call(f"create {kind} {name} in namespace {self.namespace}", create, self.namespace, obj)

    def apply(self, obj: dict[str, Any]) -> None:
        """Create ``obj`` (a kind of :data:`PLURALS`), or bring it to this content, by server-side apply."""
        self._at(
            "PATCH",
            obj,
            query_params=[("fieldManager", "nestlab"), ("force", "true")],
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body=obj,
        )

    def read(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """``obj`` (a kind of :data:`PLURALS`) as the cluster has it, or None if it has none."""
        return self._at("GET", obj)

    def remove(self, obj: dict[str, Any]) -> bool:
        """Delete ``obj`` (a kind of :data:`PLURALS`) if it is there; whether it was."""
        return self._at("DELETE", obj) is not None

    def _at(self, method: str, obj: dict[str, Any], **kwargs: Any) -> dict[str, Any] | None:
        """The API's answer to ``method`` at ``obj``'s path; None if there is no such object."""
        what = f"{method.lower()} {obj['kind']} {obj['metadata']['name']}"
        try:
            found: dict[str, Any] | None = self.api.call_api(
                _path(obj),
                method,
                auth_settings=["BearerToken"],
                response_type="object",
                _return_http_data_only=True,
                _request_timeout=min(self.timeout, 30),
                **kwargs,
            )
            return found
        except self._client.ApiException as exc:
            if exc.status == 404:
                return None
            raise ClusterError(f"{what}: {_api_reason(exc, self.namespace)}", exc.status) from None
        except (self._unanswered, OSError) as exc:
            raise ClusterError(f"{what}: no Kubernetes API at {self.server} ({_root_cause(exc)})") from None

    def pods(self, selector: str) -> list[Any]:
        pods: list[Any] = self.call("list pods", self.core.list_namespaced_pod, self.namespace, label_selector=selector).items
        return pods

    def delete_all(self, selector: str, deadline: float, grace: int = 30) -> None:
        """Delete the pods, services, config maps and secrets carrying ``selector`` and wait until no pod is left; a pod
        whose node is not Ready (no kubelet left to stop it) is removed from the API at once."""

        def delete_pod(name: str, seconds: int) -> None:
            body = self._client.V1DeleteOptions(grace_period_seconds=seconds, propagation_policy="Background")
            try:
                self.core.delete_namespaced_pod(name, self.namespace, body=body, _request_timeout=30)
            except self._client.ApiException as exc:
                if exc.status != 404:
                    raise ClusterError(f"delete pod {name}: {_api_reason(exc, self.namespace)}") from None

        for pod in self.pods(selector):
            delete_pod(pod.metadata.name, grace)
        for listing, delete, kind in (
            (self.core.list_namespaced_service, self.core.delete_namespaced_service, "service"),
            (self.core.list_namespaced_config_map, self.core.delete_namespaced_config_map, "config map"),
            (self.core.list_namespaced_secret, self.core.delete_namespaced_secret, "secret"),
        ):
            for item in self.call(f"list {kind}s", listing, self.namespace, label_selector=selector).items:
                self.call(f"delete {kind} {item.metadata.name}", delete, item.metadata.name, self.namespace)
        while pods := self.pods(selector):
            ready = {n for n, v in self.nodes().items() if v["ready"]}
            for pod in pods:
                if pod.spec.node_name not in ready:  # unscheduled, or its node gone: no kubelet will stop it
                    delete_pod(pod.metadata.name, 0)
            if time.monotonic() > deadline:
                raise ClusterError(f"pods {', '.join(p.metadata.name for p in pods)} still terminating after the timeout")
            time.sleep(0.3)

    # -- exec ----------------------------------------------------------------------------------
    def exec(
        self,
        pod: str,
        command: list[str],
        timeout: float = 600,
        on_out: Callable[[Any], None] | None = None,
        on_err: Callable[[Any], None] | None = None,
        binary: bool = False,
        stdin: IO[bytes] | None = None,
        limit: int = MAX_OUTPUT,
    ) -> tuple[int, str, str]:
        """Run ``command`` in ``pod`` through the API: (exit code, stdout, stderr), at most ``timeout`` seconds and
        ``limit`` bytes of output kept (more is an error: whoever is root in a pod decides what it prints); with
        ``on_out``/``on_err`` the output goes there as it comes instead (as bytes with ``binary``); what is read
        from ``stdin`` goes on to the command's standard input as it comes (its end does not: the exec protocol
        cannot say it)."""
        # stream() swaps its ApiClient's request method while it runs: an exec on a client of its own, so
        # execs in parallel threads and the calls around them never see each other's
        own = self._client.CoreV1Api(self._client.ApiClient(self._conf))
        client = self.call(
            f"exec in pod {pod}",
            self._stream,
            own.connect_get_namespaced_pod_exec,
            pod,
            self.namespace,
            command=command,
            stderr=True,
            stdin=stdin is not None,
            stdout=True,
            tty=False,
            binary=binary,
            _preload_content=False,
            _request_timeout=timeout,
        )
        out: list[Any] = []
        err: list[Any] = []
        kept = [0]

        def keep(into: list[Any]) -> Callable[[Any], None]:
            def add(data: Any) -> None:
                kept[0] += len(data)
                if kept[0] > limit:
                    raise ClusterError(f"exec in pod {pod}: more than {limit // 1024} KiB of output, which is not kept")
                into.append(data)

            return add

        on_out = on_out or keep(out)
        on_err = on_err or keep(err)
        deadline = time.monotonic() + timeout
        if stdin is not None:
            threading.Thread(target=_relay, args=(stdin, client), daemon=True).start()
        try:
            while client.is_open():
                client.update(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
                if client.peek_stdout():
                    on_out(client.read_stdout(timeout=0))
                if client.peek_stderr():
                    on_err(client.read_stderr(timeout=0))
                if time.monotonic() > deadline:
                    raise ClusterError(f"exec in pod {pod}: no answer after {timeout:.0f} s")
            code = client.returncode
        finally:
            client.close()
        joined = (b"" if binary else "").join
        # with binary the output went to on_out/on_err as bytes: the empty joins returned then are never read
        return (code if code is not None else 1), joined(out), joined(err)  # type: ignore[return-value]


PLURALS = {
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "Namespace": "namespaces",
    "ServiceAccount": "serviceaccounts",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Deployment": "deployments",
    "CustomResourceDefinition": "customresourcedefinitions",
}


def _path(obj: dict[str, Any]) -> str:
    """The API path of ``obj``: its group's, its namespace's if it has one, its kind's plural, its name; the
    namespace and the name each one segment, quoted ('.' and '..', which a client removes, are refused)."""
    version = obj["apiVersion"]
    namespace = obj["metadata"].get("namespace")
    return (
        f"{'/api/v1' if version == 'v1' else '/apis/' + version}{'/namespaces/' + _segment(namespace) if namespace else ''}"
        f"/{PLURALS[obj['kind']]}/{_segment(obj['metadata']['name'])}"
    )


def _segment(name: str) -> str:
    """``name`` as one segment of an API path."""
    if name in ("", ".", ".."):
        raise ClusterError(f"'{name}' cannot name a Kubernetes object")
    return quote(name, safe="")


def _in_pod() -> bool:
    """In a pod with a service account, and no kubeconfig named by $KUBECONFIG or at ~/.kube/config."""
    return (
        "KUBERNETES_SERVICE_HOST" in os.environ
        and os.path.exists(os.path.join(_POD_ACCOUNT, "token"))
        and not os.environ.get("KUBECONFIG")
        and not os.path.exists(os.path.expanduser("~/.kube/config"))
    )


def _relay(source: Any, client: Any) -> None:
    """What arrives on ``source``, on to the exec's standard input, until either ends."""
    try:
        for chunk in iter(lambda: source.read1(1 << 16), b""):
            client.write_stdin(chunk)
    except Exception:  # noqa: BLE001 - the command ended: nothing more to send
        pass


def _api_reason(exc: ApiException, namespace: str) -> str:
    try:
        message = json.loads(exc.body).get("message") or exc.reason
    except (TypeError, ValueError):
        message = exc.reason
    if exc.status == 401:
        return f"the API server does not accept these credentials ({message})"
    if exc.status == 403:
        return f"RBAC denied it in namespace {namespace}: {message}"
    return f"{message} (HTTP {exc.status})"


def _root_cause(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    while isinstance(reason, BaseException) and (deeper := getattr(reason, "reason", None)) is not None and reason is not deeper:
        reason = deeper
    text = str(reason or exc)
    return text.split(": ", 1)[-1][:200]
