// Warnings: legal-but-suspicious input (a repeated YAML key, ...) printed on stderr as one
// line "shardtrace: warning: <message>" (made printable, util/printable.h), each distinct
// message once per command: render and diff load their config once per traced variant, and a
// warning about the user's file is still one line.
#pragma once

#include <string_view>

namespace shardtrace {

// Prints the warning unless this command already printed the same one. Thread-safe.
void Warn(std::string_view message);

// Forgets the warnings printed so far: the start of a command (cli/cli.cc RunCli).
void ResetWarnings();

}  // namespace shardtrace
