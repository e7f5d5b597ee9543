// Atomic file replacement: every file shardtrace writes (npz archives, reports, rendered
// templates) goes through here, so a crash, a full disk, a thrown Error or a SIGINT/SIGTERM
// never leaves a half-written file at the destination nor a stray temporary file. The
// content is produced in a temporary file in the destination's own directory (a rename is
// only atomic within one filesystem), flushed to disk, given the old file's permission bits,
// and renamed over the destination in one step. Readers therefore see either the old file or
// the complete new one, never a mix.
//
// What is never replaced: a symbolic link is written through (its target file is replaced,
// the link stays); a directory, device, FIFO or socket is refused; so is any file the command
// reads (CheckOutputIsNotInput). A file-size limit (SIGXFSZ) fails the write like a full disk.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace shardtrace {

// Checks, before any work is done, that `path` can be written: its directory exists and is
// writable, the name fits the filesystem, and it is not a directory, device, FIFO or socket.
// Returns the file that will really be replaced (`path`, or the final target of a symlink).
// Throws Error "output file (<path>): expected ..., found ...".
std::string CheckOutputFile(const std::string& path);

// Checks that `path` (symlinks followed) is none of `inputs`, the files the command reads:
// same device and inode. A missing input or output is no conflict. Throws Error
// "output file (<path>): expected a file the command does not read, found <input>".
void CheckOutputIsNotInput(const std::string& path, const std::vector<std::string>& inputs);

// Checks that `dir` is, or can be created as, a writable directory; throws Error
// "<what> (<dir>): expected ..., found ..." otherwise. Creates nothing.
void CheckOutputDirectory(const std::string& dir, const std::string& what);

// Calls `write(tmp_path)`, which must create and fill the file at `tmp_path` (a fresh,
// not-yet-existing hidden name next to the file), then renames it over the file
// CheckOutputFile(path) names. If `write` throws, or SIGINT/SIGTERM arrives, the temporary
// file is removed (the exception is rethrown unchanged; the signal then takes its default
// action); the destination is left untouched.
void WriteFileAtomically(const std::string& path,
                         const std::function<void(const std::string& tmp_path)>& write);

// WriteFileAtomically with `text` written verbatim (no newline translation).
void WriteTextAtomically(const std::string& path, const std::string& text);

}  // namespace shardtrace
