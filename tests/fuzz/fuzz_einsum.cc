// libFuzzer target: the einsum parser and its shape checks. The input is an equation; the
// operand shapes are derived from it (every letter gets a small size) so the dim-size and
// output-shape checks run too.
#include <cstdint>
#include <string>
#include <vector>

#include "numeric/einsum.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardtrace;
  const std::string equation(reinterpret_cast<const char*>(data), size);
  try {
    const ParsedEinsum parsed = ParseEinsum(equation);
    std::vector<Shape> shapes;
    for (const std::string& operand : parsed.operands) {
      Shape shape;
      for (const char c : operand) shape.push_back(1 + (static_cast<unsigned char>(c) % 3));
      shapes.push_back(shape);
    }
    (void)EinsumOutputShape(parsed, shapes);
  } catch (const Error&) {
  }
  return 0;
}
