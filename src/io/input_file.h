// Reading an input file a user named (config YAML, override file, golden case config.yml,
// JSON dump) with the checks a hostile path needs: it must be a regular file (a directory,
// FIFO, socket or device such as /dev/zero is refused without blocking or reading it), no
// larger than a limit (checked from fstat before reading, and again while reading for files
// whose size the kernel does not report), and every failure of the operating system (no
// such file, permission, symlink loop, name too long) becomes one Error naming the file
// and what was expected, never an escaping std::filesystem exception.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace shardtrace {

// Configs and dumps are kilobytes; 64 MiB is far above any real one.
inline constexpr int64_t kMaxTextInputBytes = int64_t{64} << 20;

// The whole file, or Error "<what> (<path>): expected ..., found ...".
std::string ReadInputFile(const std::string& path, std::string_view what,
                          int64_t max_bytes = kMaxTextInputBytes);

// Throws the same errors ReadInputFile would for a path that is missing, unreadable or not a
// regular file; returns its size in bytes. For files opened by a library (libzip).
int64_t CheckInputFile(const std::string& path, std::string_view what, int64_t max_bytes);

// What the file at `mode` is, for messages: "a directory", "a FIFO", "a character device".
std::string_view FileKind(unsigned mode);

// What is at `path`, links followed, for messages: FileKind's words, or "no such file or
// directory", "a symbolic link loop", "a path through a file", ... when stat fails.
std::string PathKind(const std::string& path);

}  // namespace shardtrace
