"""Labs as Kubernetes resources, an application on the Kubernetes site (nestlab/sites/k8s): the NestLab custom
resource (resource.py, the files it gives: inputs.py), what installs it with its operator (install.py), the operator, a
watch of NestLabs feeding a work queue (loop.py, queue.py) whose workers bring each lab to its spec (reconcile.py) with
the same manifests and Rollout as ``nestlab k8s deploy``, and an operator's lab reached from a workstation (found.py).

The operator is the official ``kubernetes`` client (already nestlab's for labs on Kubernetes) with a watch and a
small work queue, not kopf: kopf would add a dependency (and aiohttp) for what is here about 150 lines, and its
handlers are asyncio while the rollout this shares with ``k8s deploy`` is synchronous (docs/servers.md).
"""
