// libFuzzer target: every output format of `trace` on a fuzzed config. The input's first byte
// picks the --format (table, json, dot, mermaid, svg: Graphviz's layout, in its contained
// child process) and the block (the routed path, the masked-loop reference or the dense
// MlpBlock); its key=value lines (tests/fuzz/fuzz_trace_common.h) are the overrides. One
// format per input keeps a run fast enough to fuzz (an SVG layout forks and takes ~0.2 s);
// the seeds in testdata/fuzz/fuzz_trace_formats/ cover every format. Anything but exit
// status 0, 1 or 2 aborts (a finding).
#include <cstddef>
#include <cstdint>

#include "fuzz_trace_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardtrace::fuzzing;
  static const char* const kFormats[] = {"table", "json", "dot", "mermaid", "svg"};
  const uint8_t pick = size > 0 ? data[0] : 0;
  std::vector<std::string> flags = {"--format", kFormats[pick % 5]};
  if (pick / 5 % 3 == 1) flags.insert(flags.end(), {"--path", "masked_loop"});
  if (pick / 5 % 3 == 2) flags.insert(flags.end(), {"--block", "mlp"});
  RunTrace(OverrideLines(data, size), flags);
  return 0;
}
