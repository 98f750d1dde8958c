# onemodel: `make run` converts the bundled real model ONNX -> OneModel -> ONNX and proves it
# bit-identical; `make test` lints (ruff) and runs the test suite. Both create the virtual
# environment first.
#
#   make run EXAMPLE=path/to/model.onnx                   another model
#   make run EXAMPLE=... DIMS="batch=2 seq=16"            symbolic dimensions for its last step,
#   make run EXAMPLE=... SHAPES="x=1,3,224,224 y=1,16"    verify --run, whose inputs are generated
#                                                         (unset dims are 1): each word becomes a
#                                                         --dim / --shape of verify --run

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLI := $(VENV)/bin/onemodel
EXAMPLE ?= testdata/models/cnn_dynamo.onnx
OUT ?= out
DIMS ?=
SHAPES ?=
RUN_INPUTS := $(foreach d,$(DIMS),--dim $(d)) $(foreach s,$(SHAPES),--shape $(s))

.PHONY: run test install bench clean

install: $(VENV)/.installed

# setuptools prints an "Editable installation" notice (a BuildBackendWarning, a banner of
# asterisks) at every editable install; this filter, added to the caller's PYTHONWARNINGS and
# inherited by the build backend pip starts, drops that one message (matched by its start)
# while every other warning and every error still shows
NO_EDITABLE_NOTICE := PYTHONWARNINGS="$${PYTHONWARNINGS:+$$PYTHONWARNINGS,}ignore:Editable installation"

# the runtime alone, for `make run`
$(VENV)/.installed: pyproject.toml $(wildcard setup.py)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(NO_EDITABLE_NOTICE) $(PY) -m pip install --quiet -e .
	touch $@

# plus the dev extra (pytest, hypothesis, onnx, onnxruntime, moto, ruff, ...), for `make test`
$(VENV)/.installed-dev: $(VENV)/.installed
	$(NO_EDITABLE_NOTICE) $(PY) -m pip install --quiet -e ".[dev]"
	touch $@

run: install
	@mkdir -p $(OUT)
	@echo "== $(EXAMPLE)"
	$(CLI) info $(EXAMPLE)
	$(CLI) convert $(EXAMPLE) $(OUT)/model.onemodel
	$(CLI) convert $(OUT)/model.onemodel $(OUT)/model.onnx
	cmp $(EXAMPLE) $(OUT)/model.onnx
	@echo "ONNX -> OneModel -> ONNX: byte-identical ($$(stat -c %s $(EXAMPLE)) bytes)"
	$(CLI) verify $(EXAMPLE) $(OUT)/model.onemodel --run $(RUN_INPUTS)

# a lint finding (ruff, configured in pyproject.toml) fails the target before any test runs
test: $(VENV)/.installed-dev
	$(PY) -m ruff check onemodel tests benchmarks tools docs
	ONEMODEL_REQUIRE_C=1 $(PY) -m pytest -q

bench: install
	$(NO_EDITABLE_NOTICE) $(PY) -m pip install --quiet -e ".[bench]"
	$(PY) benchmarks/load_convert.py

clean:
	rm -rf $(OUT) build *.egg-info

# the operator schema table (onemodel/schemas/data) from the onnx of the venv (dev extra); developers
# run it when that onnx changes, and commit the file
.PHONY: schemas
schemas:
	$(PY) tools/gen_schemas.py

# the generated documents, from the code: docs/check.md (the codes of `onemodel check` and its
# synopsis) and docs/conformance-statement.md (Annex A: versions, operator sets, codes, limits,
# and the totals of docs/conformance.md, which docs/make_conformance.py writes); tests check that
# both are up to date
.PHONY: docs
docs: install
	$(PY) docs/make_check.py > docs/check.md.tmp && mv docs/check.md.tmp docs/check.md
	$(PY) docs/make_statement.py
