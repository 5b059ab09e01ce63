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

# The real OpenPBS and Slurm tests (tests/adapters) spend their time waiting on the daemons:
# they run in a pytest of their own beside the others (the two share only the second Unix
# user, the attacker's environment and the cgroup v1 cpuset root, each under a lock of
# pbsplug.testing's _machine_lock), and their report follows.
# The others wait too (real servers, jobs, hooks' alarms), so pytest-xdist spreads them over
# TEST_WORKERS processes: 4 on 2 cpus took 14 minutes where one took 30. They run at a lower
# priority (nice 10): beside 4 of them the adapters' daemons, which answer in real time, took
# 29 minutes where they took 17, and the adapters are the longer of the two.
# They start and end a few hundred thousand processes. Under Linux's default pid_max (32768)
# the pids come round within minutes, and a test's clean-up that kills a process it started
# after that process ended can hit another test's (seen: a test's command beside it killed
# by SIGKILL). Where root may, pid_max is raised to systemd's default, 4194304, first; a
# test that sets ns_last_pid back (tests/security/conftest.py) sets it forward again.
TEST_WORKERS ?= 4
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	@if [ "$$(cat /proc/sys/kernel/pid_max)" -lt 4194304 ]; then \
	  (echo 4194304 > /proc/sys/kernel/pid_max) 2>/dev/null \
	  || echo "pid_max stays $$(cat /proc/sys/kernel/pid_max): a reused pid may be killed"; fi
	@$(BIN)/python -m pytest -p no:cacheprovider tests/adapters > $(VENV)/adapters.log 2>&1 & \
	adapters=$$!; trap 'kill $$adapters 2>/dev/null' INT TERM; \
	nice -n 10 $(BIN)/python -m pytest --ignore=tests/adapters -n $(TEST_WORKERS) \
	  --dist worksteal; \
	others=$$?; \
	wait $$adapters; real=$$?; \
	echo "== tests/adapters (real OpenPBS and Slurm), run beside the others =="; \
	cat $(VENV)/adapters.log; test $$others -eq 0 && test $$real -eq 0

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info core/*.egg-info
