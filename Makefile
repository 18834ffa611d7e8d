# nestlab: `make demo` runs the quickstart end to end, `make test` runs the whole suite (both as root);
# `make test-vm` runs the tests that need kernel features this kernel may lack inside Debian's stock kernel;
# `make test-k8s` builds Kubernetes from source once (make k8s) and runs labs on a cluster of it on this machine.
SHELL  := /bin/bash
VENV   := .venv
PY     := $(VENV)/bin/python
APT    := iproute2 uidmap slirp4netns iputils-ping iperf3 procps openvswitch-switch nftables tini runc umoci debootstrap busybox-static docker.io sockperf chromium mptcpd tshark frr openssh-server openssh-client nginx apache2 bridge-utils sudo curl sshpass openssl clang libbpf-dev babeld
APT_VM := qemu-system-x86 linux-image-amd64 busybox-static
APT_BENCH := mininet bridge-utils
MPT    := mpt/nestlab-mpt
GO     := $(or $(shell command -v go),$(wildcard /usr/local/go/bin/go),/usr/bin/go)
VM_KERNEL = $(lastword $(sort $(wildcard /boot/vmlinuz-*-amd64)))

.PHONY: demo test test-vm vm-run bench deps venv clean k8s test-k8s

demo: deps
	$(VENV)/bin/nestlab demo -t examples/quickstart.yml

test: deps
	$(VENV)/bin/pytest

test-vm: deps
	@missing=""; for p in $(APT_VM); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@test -x $(VENV)/bin/vng || $(PY) -m pip install -q virtme-ng
	$(MAKE) --no-print-directory vm-run

vm-run:
	@echo "booting $(VM_KERNEL) under software emulation (about 40 s)"
	@# Through a pipe: qemu reopens /proc/self/fd/1, which would truncate a log file stdout points at.
	@# vng runs virtme-run from PATH (virtme-ng >= 1.4x), which is the venv's.
	set -o pipefail; PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/vng --disable-kvm --run $(VM_KERNEL) --user root --memory 2G --cpus 2 \
	  --exec "cd $(CURDIR) && NESTLAB_TEST_VM=1 $(VENV)/bin/pytest -m kernel -p no:cacheprovider -q -rs" 2>&1 | tr -d "\r"

bench: deps
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_BENCH) >/dev/null
	$(PY) benchmarks/deploy_scale.py
	$(PY) benchmarks/mode_overhead.py
	$(PY) benchmarks/nested_scale.py

# No service starts while packages install (nginx would listen on the machine's port 80): Debian's policy-rc.d.
deps: $(VENV)/.installed $(MPT)
	@missing=""; for p in $(APT); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  guard=""; if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; guard=1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; status=$$?; \
	  if [ -n "$$guard" ]; then rm -f /usr/sbin/policy-rc.d; fi; [ $$status -eq 0 ] || exit $$status; \
	  for service in frr ssh nginx apache2; do ! command -v systemctl >/dev/null || systemctl disable --now $$service 2>/dev/null || true; done; \
	fi

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# compat: a plain path in a .pth file (the default import hook adds ~25 ms to every nestlab command);
	# the default mode if a future setuptools drops compat
	$(PY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat 2>/dev/null || $(PY) -m pip install -q -e '.[test]'
	touch $@

# The multipath tunnel daemon (Go; cilium/ebpf pinned in mpt/go.mod, from the Go module proxy) with its kernel
# datapath, bpf/mpt.c, compiled by Debian's clang against Debian's libbpf headers and embedded in the binary.
$(MPT): $(wildcard mpt/*.go) mpt/go.mod mpt/go.sum mpt/mpt.bpf.o
	@test -x $(GO) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null; }
	cd mpt && GOFLAGS=-mod=mod $(GO) build -trimpath -o nestlab-mpt .

mpt/mpt.bpf.o: mpt/bpf/mpt.c
	@command -v clang >/dev/null && test -f /usr/include/bpf/bpf_helpers.h || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libbpf-dev >/dev/null; }
	clang -O2 -g -target bpf -mcpu=v3 -I/usr/include/$$(gcc -dumpmachine) -c mpt/bpf/mpt.c -o $@

# Kubernetes from source for `nestlab k8s cluster up` (k8s/go.mod pins v1.34.2; modules and build cache stay in
# $(K8S_CACHE), so a second `make k8s` does nothing); so are containerd 2.x and runc (k8s/runtime/go.mod), which
# run a pod with hostUsers: false in a user namespace of its own; etcd and the CNI plugins are Debian's.
K8S_VERSION := v1.34.2
K8S_GO      := 1.24
K8S_CACHE   := /var/cache/nestlab
K8S_BIN     := $(K8S_CACHE)/k8s/$(K8S_VERSION)/bin
K8S_CMDS    := kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
APT_K8S     := etcd-server containernetworking-plugins openssl
K8S_STAMP   := $(K8S_BIN)/.built-$(shell cat k8s/go.mod k8s/go.sum k8s/pause/main.go 2>/dev/null | sha256sum | cut -c1-16)
RUNTIME_PIN := $(shell sed -n 's|^\s*github.com/containerd/containerd/v2 \(v[^ ]*\).*|\1|p; s|^\s*github.com/opencontainers/runc v\([^ ]*\).*|\1|p' k8s/runtime/go.mod 2>/dev/null)
RUNTIME_BIN := $(K8S_CACHE)/runtime/$(subst $(eval) ,-,$(strip $(RUNTIME_PIN)))/bin
RUNTIME_STAMP := $(RUNTIME_BIN)/.built-$(shell cat k8s/runtime/go.mod k8s/runtime/go.sum 2>/dev/null | sha256sum | cut -c1-16)
K8S_LDFLAGS := -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=34 -X $(p).gitTreeState=clean)

k8s: deps $(K8S_STAMP) $(RUNTIME_STAMP)
	@missing=""; for p in $(APT_K8S); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

$(K8S_STAMP):  # by content, not date: a fresh clone of the same pins builds nothing
	@test -x $(GO) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null; }
	@have=$$($(GO) env GOVERSION | sed 's/^go//'); \
	if [ "$$(printf '%s\n' $(K8S_GO) "$$have" | sort -V | head -1)" != "$(K8S_GO)" ]; then \
	  echo "make k8s needs Go $(K8S_GO) or later (k8s/go.mod pins Kubernetes $(K8S_VERSION)); $(GO) is Go $$have" \
	    "(Debian 12's golang-go is 1.19). Install Go $(K8S_GO)+ (the Go project's own release) first on PATH" \
	    "(or at /usr/local/go/bin/go), then run make k8s again." >&2; exit 2; fi
	@echo "building Kubernetes $(K8S_VERSION) from source into $(K8S_BIN) (about 6 minutes on 2 cores, once)"
	mkdir -p $(K8S_BIN)
	cd k8s && for c in $(K8S_CMDS); do \
	  GOMODCACHE=$(K8S_CACHE)/go/mod GOCACHE=$(K8S_CACHE)/go/build GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0 \
	    $(GO) build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $(K8S_BIN)/$$c k8s.io/kubernetes/cmd/$$c || exit 1; done
	cd k8s && GOCACHE=$(K8S_CACHE)/go/build GOTOOLCHAIN=local CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(K8S_BIN)/pause ./pause
	rm -f $(K8S_BIN)/.built-*
	touch $@

# containerd (no cgo: the snapshotters that need it are not used) and runc (cgo, with Debian's libseccomp: seccomp
# profiles), about 3 minutes on 2 cores, once; their modules and build cache stay in $(K8S_CACHE)/runtime/go.
$(RUNTIME_STAMP):
	@test -f /usr/include/seccomp.h && command -v pkg-config >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp-dev pkg-config >/dev/null; }
	@echo "building containerd $(word 1,$(RUNTIME_PIN)) and runc $(word 2,$(RUNTIME_PIN)) from source into $(RUNTIME_BIN)"
	mkdir -p $(RUNTIME_BIN)
	cd k8s/runtime && for c in containerd containerd-shim-runc-v2 ctr; do \
	  GOMODCACHE=$(K8S_CACHE)/runtime/go/mod GOCACHE=$(K8S_CACHE)/runtime/go/build GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0 \
	    $(GO) build -trimpath -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$(word 1,$(RUNTIME_PIN))" \
	    -o $(RUNTIME_BIN)/$$c github.com/containerd/containerd/v2/cmd/$$c || exit 1; done
	cd k8s/runtime && GOMODCACHE=$(K8S_CACHE)/runtime/go/mod GOCACHE=$(K8S_CACHE)/runtime/go/build GOFLAGS=-mod=mod GOTOOLCHAIN=local \
	  CGO_ENABLED=1 $(GO) build -trimpath -tags seccomp -ldflags "-s -w -X main.version=$(word 2,$(RUNTIME_PIN))" \
	  -o $(RUNTIME_BIN)/runc github.com/opencontainers/runc
	rm -f $(RUNTIME_BIN)/.built-*
	touch $@

test-k8s: k8s
	$(VENV)/bin/pytest -m k8s -p no:cacheprovider -q -rs

clean:
	rm -rf $(VENV) *.egg-info $(MPT) mpt/mpt.bpf.o
