#include "io/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>

#include "io/input_file.h"
#include "util/error.h"

namespace shardtrace {
namespace {

namespace fs = std::filesystem;

// The temporary file a signal handler must remove. A signal handler can only reach
// process-wide state, so this one buffer is the exception to "no globals"; it is set only
// while a write is in flight, and read only by the handler.
char g_pending_tmp[PATH_MAX + 1];
std::atomic<bool> g_pending{false};

extern "C" void RemovePendingAndReraise(int signal) {
  if (g_pending.load()) ::unlink(g_pending_tmp);  // async-signal-safe
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

// Installs the handlers for the duration of one write and restores the previous ones.
class SignalCleanup {
 public:
  explicit SignalCleanup(const std::string& tmp) {
    if (tmp.size() <= PATH_MAX) {
      std::memcpy(g_pending_tmp, tmp.c_str(), tmp.size() + 1);
      g_pending.store(true);
    }
    struct sigaction action {};
    action.sa_handler = RemovePendingAndReraise;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
    ::sigaction(SIGHUP, &action, &old_hup_);
    // Past the file-size limit (ulimit -f) the kernel sends SIGXFSZ, whose default kills the
    // process with the temporary in place; ignored, the write fails with EFBIG instead and
    // the error path removes it.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGXFSZ, &ignore, &old_xfsz_);
  }
  ~SignalCleanup() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGHUP, &old_hup_, nullptr);
    ::sigaction(SIGXFSZ, &old_xfsz_, nullptr);
    g_pending.store(false);
  }
  SignalCleanup(const SignalCleanup&) = delete;
  SignalCleanup& operator=(const SignalCleanup&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
  struct sigaction old_xfsz_ {};
};

// A hidden name next to `target` that no other writer will pick: the pid separates
// processes, 64 random bits separate threads and repeated calls. The target's name is
// shortened so the temporary name stays within NAME_MAX whatever the target's length.
// The file is not created here, so writers (libzip among them) create it with their usual
// permissions.
fs::path TempPathFor(const fs::path& target) {
  std::random_device device;
  const uint64_t nonce = (static_cast<uint64_t>(device()) << 32) ^ device();
  const std::string name = target.filename().string().substr(0, 200);
  for (uint64_t attempt = 0; attempt < 100; ++attempt) {
    fs::path candidate =
        target.parent_path() / fmt::format(".{}.{}-{:016x}.tmp", name, ::getpid(), nonce + attempt);
    struct stat st {};
    if (::lstat(candidate.c_str(), &st) != 0 && errno == ENOENT) return candidate;
  }
  Fail("output file ({}): cannot find an unused temporary file name next to it", target.string());
}

// Makes the content durable before the rename publishes it; without this a power loss can
// leave the new name pointing at an empty file on some filesystems.
void SyncFile(const std::string& path, const std::string& tmp_path) {
  const int fd = ::open(tmp_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    Fail("output file ({}): cannot reopen temporary file '{}' to flush it: {}", path, tmp_path,
         std::strerror(errno));
  }
  const int rc = ::fsync(fd);
  const int saved_errno = errno;
  ::close(fd);
  if (rc != 0) {
    Fail("output file ({}): cannot flush temporary file '{}' to disk: {}", path, tmp_path,
         std::strerror(saved_errno));
  }
}

void RemoveQuietly(const fs::path& p) {
  std::error_code ignored;
  fs::remove(p, ignored);
}

std::string DirOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

std::string CheckOutputFile(const std::string& path) {
  if (path.empty()) Fail("output file: expected a file name, found an empty one");
  std::string target = path;
  // Follow symlinks by hand so the link survives (the file it names is replaced), with a
  // bound against loops.
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(target.c_str(), &st) != 0) {
      if (errno == ENOENT) break;  // a new file
      if (errno == ENAMETOOLONG)
        Fail("output file ({}): expected a name the filesystem accepts, found one too long", path);
      if (errno == ENOTDIR)
        Fail("output file ({}): expected a directory in its path, found a file", path);
      Fail("output file ({}): cannot inspect it: {}", path, std::strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) {
      if (hops >= 40) Fail("output file ({}): expected a file, found a symbolic link loop", path);
      char buffer[PATH_MAX + 1];
      const ssize_t n = ::readlink(target.c_str(), buffer, PATH_MAX);
      if (n < 0)
        Fail("output file ({}): cannot read symbolic link: {}", path, std::strerror(errno));
      const fs::path link(std::string(buffer, static_cast<size_t>(n)));
      target = link.is_absolute() ? link.string() : (fs::path(DirOf(target)) / link).string();
      continue;
    }
    if (!S_ISREG(st.st_mode))
      Fail("output file ({}): expected a regular file or a new name, found {}{}; not replaced",
           path, FileKind(st.st_mode),
           target == path ? "" : " (via a symbolic link to " + target + ")");
    break;
  }
  const fs::path name = fs::path(target).filename();
  if (name.empty() || name == "." || name == "..")
    Fail("output file ({}): expected a file name, found a directory path", path);
  if (name.string().size() > NAME_MAX)
    Fail("output file ({}): expected a file name of at most {} bytes, found {} bytes", path,
         NAME_MAX, name.string().size());
  const std::string dir = DirOf(target);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    Fail("output file ({}): expected an existing directory '{}', found {}", path, dir,
         ::stat(dir.c_str(), &st) != 0 ? "none" : FileKind(st.st_mode));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    Fail("output file ({}): expected a writable directory '{}', found no write permission", path,
         dir);
  return target;
}

void CheckOutputIsNotInput(const std::string& path, const std::vector<std::string>& inputs) {
  struct stat out {};
  if (::stat(path.c_str(), &out) != 0) return;  // a new file
  for (const std::string& input : inputs) {
    struct stat in {};
    if (::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      Fail("output file ({}): expected a file the command does not read, found {}{}; not replaced",
           path, input, input == path ? "" : " (the same file)");
  }
}

void CheckOutputDirectory(const std::string& dir, const std::string& what) {
  // The nearest existing ancestor decides: it must be a writable directory.
  fs::path p = dir.empty() ? fs::path(".") : fs::path(dir);
  while (true) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        Fail("{} ({}): expected a directory, found {}{}", what, dir, FileKind(st.st_mode),
             p.string() == dir ? "" : " at " + p.string());
      if (::access(p.c_str(), W_OK | X_OK) != 0)
        Fail("{} ({}): expected a writable directory, found no write permission{}", what, dir,
             p.string() == dir ? "" : " on " + p.string());
      return;
    }
    if (errno == ENAMETOOLONG)
      Fail("{} ({}): expected a name the filesystem accepts, found one too long", what, dir);
    if (errno != ENOENT) Fail("{} ({}): cannot inspect it: {}", what, dir, std::strerror(errno));
    if (!p.has_parent_path() || p.parent_path() == p)
      p = ".";
    else
      p = p.parent_path();
  }
}

void WriteFileAtomically(const std::string& path,
                         const std::function<void(const std::string& tmp_path)>& write) {
  const fs::path target(CheckOutputFile(path));
  // The old file's permission bits carry over (a 0600 file stays 0600).
  struct stat old {};
  const bool existed = ::stat(target.c_str(), &old) == 0;

  const fs::path tmp = TempPathFor(target);
  const std::string tmp_path = tmp.string();
  const SignalCleanup cleanup(tmp_path);
  try {
    write(tmp_path);
    std::error_code ec;
    if (!fs::is_regular_file(tmp, ec)) {
      Fail("output file ({}): the writer did not create temporary file '{}'", path, tmp_path);
    }
    if (existed && ::chmod(tmp_path.c_str(), old.st_mode & 07777) != 0)
      Fail("output file ({}): cannot keep its permissions: {}", path, std::strerror(errno));
    SyncFile(path, tmp_path);
    fs::rename(tmp, target, ec);
    if (ec) {
      Fail("output file ({}): cannot move temporary file '{}' into place: {}", path, tmp_path,
           ec.message());
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
      Fail("output file ({}): cannot create temporary file '{}': {}", path, tmp_path,
           std::strerror(errno));
    }
    errno = 0;
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out)
      Fail("output file ({}): cannot write temporary file '{}': {}", path, tmp_path,
           errno != 0 ? std::strerror(errno) : "disk full?");
  });
}

}  // namespace shardtrace
