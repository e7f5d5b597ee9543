// Atomic file replacement: every file shardtrace writes (npz archives, reports, rendered
// templates) goes through here, so a crash, a full disk or a thrown Error never leaves a
// half-written file at the destination. The content is produced in a temporary file in the
// destination's own directory (a rename is only atomic within one filesystem), flushed to
// disk, and renamed over the destination in one step. Readers therefore see either the old
// file or the complete new one, never a mix.
#pragma once

#include <functional>
#include <string>

namespace shardtrace {

// Calls `write(tmp_path)`, which must create and fill the file at `tmp_path` (a fresh,
// not-yet-existing hidden name next to `path`), then renames it over `path`. If `write`
// throws, the temporary file is removed and the exception is rethrown unchanged; `path` is
// left untouched. Throws Error naming `path` if the directory does not exist, `write` did not
// create the file, or the rename fails.
void WriteFileAtomically(const std::string& path,
                         const std::function<void(const std::string& tmp_path)>& write);

// WriteFileAtomically with `text` written verbatim (no newline translation).
void WriteTextAtomically(const std::string& path, const std::string& text);

}  // namespace shardtrace
