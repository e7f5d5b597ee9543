// libFuzzer target: the npy/npz reader. Each input is decoded as a standalone .npy and, via
// a temporary file, as an .npz archive. Error is the expected outcome for bad input.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "io/npz.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardtrace;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    (void)DecodeNpy(bytes, "fuzz.npy");
  } catch (const Error&) {
  }
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/shardtrace_fuzz." + std::to_string(::getpid()) +
           ".npz";
  }();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  try {
    (void)ReadNpz(path);
  } catch (const Error&) {
  }
  // Nothing left in TMPDIR once the run ends (as fuzz_sharding_dump.cc).
  std::remove(path.c_str());
  return 0;
}
