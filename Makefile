# The README's two commands: `make demo` (the local engine with every installed plugin on a
# small real workload) and `make test` (every test). Both make their own virtual environment
# in .venv and install what they need.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PLUGIN_DIRS := $(sort $(dir $(wildcard plugins/*/pyproject.toml)))
STAMP  := $(VENV)/.installed

.PHONY: demo test lint venv clean

venv: $(STAMP)

# Reinstall when any pyproject changes; editable installs pick up code changes by themselves.
$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet --no-build-isolation -e '.[test]' \
		$(foreach p,$(PLUGIN_DIRS),-e '$(p:/=)[test]')
	touch $@

demo: $(STAMP)
	$(BIN)/pbsplug demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info core/*.egg-info
