# `make demo` and `make test` work on a fresh clone with only Python 3.11 and Java 17.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
export DAGSTER_HOME := $(CURDIR)/.lumos/dagster
TODAY := $(shell date -u +%F)
# the demo lake's first day (recursive: read once the venv exists)
DEMO_FIRST = $(shell $(BIN)/python -c "import datetime as d; from lumos_dagster.cli.demo_lake import DAYS; \
	print(d.datetime.now(d.timezone.utc).date() - d.timedelta(days=DAYS - 1))")
CODE := lumos_dagster assets resources sensors spark tests benchmarks
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
#: the port of `make ui` and `make deploy`
PORT ?= 3000

.PHONY: install cycles browser node systemd demo test test-fast test-tuned check-dagster-latest ui lite bench clean datahub-venv

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

## the package cycles the acyclic contract counts (0 on main; on an older checkout it lists each)
cycles: $(STAMP)
	$(BIN)/lint-imports --contract acyclic

## headless Chromium: the tests open the HTML report in it (Debian's package)
browser:
	@command -v chromium >/dev/null || { echo "installing Debian's chromium for the report tests"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

## npm, which the Azure tests use to fetch Azurite into .cache/azurite (Debian's package)
node:
	@command -v npm >/dev/null || { echo "installing Debian's nodejs and npm for the Azurite tests"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; }

## systemd-analyze, which checks the units `lumos deploy config --format systemd` writes (Debian's package)
systemd:
	@command -v systemd-analyze >/dev/null || { echo "installing Debian's systemd for the deployment tests"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null; }

## the Dagster instance Lumos ships (dagster.yaml: a fast SQLite event log, console at INFO), unless one is there
$(DAGSTER_HOME)/dagster.yaml:
	@mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

## build the sample lake, discover it, snapshot every dataset for each day of the lake (one run), print a summary
demo: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/lumos demo-lake
	$(BIN)/lumos discover
	$(BIN)/dg launch -m lumos_dagster.definitions --assets 'key:"*"' --partition-range $(DEMO_FIRST)...$(TODAY)
	$(BIN)/lumos summary

## DataHub's own ingestion sources (`s3`, `delta-lake`) in an environment of their own: their extras pin
## older deltalake and pyarrow than Lumos'. The parity test (tests/test_datahub_parity.py) and the
## benchmarks run them beside Lumos, at Lumos' own acryl-datahub version.
DATAHUB_VERSION = $(shell sed -n 's/^acryl-datahub==//p' constraints.txt)
DATAHUB_VENV := .venv-datahub/.installed-$(DATAHUB_VERSION)
$(DATAHUB_VENV): constraints.txt
	test -x .venv-datahub/bin/python || $(PYTHON) -m venv .venv-datahub
	.venv-datahub/bin/python -m pip install --quiet --upgrade pip
	.venv-datahub/bin/python -m pip install --quiet "acryl-datahub[s3,delta-lake]==$(DATAHUB_VERSION)"
	rm -f .venv-datahub/.installed-* && touch $@

datahub-venv: $(DATAHUB_VENV)

## lint, the import contracts (layers, no package cycles), the type checker on the core, then the whole
## test suite, on Dagster's stock instance (tests/conftest.py: --dagster-instance)
test: $(STAMP) $(DATAHUB_VENV) browser node systemd
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest $(PYTEST_ARGS)

## the core's tests alone, for the inner loop: no Spark, Dagster, server, browser or slow test (their
## markers: pyproject.toml), a tenth of each property test's examples, bytecode cached; under 60 CPU-seconds
FAST := not (spark or dagster or servers or browser or deployment or slow)
test-fast: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE LUMOS_TEST_FAST=1 $(BIN)/pytest -p no:cacheprovider -q -m "$(FAST)" $(PYTEST_ARGS)

## the whole test suite as on the tuned instance: the repository's dagster.yaml with its commented switch on (resources/tuning)
test-tuned: $(STAMP) browser node
	$(BIN)/pytest --dagster-instance=tuned $(PYTEST_ARGS)

## the tuned event logs' equivalence with Dagster's own (tests/test_event_log.py) on Dagster's newest
## release, in its own environment (.venv-dagster-latest): this project, then Dagster upgraded past
## constraints.txt and pyproject's ranges, and each library Lumos uses to its newest release (without
## its exact pin on the core: a library can lag the core by a release). Fails when the tuning breaks.
LATEST := .venv-dagster-latest
DAGSTER_LIBRARIES := dagster-webserver dagster-graphql dagster-postgres dagster-pyspark dagster-spark dagster-aws
check-dagster-latest:
	test -x $(LATEST)/bin/python || $(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	grep -v '^dagster' constraints.txt > $(LATEST)/constraints-without-dagster.txt
	$(LATEST)/bin/python -m pip install --quiet -c $(LATEST)/constraints-without-dagster.txt -e '.[test]'
	$(LATEST)/bin/python -m pip install --quiet --upgrade dagster
	$(LATEST)/bin/python -m pip install --quiet --upgrade --no-deps $(DAGSTER_LIBRARIES)
	@echo "Dagster under test:"; $(LATEST)/bin/python -m pip list --format=freeze 2>/dev/null | grep -i '^dagster'
	$(LATEST)/bin/python -m pytest -p no:cacheprovider tests/test_event_log.py $(PYTEST_ARGS)

## Lumos beside DataHub's own s3 source and the physical floor, the engines (the process pool, Spark local,
## a standalone cluster, Spark Connect: benchmarks/engines.py) and the micro benchmarks; writes
## docs/benchmarks.md. ARGS=--large for the issue's target sizes. DataHub's s3 extra pins an older
## pyarrow, so it gets its own environment (same acryl-datahub version as Lumos).
bench: $(STAMP) $(DATAHUB_VENV)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test,bench]'
	@# with PYTHONDONTWRITEBYTECODE set (as on CI machines) every process would compile Lumos' own
	@# modules again, ~0.13 s each; pip compiles installed packages, not an editable project
	$(BIN)/python -m compileall -q $(CODE) > /dev/null
	$(BIN)/python -m benchmarks $(ARGS)

## the Dagster UI on http://127.0.0.1:$(PORT) (after `make demo`; `make ui PORT=3001`). Run from DAGSTER_HOME:
## in the repository root Dagster warns that the root's dagster.yaml (the template) is not DAGSTER_HOME's
ui: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	cd $(DAGSTER_HOME) && LUMOS_CONFIG=$${LUMOS_CONFIG:-$(CURDIR)/lumos.yaml} \
		$(CURDIR)/$(BIN)/dg dev -p $(PORT) -w $(CURDIR)/workspace.yaml

## DataHub's own CLI on the demo's catalog, e.g. make lite ARGS='ls /data_platforms/file'
lite: $(STAMP)
	$(BIN)/lumos lite $(ARGS)

clean:
	rm -rf .lumos

## Lumos as a Dagster deployment on this machine, run as docs/deploy.md describes (lumos_dagster/cli/deploy.py):
## Dagster's PostgreSQL storage on 127.0.0.1:5432 (database lumos_dagster, or PG_URL=postgresql://…), the
## daemon with queued runs, a code server for lumos.yaml and the webserver on PORT, kept by supervisord,
## everything under .lumos/deploy (supervisord.conf, logs/); the demo lake is built and discovered first if it is missing.
## ARGS: more `lumos deploy up` options (--max-concurrent-runs 4, --tuned, --reset after `make clean`).
.PHONY: deploy deploy-stop
deploy: $(STAMP)
	@test -d "$${LUMOS_DEMO_LAKE:-.lumos/lake}" || { $(BIN)/lumos demo-lake && $(BIN)/lumos discover; }
	@test -f .lumos/store.db || $(BIN)/lumos discover
	$(BIN)/lumos deploy up --config lumos.yaml --port $(PORT) $(if $(PG_URL),--pg-url '$(PG_URL)') $(ARGS)

## stop what `make deploy` started
deploy-stop:
	$(BIN)/lumos deploy down
