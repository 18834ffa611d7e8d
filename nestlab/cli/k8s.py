"""``nestlab k8s ...``: labs on Kubernetes, and a cluster on this machine to run them on (docs/servers.md)."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

import typer
import yaml

from .. import sites
from ..backends.kernel import files
from ..backends.remote.kube import Cluster
from ..engine.handout import handed_out
from ..errors import LabError
from ..lab.lab import Lab
from ..operator.inputs import WITHHELD
from ..operator.policy import Policy
from ..operator.queue import PER_NAMESPACE
from ..sites.k8s.manifests import NESTLAB_REF
from ..sites.k8s.manifests import render as make
from ..sites.k8s.site import Target
from ..testbeds import cluster
from ..testbeds.images import nestlab_image
from .common import err, notices, out, reported

k8s_app = typer.Typer(
    help="Run labs on Kubernetes: deploy, render manifests, build the image; a cluster on this machine (cluster up/down).",
    no_args_is_help=True,
)
cluster_app = typer.Typer(
    help="A Kubernetes cluster built from source on this machine (make k8s), for CI, demos and trying labs.", no_args_is_help=True
)
operator_app = typer.Typer(
    help="Labs as Kubernetes resources: install the NestLab resource and its operator (install/uninstall), or run the "
    "operator from here (run).  Then kubectl apply a NestLab (examples/nestlab-resource.yaml) and read its status.",
    no_args_is_help=True,
)
k8s_app.add_typer(cluster_app, name="cluster")
k8s_app.add_typer(operator_app, name="operator")
commands = typer.Typer()
commands.add_typer(k8s_app, name="k8s")

KubeconfigOpt = typer.Option(None, "--kubeconfig", help="The cluster's kubeconfig (default: $KUBECONFIG, then ~/.kube/config).")
NamespaceOpt = typer.Option(
    None, "--namespace", "-n", help="Kubernetes namespace (default: the kubeconfig context's, else default)."
)
TimeoutOpt = typer.Option(300.0, "--timeout", help="Seconds to wait for the cluster before giving up (and cleaning up).")


def _say(message: str) -> None:
    err.line(message)


@k8s_app.command("deploy")
def deploy(
    topo: Path = typer.Option(..., "-t", "--topo", help="Topology file."),
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str | None = NamespaceOpt,
    image: str | None = typer.Option(
        None,
        "--image",
        help="Image with nestlab in it (default: localhost/nestlab:VERSION, "
        "which `k8s cluster up` and `k8s image` build from this checkout).",
    ),
    count: int | None = typer.Option(
        None,
        "--servers",
        help="How many shares (pods); default: one per Ready node, at most one per lab node (one per pinned node when all are pinned).",
    ),
    timeout: float = TimeoutOpt,
    privileged: bool = typer.Option(
        False,
        "--privileged",
        help="Privileged pods, root on their cluster nodes, for a cluster whose runtime has no user namespaces "
        "(without it such a cluster is refused; docs/security.md).",
    ),
):
    """Deploy a lab on a Kubernetes cluster: split as on SSH servers, one pod per share, VXLAN between the pods.
    Each pod runs in a user namespace of its own (hostUsers: false), not privileged: root in the lab is not root
    on the cluster's nodes; a cluster that cannot (containerd before 2.0) is refused unless --privileged.  A node's
    server: may name a Kubernetes node to pin it there.  Waits until every share is deployed and every stitched
    link answers; if anything fails, every pod is deleted.

    Then: nestlab inspect / exec / graph / destroy --lab NAME work as for any lab.

    Example: nestlab k8s cluster up --nodes 3 --kubeconfig kc.yaml ; nestlab k8s deploy -t lab.yml --kubeconfig kc.yaml
    """

    started = time.perf_counter()
    with reported():
        lab = Lab.from_file(topo)
        notices(lab)
        target = Target(str(kubeconfig) if kubeconfig else None, namespace, image, count, timeout, _say, privileged)
        site = sites.chosen(lab.blueprint, target)
        parts = lab.deploy(site=site).partition
        assert parts is not None
        counts = Counter(parts.placement.server(n) for n in lab.plan.nodes)
        tunnels = sum(len(s.stitched) for s in parts.shares.values()) // 2
        pods = site.data["pods"]
        err.line(
            f"lab {lab.name}: {len(lab.plan.nodes)} nodes in {len(pods)} pods "
            f"({', '.join(f'{pods[s]}: {counts.get(s, 0)}' for s in sorted(pods))}), "
            f"{tunnels} VXLAN tunnels (MTU {parts.mtu}) in {time.perf_counter() - started:.2f} s"
        )
        out.line(
            f"next: nestlab inspect --lab {lab.name};  nestlab exec --lab {lab.name} NODE -- CMD (runs in the node's pod);  "
            f"nestlab destroy --lab {lab.name}"
        )


@k8s_app.command("render")
def render(
    topo: Path = typer.Option(..., "-t", "--topo", help="Topology file."),
    count: int = typer.Option(2, "--servers", help="How many shares (pods) to split the lab into."),
    image: str | None = typer.Option(
        None, "--image", help="A container image with nestlab (default: localhost/nestlab:VERSION; see k8s image)."
    ),
    namespace: str = typer.Option("default", "--namespace", "-n", help="Kubernetes namespace of the objects."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the manifests here (default: standard output)."),
    privileged: bool = typer.Option(False, "--privileged", help="Privileged pods, as k8s deploy --privileged makes."),
):
    """Write the manifests nestlab k8s deploy creates: a Secret with the shares, a headless Service,
    and one pod per share running nestlab on it (each in a user namespace of its own, unless --privileged), VXLAN
    between the pods' addresses.  With
    kubectl apply -f FILE, the pods find each other through the cluster's DNS; kubectl delete -f FILE
    runs nestlab destroy in each pod first.

    Example: nestlab k8s render -t lab.yml --servers 3 -o lab-k8s.yaml
    """

    with reported():
        lab = Lab.from_file(topo)
        manifests, parts = make(handed_out(lab.blueprint), count, image or NESTLAB_REF, namespace, privileged=privileged)
        text = yaml.safe_dump_all(manifests, sort_keys=False)
        if output:  # 0600: the Secret holds the topology, passwords too
            with files.created(output, 0o600) as fh:
                fh.write(text.encode())
            err.line(f"lab {lab.name}: {count} pods, {len(parts.placement.cut)} cut links; manifests in {output}")
        else:
            out.line(text)


@k8s_app.command("logs")
def logs(
    lab: str = typer.Argument(..., help="The lab (a NestLab's name, or a lab deployed with k8s deploy)."),
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str | None = NamespaceOpt,
    tail: int = typer.Option(200, "--tail", min=1, help="Lines of each pod's log, its last."),
):
    """Print each pod of a lab's log: its share's deploy and what changed it since (a failed NestLab's pods stay for
    this until its next change or deletion).  Needs `get` on pods/log in the namespace, as kubectl logs does.

    Example: nestlab k8s logs nl-demo -n labs
    """
    from ..sites.k8s.logs import pod_logs

    with reported():
        kube = Cluster(str(kubeconfig) if kubeconfig else None, namespace)
        for pod, text in pod_logs(kube, lab, tail):
            out.line(f"==> pod {pod} <==\n{text.rstrip()}")


@k8s_app.command("image")
def image(output: Path | None = typer.Option(None, "-o", "--output", help="Also copy the OCI archive here.")):
    """Build the nestlab image from this checkout (Debian base, nestlab's dependencies, nestlab; each layer
    cached) as an OCI archive, and print its path.  Load it into a cluster's nodes with
    `ctr -n k8s.io images import FILE` (containerd) or push it with skopeo; `k8s cluster up` does this itself.
    """

    with reported():
        path = nestlab_image(_say)
        if output:
            shutil.copy(path, output)
        err.line(f"image {NESTLAB_REF}")
        out.line(str(output or path))


@cluster_app.command("up")
def cluster_up(
    nodes: int = typer.Option(3, "--nodes", help="How many nodes (node1 .. nodeN)."),
    kubeconfig: Path = typer.Option(..., "--kubeconfig", help="Where to write the cluster's admin kubeconfig."),
    name: str = typer.Option("k8s", "--name", help="The cluster's name (it is a nestlab lab of that name)."),
    timeout: float = TimeoutOpt,
):
    """Start a Kubernetes cluster on this machine: etcd, kube-apiserver, kube-controller-manager and
    kube-scheduler in one namespace, and N nodes, each an emulated server with its own containerd and
    kubelet, pods on every node reaching each other; the nestlab image from this checkout is loaded
    into every node.  Binaries come from `make k8s` (Kubernetes built from source) and Debian.

    Example: nestlab k8s cluster up --nodes 3 --kubeconfig kc.yaml ; kubectl --kubeconfig kc.yaml get nodes
    """

    started = time.perf_counter()
    with reported():
        path = cluster.up(nodes, str(kubeconfig), name, timeout, _say)
        err.line(f"cluster {name}: {nodes} nodes Ready in {time.perf_counter() - started:.1f} s; kubeconfig: {path}")
        out.line(
            f"next: kubectl --kubeconfig {path} get nodes;  nestlab k8s deploy -t LAB.yml --kubeconfig {path};  "
            f"nestlab k8s cluster down --kubeconfig {path}"
        )


@cluster_app.command("down")
def cluster_down(
    kubeconfig: Path | None = typer.Option(
        None, "--kubeconfig", help="The kubeconfig cluster up wrote (names the cluster; removed)."
    ),
    name: str | None = typer.Option(None, "--name", help="The cluster's name, instead of --kubeconfig."),
):
    """Remove a cluster made by cluster up: every process, mount, namespace, interface and cgroup of it, its
    files, and the kubeconfig it wrote (the built binaries and images stay in /var/cache/nestlab)."""

    with reported():
        which = name or (cluster.name_in(str(kubeconfig)) if kubeconfig else None)
        if which is None:
            raise LabError("say which cluster: --kubeconfig FILE (as written by cluster up) or --name NAME")
        removed = cluster.down(which, str(kubeconfig) if kubeconfig else None)
        err.line(f"cluster {which}: {'removed' if removed else 'nothing to remove'}")


NodeSelectorOpt = typer.Option(
    [],
    "--node-selector",
    metavar="KEY=VALUE",
    help="Labs' pods only on nodes with this label (repeatable); a server: naming another node, or a tainted one, is refused.",
)


def _selector(pairs: list[str]) -> dict[str, str]:
    """KEY=VALUE pairs as a node selector; a pair without '=' is a usage error."""
    if bad := [p for p in pairs if "=" not in p or not p.split("=", 1)[0]]:
        raise typer.BadParameter(f"'{bad[0]}' is not KEY=VALUE (a node label)", param_hint="--node-selector")
    return dict(p.split("=", 1) for p in pairs)


SecretTypesOpt = typer.Option(
    [],
    "--allow-secret-type",
    metavar="TYPE",
    help="A Secret type labs are not given by default (service-account tokens, docker configs, TLS, bootstrap tokens) "
    "that NestLabs may name after all (repeatable).",
)
PerNamespaceOpt = typer.Option(
    PER_NAMESPACE, "--labs-per-namespace", min=1, help="Labs of one namespace reconciled at once (namespaces take turns)."
)


def _policy(node_selector: list[str], secret_types: list[str], per_namespace: int) -> Policy:
    """What an administrator decided at install, checked."""
    _selector(node_selector)
    if unknown := sorted(set(secret_types) - WITHHELD):
        raise typer.BadParameter(
            f"'{unknown[0]}' is given to labs already; the types to allow: {', '.join(sorted(WITHHELD))}",
            param_hint="--allow-secret-type",
        )
    return Policy(tuple(node_selector), tuple(secret_types), per_namespace)


OperatorNamespaceOpt = typer.Option(
    "nestlab-system", "--namespace", "-n", help="The operator's own namespace (labs go in those allowed)."
)


@operator_app.command("install")
def operator_install(
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str = OperatorNamespaceOpt,
    image: str = typer.Option(NESTLAB_REF, "--image", help="The image of the operator and of the labs' pods (see k8s image)."),
    deployment: bool = typer.Option(
        True, "--deployment/--no-deployment", help="--no-deployment: the CRD and RBAC only, for `operator run` from here."
    ),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds to wait until the API serves NestLabs."),
    allowing: list[str] = typer.Option(
        [], "--allow", help="A namespace labs may run in (as `operator allow NS`); repeat it for more.", metavar="NS"
    ),
    node_selector: list[str] = NodeSelectorOpt,
    secret_types: list[str] = SecretTypesOpt,
    per_namespace: int = PerNamespaceOpt,
):
    """Install the NestLab resource (CRD nestlabs.nestlab.dev, its schema the topology file's) and its operator: the
    namespace, a ServiceAccount, a ClusterRole of what the operator does cluster-wide (NestLabs, their events,
    reading nodes) and its binding, and a Deployment of one operator pod; returns once the API serves NestLabs.
    Labs run only in namespaces an administrator allows (--allow NS, or `operator allow NS` later): there alone
    the operator may make pods.  Installing again updates them (server-side apply).

    Example: nestlab k8s operator install --kubeconfig kc.yaml --allow labs ; kubectl apply -n labs -f
    examples/nestlab-resource.yaml ; kubectl get nestlabs -n labs
    """

    from ..operator.install import install

    with reported():
        policy = _policy(node_selector, secret_types, per_namespace)
        kube = Cluster(str(kubeconfig) if kubeconfig else None, namespace)
        for made in install(kube, namespace, image, time.monotonic() + timeout, deployment, tuple(allowing), policy):
            err.line(f"applied {made}")
        if allowing:
            err.line(AUTHOR_CAN)
        out.line(
            "next: nestlab k8s operator allow NS (labs run only in allowed namespaces);  kubectl apply -n NS -f LAB.yaml "
            "(kind: NestLab);  kubectl get nestlabs -A;  kubectl describe nestlab NAME"
        )


AUTHOR_CAN = (
    "note: whoever may write NestLabs in an allowed namespace runs lab pods there, each in a user namespace of its own "
    "(docs/security.md): root in their lab nodes is an id that means nothing on the cluster node, its capabilities "
    "act on the pod's own namespaces; they reach the cluster network as any pod, any ConfigMap or Secret of that "
    "namespace in their labs, and the node's kernel through its system calls (keep it patched); allow only namespaces "
    "whose authors you would give that, and keep labs off nodes that hold more (install --node-selector)"
)


@operator_app.command("allow")
def operator_allow(
    namespaces: list[str] = typer.Argument(..., help="The namespaces labs may run in.", metavar="NAMESPACE..."),
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str = OperatorNamespaceOpt,
):
    """Let NestLabs of NAMESPACE make labs: a Role of what the operator does there (pods, exec in them, the lab's
    Secret and Service, reading the ConfigMaps and Secrets its NestLabs name) bound to the operator's account.
    Elsewhere the operator may make nothing; a NestLab there is Failed (NotAllowed) naming this command.  Prints
    what an author of NestLabs there can then reach (docs/security.md).

    Example: nestlab k8s operator allow labs --kubeconfig kc.yaml
    """

    from ..operator.install import allow

    with reported():
        kube = Cluster(str(kubeconfig) if kubeconfig else None, namespace)
        for allowed_ns in namespaces:
            for made in allow(kube, allowed_ns, namespace):
                err.line(f"applied {made}")
        err.line(AUTHOR_CAN)
        out.line(f"next: kubectl apply -n {namespaces[0]} -f LAB.yaml (kind: NestLab);  kubectl get nestlabs -n {namespaces[0]}")


@operator_app.command("disallow")
def operator_disallow(
    namespaces: list[str] = typer.Argument(..., help="The namespaces labs may no longer run in.", metavar="NAMESPACE..."),
    kubeconfig: Path | None = KubeconfigOpt,
    namespace: str = OperatorNamespaceOpt,
):
    """Take back what `allow` gave: the operator's Role and RoleBinding in NAMESPACE.  Refused while a NestLab is
    left there (delete them first: the operator removes their pods).

    Example: nestlab k8s operator disallow labs --kubeconfig kc.yaml
    """

    from ..operator.install import disallow

    with reported():
        kube = Cluster(str(kubeconfig) if kubeconfig else None, namespace)
        for allowed_ns in namespaces:
            gone = disallow(kube, allowed_ns)
            err.line(f"removed {', '.join(gone) or f'nothing (namespace {allowed_ns} was not allowed)'}")


@operator_app.command("uninstall")
def operator_uninstall(
    kubeconfig: Path | None = KubeconfigOpt, namespace: str = OperatorNamespaceOpt, timeout: float = TimeoutOpt
):
    """Remove what install and allow made (the Deployment, RBAC in every allowed namespace, the operator's
    namespace, the CRD last).  Refused while a NestLab is
    left: delete the labs first (kubectl delete nestlabs --all -A), which the operator removes with their pods."""

    from ..operator.install import uninstall

    with reported():
        kube = Cluster(str(kubeconfig) if kubeconfig else None, namespace)
        gone = uninstall(kube, namespace, time.monotonic() + timeout)
        err.line(f"removed {', '.join(gone) or 'nothing (not installed)'}")


@operator_app.command("run")
def operator_run(
    kubeconfig: Path | None = KubeconfigOpt,
    image: str = typer.Option(NESTLAB_REF, "--image", help="The image of the labs' pods."),
    workers: int = typer.Option(4, "--workers", min=1, help="Labs reconciled at once."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds a lab may take to deploy before it is Failed."),
    node_selector: list[str] = NodeSelectorOpt,
    secret_types: list[str] = SecretTypesOpt,
    per_namespace: int = PerNamespaceOpt,
):
    """Run the operator here (in the cluster, the Deployment runs this): reconcile every NestLab until stopped.
    A new or changed lab is deployed as `k8s deploy` does (status Pending, Deploying, Ready or Failed with the
    field or pod at fault); a deleted one loses every pod and object before it goes (its finalizer).  Needs the
    CRD: `operator install --no-deployment` installs it without the in-cluster operator.

    Example: nestlab k8s operator run --kubeconfig kc.yaml
    """

    import signal
    import sys

    from ..operator.loop import run

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # as a pod's first process, SIGTERM is otherwise ignored
    with reported():
        policy = _policy(node_selector, secret_types, per_namespace)
        kube = Cluster(str(kubeconfig) if kubeconfig else None)
        _say(f"operator: watching NestLabs at {kube.server} ({workers} workers, {per_namespace} labs a namespace at once)")
        run(kube, image, timeout, workers, _say, policy)
