// Where command output goes: stdout, or a file written atomically (temp file + rename).
#include "cli/commands.h"
#include "io/atomic_file.h"

namespace shardtrace {

void WriteOutput(const CommonOptions& options, const std::string& text, std::ostream& out) {
  if (options.output == "-") {
    out << text;
  } else {
    WriteTextAtomically(options.output, text);
  }
}

}  // namespace shardtrace
