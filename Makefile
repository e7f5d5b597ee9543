# Two entry points a new user needs: `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: deps build demo test bench golden clean format

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

# Rewrites every golden text file in testdata/ and the rendered visualizations/*.md from the
# current binary; review with git diff. Any failing step stops it with its status: the tests
# run in full while rewriting (every other assertion still counts), then the whole suite
# compares against the rewritten files.
golden: build
	$(BUILD)/shardtrace generate
	UPDATE_GOLDEN=1 $(BUILD)/shardtrace_tests
	cd $(BUILD) && ctest -j$(JOBS) --output-on-failure
	@git status --short testdata visualizations

bench: build
	@$(BUILD)/shardtrace_bench

clean:
	rm -rf $(BUILD)

format:
	clang-format -i $$(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc')
