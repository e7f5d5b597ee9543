#include "io/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>

#include "util/error.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;

// A hidden name next to `target` that no other writer will pick: the pid separates
// processes, 64 random bits separate threads and repeated calls. The file is not created
// here, so writers (libzip among them) create it with their usual permissions.
fs::path TempPathFor(const fs::path& target) {
  std::random_device device;
  const uint64_t nonce = (static_cast<uint64_t>(device()) << 32) ^ device();
  for (uint64_t attempt = 0; attempt < 100; ++attempt) {
    fs::path candidate =
        target.parent_path() /
        fmt::format(".{}.tmp-{}-{:016x}", target.filename().string(), ::getpid(), nonce + attempt);
    std::error_code ec;
    if (!fs::exists(candidate, ec) && !ec) return candidate;
  }
  Fail("{}: cannot find an unused temporary file name next to it", target.string());
}

// Makes the content durable before the rename publishes it; without this a power loss can
// leave the new name pointing at an empty file on some filesystems.
void SyncFile(const std::string& path, const std::string& tmp_path) {
  const int fd = ::open(tmp_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    Fail("{}: cannot reopen temporary file '{}' to flush it: {}", path, tmp_path,
         std::strerror(errno));
  }
  const int rc = ::fsync(fd);
  const int saved_errno = errno;
  ::close(fd);
  if (rc != 0) {
    Fail("{}: cannot flush temporary file '{}' to disk: {}", path, tmp_path,
         std::strerror(saved_errno));
  }
}

void RemoveQuietly(const fs::path& p) {
  std::error_code ignored;
  fs::remove(p, ignored);
}

}  // namespace

void WriteFileAtomically(const std::string& path,
                         const std::function<void(const std::string& tmp_path)>& write) {
  const fs::path target(path);
  if (target.filename().empty()) Fail("{}: cannot write: path names a directory, not a file", path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    Fail("{}: cannot write: directory '{}' does not exist", path, dir.string());
  }
  if (fs::is_directory(target, ec)) Fail("{}: cannot write: it is a directory", path);

  const fs::path tmp = TempPathFor(target);
  const std::string tmp_path = tmp.string();
  try {
    write(tmp_path);
    if (!fs::is_regular_file(tmp, ec)) {
      Fail("{}: the writer did not create temporary file '{}'", path, tmp_path);
    }
    SyncFile(path, tmp_path);
    fs::rename(tmp, target, ec);
    if (ec) {
      Fail("{}: cannot move temporary file '{}' into place: {}", path, tmp_path, ec.message());
    }
  } catch (...) {
    RemoveQuietly(tmp);
    throw;
  }
}

void WriteTextAtomically(const std::string& path, const std::string& text) {
  WriteFileAtomically(path, [&](const std::string& tmp_path) {
    std::ofstream out(tmp_path, std::ios::binary | std::ios::trunc);
    if (!out) {
      Fail("{}: cannot create temporary file '{}': {}", path, tmp_path, std::strerror(errno));
    }
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) Fail("{}: cannot write temporary file '{}' (disk full?)", path, tmp_path);
  });
}

}  // namespace shardtrace
