"""Labs on Kubernetes (docs/servers.md): the same partition as on SSH servers, one pod per share.

``manifests.render`` writes and the site's ``deploy`` (site.py, rollout.py) creates the same objects:

* a Secret ``LAB-shares`` (mounted read-only for root alone) holding each share's topology, whose tunnels point at
  ``${NESTLAB_PEER_<SHARE>}``;
* a headless Service ``LAB`` (``SHARE.LAB`` in a cluster's DNS, for clusters that have it);
* per share a privileged pod ``LAB-SHARE`` (pinned to the Kubernetes node its share is named after, if
  it is), whose start script waits for its peers' addresses (from DNS, or written into
  ``/run/nestlab-k8s/peers.env`` by ``nestlab k8s deploy`` once the pods have addresses), then runs
  ``nestlab deploy`` on its share and records the result; ready once that succeeded.  Deleting a
  pod runs ``nestlab destroy`` in it first (preStop); the lab dies with the pod in any case.

The lab's record holds the cluster's kubeconfig and namespace and each share's pod (written before
anything is created: a cleanup always knows where to look), so ``inspect``, ``exec``, ``shell``,
``capture``, ``events``, ``link set`` and ``destroy`` ask this site as they ask any other (a command in a
pod: backends/remote/pod.py).
"""

from . import site  # noqa: F401 - importing it registers the site (SITES)
