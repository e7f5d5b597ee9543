// libFuzzer target: config override lists through the whole trace. Each input's key=value
// lines (tests/fuzz/fuzz_trace_common.h) run `trace` symbolically at full size and, with
// --numeric on one thread, through the numeric engine: config validation, mesh, path
// selection, the tracer and the SPMD model all see the hostile values. Anything but exit
// status 0, 1 or 2 aborts (a finding).
#include <cstddef>
#include <cstdint>

#include "fuzz_trace_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardtrace::fuzzing;
  const std::vector<std::string> overrides = OverrideLines(data, size);
  RunTrace(overrides, {});
  RunTrace(overrides, {"--numeric", "--threads", "1", "--max-memory", "0.25"});
  return 0;
}
