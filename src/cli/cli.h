// The command line: a table of subcommands (config, explain, trace, dump, ...) built on
// CLI11, and the single place that catches shardtrace::Error. Every command takes MaxText's
// own argument style: `shardtrace <command> [CONFIG.yml ...] [key=value ...]` plus
// --devices N. Exit status: 0 success, 2 bad input (config, CLI, files), 1 internal bug.
#pragma once

#include <ostream>

namespace shardtrace {

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace shardtrace
