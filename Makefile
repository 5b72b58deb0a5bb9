# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# The Java parts: Hadoop's, ZooKeeper's, MiniKdc's and Hive's jars (Maven Central, once, into
# shared caches), the lease ApplicationMaster jar (java/am) and the Hive hooks jar
# (java/hive-hooks). All need Java 17 and Maven.
JARS   := $(VENV)/.jars
AM_SRC := $(wildcard java/am/src/main/java/org/yarnarbiter/am/*.java)
HOOKS_SRC := $(wildcard java/hive-hooks/src/main/java/org/yarnarbiter/hive/*.java)

.PHONY: demo test test-fast test-yarn jars lint bench bench-quick protos clean

# Debian's headless Chromium and its chromedriver: the web console's browser test drives them
# (tests/integration/test_console_browser.py). Installed with apt when missing (sudo unless root).
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CHROMIUM := /usr/bin/chromium /usr/bin/chromedriver

$(CHROMIUM):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver

# MIT Kerberos's headers and krb5-config: pip builds the gssapi package (the [kerberos] extra,
# in [test]) from source against them; the Kerberized local YARN's tests use it
# (tests/engine/test_yarn_kerberos.py). Installed with apt when missing, like chromium.
KRB5_DEV := /usr/bin/krb5-config

$(KRB5_DEV):
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libkrb5-dev

$(STAMP): setup.cfg pyproject.toml | $(KRB5_DEV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

$(JARS): $(STAMP) java/runtime/pom.xml java/minikdc/pom.xml java/am/pom.xml $(AM_SRC) \
		java/hive-runtime/pom.xml java/hive-hooks/pom.xml $(HOOKS_SRC)
	$(BIN)/yarn-arbiter hadoop jars
	mvn -B -q -f java/am/pom.xml package -DskipTests
	mvn -B -q -f java/hive-hooks/pom.xml package
	$(BIN)/qoop-hive engine jars
	touch $(JARS)

jars: $(JARS)

# The real thing: a local YARN (left running: `yarn-arbiter hadoop down --workdir .yarn-local`),
# ML apps on GPU leases, a Hive query on its share. The replanner's own showcase (plan switches
# on the local engine): .venv/bin/python -m hive_hooks.demo
demo: $(STAMP) $(JARS)
	$(BIN)/yarn-arbiter demo

# Test artefacts (the console's screenshot from the browser test) land in build/test-artefacts.
ARTEFACTS ?= $(CURDIR)/build/test-artefacts

test: $(STAMP) $(JARS) | $(CHROMIUM)
	$(BIN)/ruff check .
	$(BIN)/mypy
	YARN_ARBITER_ARTEFACTS=$(ARTEFACTS) $(BIN)/pytest -q

# What a developer runs between commits (about two minutes): tests/unit and tests/integration
# without the slow ones; no engine, no real cluster.
test-fast: $(STAMP) | $(CHROMIUM)
	$(BIN)/pytest -q -x -m "not slow and not yarn" tests/unit tests/integration

# Only the tests on a real local YARN.
test-yarn: $(STAMP) $(JARS)
	$(BIN)/pytest -q -m yarn

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

protos: $(STAMP)
	$(BIN)/python -m protos.generate

bench: $(STAMP)
	$(BIN)/python benchmarks/auction_latency.py

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/auction_latency.py --quick

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache java/am/target java/hive-hooks/target
