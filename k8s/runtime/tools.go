//go:build tools

// Package runtime pins the container runtime nestlab's cluster runs (make k8s): containerd 2.x and runc,
// whose user namespaces a pod with hostUsers: false needs (Debian 12's containerd 1.6 ignores it); nothing
// here is compiled.
package runtime

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/opencontainers/runc"
)
