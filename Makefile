# `make test` sets up a virtual environment on a fresh machine and runs the whole test suite.
# `make test-fast` runs the same suite without the tests marked slow, for the edit-test loop.
# `make demo` runs the pipeline end to end on a small corpus the project generates.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: test test-fast demo clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	touch $@

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=20

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not slow"

demo: $(VENV)/.installed
	$(PY) demo.py --output_dir=demo_output

clean:
	rm -rf $(VENV) demo_output
