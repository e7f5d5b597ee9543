# Two entry points a new user needs: `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: deps build demo test wheel test-asan fuzz bench golden clean format lint mermaid-check maxtext-venv maxtext-fixtures \
	maxtext-verify maxtext-sweep

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j$(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)/shardtrace

test: build
	@cd $(BUILD) && ctest -j$(JOBS) --output-on-failure

# The wheel: dist/shardtrace-<version>-py3-none-manylinux_<glibc>_x86_64.whl holding the binary
# and every shared library it needs beyond the manylinux base set, rpaths set by patchelf as
# auditwheel does, tagged with the glibc objdump -T measures (tools/wheel/build_wheel.py).
# `pip install dist/shardtrace-*.whl` gives the `shardtrace` command and `import shardtrace`.
wheel: build
	@python3 tools/wheel/build_wheel.py --binary $(BUILD)/shardtrace --package python/shardtrace \
		--dist dist --notice NOTICE

# Rewrites every golden text file in testdata/ and the rendered visualizations/*.md from the
# current binary; review with git diff. Any failing step stops it with its status: the tests
# run in full while rewriting (every other assertion still counts), then the whole suite
# compares against the rewritten files.
golden: build
	$(BUILD)/shardtrace generate
	UPDATE_GOLDEN=1 $(BUILD)/shardtrace_tests
	cd $(BUILD) && ctest -j$(JOBS) --output-on-failure
	@git status --short testdata visualizations

# Parses every Mermaid block of visualizations/*.md (and of the DeepSeek-V3 EP32 x FSDP8 render
# golden) with mermaid.js itself (the QuickJS engine
# of the pinned `mmdc` package, in a venv under the build directory; needs PyPI the first time,
# never Node.js), then lays each out with the same mermaid.js in Debian's headless Chromium
# and fails when one is wider than 1,600 px (tools/mermaid_check/chromium_mermaid.py; no
# network). `make test` does not need it: the tests check the same graphs structurally.
# MERMAID_RENDER=DIR also writes the laid-out SVGs there.
# (A stamp file, not bin/python: that is a symlink to the system interpreter, whose mtime make
# would read and `touch` would change.)
MERMAID_VENV := $(BUILD)/mermaid-venv
$(MERMAID_VENV)/installed: tools/mermaid_check/requirements.txt
	@scripts/install-deps.sh --mermaid
	@python3 -m venv $(MERMAID_VENV)
	@$(MERMAID_VENV)/bin/pip install -q -r tools/mermaid_check/requirements.txt
	@touch $@

mermaid-check: $(MERMAID_VENV)/installed
	@$(MERMAID_VENV)/bin/python -W ignore tools/mermaid_check/check_mermaid.py visualizations/*.md \
		testdata/expected/render_deepseek3-671b_ep32_fsdp8.md \
		--layout $(if $(MERMAID_RENDER),--render $(MERMAID_RENDER))

# Every issue-13 target as a ratio measured side by side (bench/README.md); BENCH_MIXTRAL=1
# adds the 5.6 GB Mixtral-8x7B slice.
bench: build
	@BUILD=$(BUILD) bench/run.sh

clean:
	rm -rf $(BUILD)

# clang-tidy with the checks in .clang-tidy over src/ (uses the build's compile_commands.json).
lint: build
	@clang-tidy -p $(BUILD) --quiet $$(git ls-files 'src/*.cc') >$(BUILD)/lint.log 2>&1; \
	  status=$$?; grep -v 'warnings generated' $(BUILD)/lint.log; exit $$status

format:
	clang-format -i $$(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc')

# --- MaxText oracle (issue 9): MaxText's own moe.py from PyPI on fake JAX CPU devices. Python
# lives only here, in a venv under the build directory; `make test` needs none of it.
# maxtext needs Python >= 3.12: the first python3.13/3.12 that runs, else pyenv's.
ORACLE_PYTHON ?= $(shell for p in python3.13 python3.12 $(wildcard $(HOME)/.pyenv/versions/3.1[2-9]*/bin/python3); do \
  $$p -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && echo $$p && break; done)
ORACLE_VENV ?= $(BUILD)/oracle-venv

$(ORACLE_VENV)/.installed: tools/maxtext_oracle/requirements.txt
	@test -n "$(ORACLE_PYTHON)" || { echo "maxtext-venv: no python3.12 found (set ORACLE_PYTHON)"; exit 2; }
	@$(ORACLE_PYTHON) -m venv $(ORACLE_VENV)
	@$(ORACLE_VENV)/bin/pip install -q --no-deps -r tools/maxtext_oracle/requirements.txt
	@touch $@

maxtext-venv: $(ORACLE_VENV)/.installed

# Regenerates testdata/maxtext/ (cases, configs, versions.txt, memory table) from PyPI's maxtext.
maxtext-fixtures: maxtext-venv build
	@tools/maxtext_oracle/export_all.sh testdata/maxtext $(ORACLE_VENV)
	@python3 tools/maxtext_oracle/readme_tables.py testdata/maxtext $(BUILD)/shardtrace testdata/maxtext/README.md

# Re-sweeps every MoE model file of the release (testdata/maxtext-moe-models/sweep/, about 80 s);
# then `make golden` rewrites docs/release-models.md from it.
maxtext-sweep: maxtext-venv
	@for n in 8 16; do nice -n 10 $(ORACLE_VENV)/bin/python tools/maxtext_oracle/sweep_models.py \
	  --devices $$n --out testdata/maxtext-moe-models/sweep || exit 1; done

# The differential check: export into a temporary directory and hold shardtrace against it.
maxtext-verify: maxtext-venv build
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  tools/maxtext_oracle/export_all.sh "$$tmp" $(ORACLE_VENV) && \
	  SHARDTRACE_MAXTEXT_DIR="$$tmp" $(BUILD)/shardtrace_tests "[maxtext]"

# The whole suite under ASan + UBSan (clang; -fno-sanitize-recover, float-cast-overflow),
# LeakSanitizer on. Suppressions (scripts/lsan.supp) cover only leaks inside third-party
# libraries, each with its reason.
ASAN_BUILD ?= build-asan
SANITIZER_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0
$(ASAN_BUILD)/CMakeCache.txt:
	@scripts/install-deps.sh --sanitizers
	@CC=clang CXX=clang++ cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DSHARDTRACE_FUZZ=ON $(ASAN_CMAKE_FLAGS) >/dev/null

test-asan: $(ASAN_BUILD)/CMakeCache.txt
	@cmake --build $(ASAN_BUILD) -j$(JOBS)
	@cd $(ASAN_BUILD) && $(SANITIZER_ENV) ctest -j$(JOBS) --output-on-failure

# Each libFuzzer target for FUZZ_SECONDS, starting from its seeds in testdata/fuzz/<target>/
# and the hostile inputs of testdata/bad/inputs/. A crash, leak, sanitizer report or timeout
# fails the run; libFuzzer saves the input as testdata/fuzz/<target>/crash-* (or leak-*,
# timeout-*), which every build's <target>_corpus ctest entry replays from then on.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = fuzz_config fuzz_npz fuzz_einsum fuzz_axis_rules fuzz_sharding_dump \
  fuzz_trace_overrides fuzz_trace_formats fuzz_fit_plan
fuzz: $(ASAN_BUILD)/CMakeCache.txt
	@cmake --build $(ASAN_BUILD) -j$(JOBS) --target $(FUZZ_TARGETS)
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(ASAN_BUILD)/fuzz-work/$$t; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  if ! $(SANITIZER_ENV) $(ASAN_BUILD)/$$t -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 \
	    -timeout=10 -max_len=65536 -artifact_prefix=testdata/fuzz/$$t/ -print_final_stats=1 \
	    $(ASAN_BUILD)/fuzz-work/$$t testdata/fuzz/$$t testdata/bad/inputs \
	    >$(ASAN_BUILD)/fuzz-work/$$t.log 2>&1; then \
	    grep -E "^(==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)" $(ASAN_BUILD)/fuzz-work/$$t.log; \
	    echo "fuzz: $$t FAILED (log: $(ASAN_BUILD)/fuzz-work/$$t.log)"; exit 1; \
	  fi; \
	  grep -E "^stat::number_of_executed_units" $(ASAN_BUILD)/fuzz-work/$$t.log; \
	done
