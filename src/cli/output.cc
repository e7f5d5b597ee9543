// Where command output goes: stdout, or a file written atomically (temp file + rename).
// Either way the text loses its terminal controls first (a report echoes names from dumps and
// directory names), and a failed write is an error, never a silent exit 0.
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/commands.h"
#include "io/atomic_file.h"
#include "util/error.h"
#include "util/printable.h"

namespace shardtrace {

void RefuseHtmlOnTerminal(const CommonOptions& options) {
  if (options.format == "html" && options.output == "-" && isatty(STDOUT_FILENO) == 1)
    Fail(
        "--format html: standard output is a terminal; expected -o FILE.html (or a pipe), as "
        "the report is a file to open in a browser");
}

void WriteStdout(const std::string& text, std::ostream& out) {
  const std::string shown = WithoutTerminalControls(text);
  errno = 0;
  out << shown;
  out.flush();
  if (!out)
    Fail("standard output: cannot write {} bytes{}", shown.size(),
         errno != 0 ? fmt::format(": {}", std::strerror(errno)) : std::string());
}

void WriteOutput(const CommonOptions& options, const std::string& text, std::ostream& out) {
  if (options.output == "-")
    WriteStdout(text, out);
  else
    WriteTextAtomically(options.output, WithoutTerminalControls(text));
}

}  // namespace shardtrace
