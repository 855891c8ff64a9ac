# Two entry points: `make run` (set up + train the default recipe) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test docs bench results lint format browser sword clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch: a plain `torch` requirement would pull several GB of CUDA wheels.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev,docs]'
	touch $(STAMP)

run: $(STAMP) sword
	$(VENV)/bin/hfattn train recipes/char_rnn_shakespeare.yaml --overwrite

# Headless Chromium for the Space browser tests (Debian package; tests skip with a reason without it).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium could not be installed: browser tests will be skipped"; }

# The Bible in English and Spanish (SWORD modules read by pysword) and apertium's en->es
# baseline (Debian packages; the Bible tests skip with a reason without them).
sword:
	@test -f /usr/share/sword/mods.d/engWEB2015eb.conf -a -f /usr/share/sword/mods.d/spaRV1909eb.conf \
	  -a -f /usr/share/sword/mods.d/engKJV2006eb.conf -a -f /usr/share/apertium/modes/eng-spa.mode || { \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    sword-text-web sword-text-sparv sword-text-kjv apertium-eng-spa >/dev/null) \
	  || echo "sword-text-web/sword-text-sparv/sword-text-kjv/apertium-eng-spa could not be installed: Bible tests will be skipped"; }

# The whole suite, one pytest-xdist worker per core (each test runs torch on one thread), each
# test file on one worker (its module fixtures built once). tests/docs/test_docs_browser.py builds
# the documentation with --strict, so a broken page (a dead link, a missing image or anchor)
# fails `make test`. The sources are compiled first: many tests start `hfattn` in a fresh
# interpreter, and where PYTHONDONTWRITEBYTECODE is set each would compile what it imports again.
# TorchInductor's cold C++ compile is left out (`.venv/bin/python -m pytest -m inductor` runs it).
test: $(STAMP) browser sword
	$(PY) -m compileall -q -j 0 hfattn tests benchmarks docs/hooks
	$(PY) -m pytest -q -n auto --dist loadfile -m "not inductor"

# The documentation site (docs/, mkdocs.yml) into site/; the recipe and CLI references are
# generated from the code at each build (docs/hooks/reference.py). Warnings are errors.
# site/index.html opens from disk (pages are page.html files) or from any static server.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Every benchmark of benchmarks/ in its quick mode (20-30 min on 2 CPU cores; GPU columns
# where torch sees one) -> benchmarks/RESULTS.md and charts in benchmarks/results/.
# The longer repeats: $(PY) -m benchmarks.run_all --full
bench: $(STAMP) sword
	$(PY) -m benchmarks.run_all

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info

# The README's headline table and the results page (docs/results/index.md), rewritten from the
# files of benchmarks/results/ (docs/hooks/results_tables.py); tests/docs/test_results_tables.py
# fails when they differ.
results:
	$(PYTHON) -m docs.hooks.results_tables --write
