# nestlab: `make demo` runs the quickstart end to end, `make test` runs the whole suite (both as root);
# `make test-vm` runs the tests that need kernel features this kernel may lack inside Debian's stock kernel.
SHELL  := /bin/bash
VENV   := .venv
PY     := $(VENV)/bin/python
APT    := iproute2 iputils-ping iperf3 procps openvswitch-switch nftables tini runc umoci debootstrap busybox-static docker.io sockperf chromium mptcpd tshark frr openssh-server openssh-client
APT_VM := qemu-system-x86 linux-image-amd64 busybox-static
APT_BENCH := mininet bridge-utils
MPT    := mpt/nestlab-mpt
GO     := $(or $(shell command -v go),$(wildcard /usr/local/go/bin/go),/usr/bin/go)
VM_KERNEL = $(lastword $(sort $(wildcard /boot/vmlinuz-*-amd64)))

.PHONY: demo test test-vm vm-run bench deps venv clean

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

deps: $(VENV)/.installed $(MPT)
	@missing=""; for p in $(APT); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  case "$$missing" in *" frr"*) ! command -v systemctl >/dev/null || systemctl disable --now frr 2>/dev/null || true;; esac; \
	  case "$$missing" in *" openssh-server"*) ! command -v systemctl >/dev/null || systemctl disable --now ssh 2>/dev/null || true;; esac; \
	fi

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# compat: a plain path in a .pth file (the default import hook adds ~25 ms to every nestlab command);
	# the default mode if a future setuptools drops compat
	$(PY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat 2>/dev/null || $(PY) -m pip install -q -e '.[test]'
	touch $@

# The multipath tunnel daemon (Go, standard library only; Debian's golang-go is enough).
$(MPT): mpt/main.go mpt/go.mod
	@test -x $(GO) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null; }
	cd mpt && GOFLAGS=-mod=mod $(GO) build -trimpath -o nestlab-mpt .

clean:
	rm -rf $(VENV) *.egg-info $(MPT)
