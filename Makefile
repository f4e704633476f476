# The two commands a newcomer runs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all venv test lint typecheck unit demo bench clean debian-deps test-calendar

all: test

# System packages some features need (only installed when missing, as root).
DEBIAN_PACKAGES := faketime tzdata
debian-deps:
	@missing=""; for p in $(DEBIAN_PACKAGES) ""; do [ -z "$$p" ] && continue; dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else echo "Please install:$$missing (as root: apt-get install$$missing)"; fi; \
	fi

$(STAMP): setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat
	$(VPY) -m compileall -q ganeti >/dev/null
	touch $(STAMP)

venv: $(STAMP)

lint: venv
	@$(VPY) -m compileall -q ganeti >/dev/null
	$(VENV)/bin/ruff check ganeti daemons scripts tools test

# mypy over ganeti/ ([tool.mypy] in pyproject.toml).
typecheck: venv
	$(VPY) -m mypy

unit: venv
	$(VPY) -m pytest test

test: venv debian-deps lint typecheck unit

# The whole suite with every process on a faked clock (libfaketime): the 1st of
# a month east of UTC, then the 15th late at night west of it.  Slower than
# `make test`; CI runs the CLI job tests this way (test/integration/test_calendar.py).
test-calendar: venv debian-deps
	TZ=Asia/Kolkata faketime "2027-03-01 00:30:00" $(VPY) -m pytest test -p no:cacheprovider
	TZ=America/New_York faketime "2027-03-15 23:59:30" $(VPY) -m pytest test -p no:cacheprovider

demo: venv debian-deps
	@$(VPY) -m compileall -q ganeti >/dev/null
	$(VPY) tools/demo

bench: venv
	@$(VPY) -m compileall -q ganeti >/dev/null
	@for b in tools/bench/bench_*.py; do echo "== $$b"; $(VPY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
