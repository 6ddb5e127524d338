# `make test` sets up a virtual environment on a fresh machine and runs the whole test suite.
# `make demo` runs the pipeline end to end on a small corpus the project generates.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: test demo clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	touch $@

test: $(VENV)/.installed
	$(PY) -m pytest -q -n 2 --dist loadfile

demo: $(VENV)/.installed
	$(PY) demo.py --output_dir=demo_output

clean:
	rm -rf $(VENV) demo_output
