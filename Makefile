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
# another interpreter (`make test PYTHON=python3.10`) gets a virtual environment of its own
ifeq ($(PYTHON),python3)
VENV ?= .venv
else
VENV ?= .venv-$(notdir $(PYTHON))
endif
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

# the runtime alone, for `make run`. pyenv's shim of python3.10 runs only while pyenv has 3.10
# selected (`pyenv global`, .python-version): otherwise the venv is made by the interpreter of the
# version `pyenv whence` names (the newest installed one that has it)
$(VENV)/.installed: pyproject.toml $(wildcard setup.py)
	@py="$(PYTHON)"; $$py -c "" 2>/dev/null || { \
	    v=$$(pyenv whence "$(PYTHON)" 2>/dev/null | tail -n 1); \
	    py="$$(pyenv root 2>/dev/null)/versions/$$v/bin/$(notdir $(PYTHON))"; \
	    [ -n "$$v" ] && [ -x "$$py" ] || { echo "$(PYTHON): no such interpreter" >&2; exit 1; }; }; \
	echo "$$py -m venv $(VENV)"; $$py -m venv $(VENV)
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

# the oldest and the newest Python of requires-python, each in its own venv: lint, the whole
# suite collected (an import error anywhere fails), then the format and command-line tests. CI
# runs it beside `make test` (the whole suite on the default python3); `make test
# PYTHON=python3.13` runs the whole suite on one of them
PYTHONS ?= python3.10 python3.13
FAST_TESTS ?= tests/formats tests/cli

.PHONY: test-pythons test-fast
test-pythons:
	@for p in $(PYTHONS); do \
	    $(MAKE) --no-print-directory test-fast PYTHON=$$p VENV=.venv-$$(basename $$p) || exit 1; \
	done

test-fast: $(VENV)/.installed-dev
	$(PY) -m ruff check onemodel tests benchmarks tools docs
	$(PY) -m pytest -q --collect-only > $(VENV)/collected.txt || { cat $(VENV)/collected.txt; exit 1; }
	@tail -n 1 $(VENV)/collected.txt
	ONEMODEL_REQUIRE_C=1 $(PY) -m pytest -q $(FAST_TESTS)

bench: install
	$(NO_EDITABLE_NOTICE) $(PY) -m pip install --quiet -e ".[bench]"
	$(PY) benchmarks/load_convert.py

clean:
	rm -rf $(OUT) build *.egg-info

# the operator schema tables (onemodel/schemas/data: schemas.json.gz from the onnx of the venv,
# contrib.json.gz from its onnxruntime; dev extra); developers run it when either changes, and
# commit the files
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
	$(PY) docs/make_opset_conversion.py > docs/opset-conversion.md.tmp && \
		mv docs/opset-conversion.md.tmp docs/opset-conversion.md
	$(PY) docs/make_statement.py
