# Two entry points: `make run` (set up + train the default recipe) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint format browser clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch: a plain `torch` requirement would pull several GB of CUDA wheels.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/hfattn train recipes/char_rnn_shakespeare.yaml

# Headless Chromium for the Space browser tests (Debian package; tests skip with a reason without it).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium could not be installed: browser tests will be skipped"; }

test: $(STAMP) browser
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info
