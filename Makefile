# The two commands a newcomer runs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: all venv test lint typecheck unit demo bench soak clean debian-deps compat-deps compat test-calendar test-guests

all: test

# System packages some features and tests need (only installed when missing, as root,
# without recommended packages; doc/dependencies.md says which needs what).  Some bring
# init scripts (openssh-server, lvm2, drbd-utils, openvswitch-switch): nothing may start on the host, so a policy-rc.d
# that forbids every start is in place for the install when the host has none.
DEBIAN_PACKAGES := tzdata python3-ganeti-rapi ganeti-htools-3.0 nftables qemu-system-x86 qemu-utils \
  syslinux syslinux-common mtools dosfstools busybox-static cpio lvm2 drbd-utils openssh-server \
  openvswitch-switch chromium chromium-driver genisoimage libjs-term.js novnc socat ovmf swtpm \
  ganeti-instance-debootstrap extlinux mmdebstrap
debian-deps:
	@missing=""; for p in $(DEBIAN_PACKAGES) ""; do [ -z "$$p" ] && continue; dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    made=""; if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made=1; fi; \
	    apt-get update -qq && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; rc=$$?; \
	    [ -n "$$made" ] && rm -f /usr/sbin/policy-rc.d; exit $$rc; \
	  else echo "Please install:$$missing (as root: apt-get install --no-install-recommends$$missing)"; fi; \
	fi

# Ganeti 3.0's own CLI for the compatibility check (`make compat`, doc/compat.md): its
# gnt-* scripts and Python library only.  Its dependencies bring init scripts
# (openssh-server, lvm2): nothing may start, so a policy-rc.d that forbids every
# start is put in place for the install when the host has none (and removed after).
COMPAT_PACKAGES := ganeti-3.0 ganeti-htools-3.0
compat-deps:
	@missing=""; for p in $(COMPAT_PACKAGES) ""; do [ -z "$$p" ] && continue; dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    made=""; if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; made=1; fi; \
	    apt-get update -qq && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; rc=$$?; \
	    [ -n "$$made" ] && rm -f /usr/sbin/policy-rc.d; exit $$rc; \
	  else echo "Please install:$$missing (as root: apt-get install --no-install-recommends$$missing)"; fi; \
	fi

# Upstream's own gnt-* commands and htools against a virtual cluster of ours
# (needs root for the private mount namespace; test/integration/upstream_cli.py).
compat: venv compat-deps
	GANETI_TEST_REQUIRE_UPSTREAM=1 $(VPY) -m pytest test/integration/test_upstream_cli.py test/opcodes/test_upstream_params.py -p no:cacheprovider

FAKEDATE := test/fakes/fakedate/ganeti_fakedate.py

$(STAMP): setup.py pyproject.toml $(FAKEDATE)
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]' --config-settings editable_mode=compat
	$(VPY) $(FAKEDATE) --install-hook >/dev/null
	$(VPY) -m compileall -q ganeti >/dev/null
	touch $(STAMP)

venv: $(STAMP)

lint: venv
	@$(VPY) -m compileall -q ganeti >/dev/null
	$(VENV)/bin/ruff check ganeti daemons scripts tools test

# mypy over ganeti/, tools/bench/ and tools/harness/ ([tool.mypy] in pyproject.toml).
typecheck: venv
	$(VPY) -m mypy

# hail (ganeti-htools-3.0) is installed by debian-deps: its oracle tests must not skip.
# As root, compat-deps has installed upstream's CLI: its tests must not skip either;
# nor the web console's browser tests (chromium and chromium-driver from debian-deps),
# nor ganeti-instance-debootstrap's (doc/os.md).
# The 25 slowest tests are listed at the end: `make test` must stay under 25 minutes.
# Tests marked `soak` (longer repetitions of what is covered once) run in `make soak`.
# Three pytest-xdist workers; a module's tests stay on one worker, and the guest-cluster
# tests (qemu nodes, real LVM; root) form two groups (drbd, the others), started first on
# two workers with a guest cluster each, while the third runs the rest
# (test/conftest.py; README.md, "Tests").
# Their temporary directories are below a short fresh one (kept when a test fails): a
# worker's adds "popen-gwN/" to every path, and a virtual cluster's Unix sockets must
# stay within the 107 bytes of a socket address.
TEST_WORKERS ?= 3
unit: venv
	tmp=$$(mktemp -d /tmp/gtXXXX) && \
	GANETI_TEST_REQUIRE_HAIL=1 GANETI_TEST_REQUIRE_UPSTREAM=$$([ "$$(id -u)" = 0 ] && echo 1) \
	GANETI_TEST_REQUIRE_BROWSER=$$([ "$$(id -u)" = 0 ] && echo 1) \
	GANETI_TEST_REQUIRE_DEBOOTSTRAP=$$([ "$$(id -u)" = 0 ] && echo 1) \
	  $(VPY) -m pytest test -m "not soak" -n $(TEST_WORKERS) --no-loadscope-reorder \
	  --basetemp=$$tmp/t --durations=25; rc=$$?; [ $$rc -eq 0 ] && rm -rf $$tmp; exit $$rc

# Only the tests on a guest cluster (doc/vcluster.md, "Guest clusters"): about 15 minutes on 2 CPUs (one process, one cluster; make test runs them in two units beside the rest).
test-guests: venv debian-deps compat-deps
	@$(VPY) -m compileall -q ganeti tools daemons >/dev/null
	$(VPY) -m pytest test -m guests -p no:cacheprovider --durations=15

test: venv debian-deps compat-deps lint typecheck unit

# The whole suite with every process's wall clock shifted back (see $(FAKEDATE)):
# to the newest 1st of a month, 00:30 in Asia/Kolkata (the day before in UTC),
# then to the newest 15th, 23:59:30 in America/New_York (the day after in UTC).
# Slower than `make test`, which runs the CLI job tests both ways
# (test/integration/test_calendar.py).
test-calendar: venv debian-deps
	GANETI_TEST_TIME_OFFSET=$$(TZ=Asia/Kolkata $(VPY) $(FAKEDATE) --offset 1 00:30:00) \
	  TZ=Asia/Kolkata $(VPY) -m pytest test -p no:cacheprovider
	GANETI_TEST_TIME_OFFSET=$$(TZ=America/New_York $(VPY) $(FAKEDATE) --offset 15 23:59:30) \
	  TZ=America/New_York $(VPY) -m pytest test -p no:cacheprovider

demo: venv debian-deps
	@$(VPY) -m compileall -q ganeti >/dev/null
	$(VPY) tools/demo $(if $(KVM),--kvm) $(if $(STORAGE),--storage)

bench: venv
	@$(VPY) -m compileall -q ganeti >/dev/null
	@for b in tools/bench/bench_*.py; do echo "== $$b"; $(VPY) $$b || exit 1; done

# A short soak of the real daemons (tools/soak/README.md); `make soak SOAK_ARGS=`
# runs the full defaults (100 kill -9 cycles, 1,000 idle LUXI connections, ...).
SOAK_ARGS ?= --cycles 20 --idle 200 --noded-conns 100 --calls 5 --rapi-requests 10000 \
	--export-imports 60
soak: venv
	@$(VPY) -m compileall -q ganeti >/dev/null
	$(VPY) -m pytest test -m soak -p no:cacheprovider
	$(VPY) tools/soak/soak.py $(SOAK_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
