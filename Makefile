# Tangle: two commands set everything up on a fresh machine.
#   make demo   venv + embedded local solver server + headless Blender demo bake -> out/demo.blend + previews
#   make test   venv + every dependency (bpy included) + pytest
# bpy 4.5 is built for CPython 3.11 only, so the venv uses python3.11 when it is on PATH.

PYTHON_BOOT ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV        ?= .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.tangle-installed
PYTEST_ARGS ?= -q -m "not slow"

.PHONY: venv demo test bench addon clean

$(STAMP): pyproject.toml
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,blender]"
	$(PY) -m solver_server --warm-kernels    # compiles the Warp kernels once (cache: docs/kernels.md)
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m blender_addon.cli demo --out out

# pytest exit code 5 means "no tests were collected": that is a broken suite, not a pass.
test: $(STAMP)
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests - failing"; fi; \
	exit $$rc

bench: $(STAMP)
	$(PY) -m benchmarks

addon: $(STAMP)
	$(PY) build_addon.py

clean:
	rm -rf out dist build *.egg-info
