// The command line: a table of subcommands (config, explain, trace, dump, ...) built on
// CLI11, and the single place that catches shardtrace::Error. Every command takes MaxText's
// own argument style: `shardtrace <command> [CONFIG.yml ...] [key=value ...]` plus
// --devices N.
#pragma once

#include <ostream>

namespace shardtrace {

// Exit statuses, documented in --help and the README.
inline constexpr int kExitOk = 0;
inline constexpr int kExitMismatch = 1;  // check / compare-dump / generate --check found one
inline constexpr int kExitBadInput = 2;  // one line "shardtrace: error: ..." on stderr
inline constexpr int kExitInternal = 3;  // a shardtrace bug: "internal error (please report)"

int RunCli(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace shardtrace
