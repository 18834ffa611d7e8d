# nestlab: `make demo` runs the quickstart end to end, `make test` runs the whole suite (both as root).
VENV   := .venv
PY     := $(VENV)/bin/python
APT    := iproute2 iputils-ping iperf3 procps
APT_BENCH := mininet bridge-utils

.PHONY: demo test bench deps venv clean

demo: deps
	$(VENV)/bin/nestlab demo -t examples/quickstart.yml

test: deps
	$(VENV)/bin/pytest

bench: deps
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_BENCH) >/dev/null
	$(PY) benchmarks/deploy_scale.py

deps: $(VENV)/.installed
	@missing=""; for p in $(APT); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) *.egg-info
