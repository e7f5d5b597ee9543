#include "io/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "util/error.h"

namespace shardtrace {
namespace {

[[noreturn]] void FailOpen(const std::string& path, std::string_view what, int error) {
  switch (error) {
    case ENOENT:
      Fail("{} ({}): expected an existing file, found no such file", what, path);
    case EACCES:
      Fail("{} ({}): expected a readable file, found no read permission", what, path);
    case ELOOP:
      Fail("{} ({}): expected a file, found a symbolic link loop", what, path);
    case ENAMETOOLONG:
      Fail("{} ({}): expected a file name the system accepts, found one that is too long", what,
           path);
    case ENOTDIR:
      Fail("{} ({}): expected a path through directories, found a file used as a directory", what,
           path);
    default:
      Fail("{} ({}): cannot open: {}", what, path, std::strerror(error));
  }
}

// Opens without blocking on a FIFO and checks the kind and size; returns the descriptor.
int OpenChecked(const std::string& path, std::string_view what, int64_t max_bytes, int64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) FailOpen(path, what, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    FailOpen(path, what, error);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    Fail("{} ({}): expected a regular file, found {}", what, path, FileKind(st.st_mode));
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    Fail("{} ({}): expected at most {} bytes, found {} bytes", what, path, max_bytes,
         static_cast<int64_t>(st.st_size));
  }
  *size = st.st_size;
  return fd;
}

}  // namespace

std::string_view FileKind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "a special file";
}

std::string PathKind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return std::string(FileKind(st.st_mode));
  switch (errno) {
    case ENOENT:
      return "no such file or directory";
    case ELOOP:
      return "a symbolic link loop";
    case ENOTDIR:
      return "a path through a file";
    case EACCES:
      return "a path without search permission";
    case ENAMETOOLONG:
      return "a name too long for the system";
    default:
      return std::strerror(errno);
  }
}

int64_t CheckInputFile(const std::string& path, std::string_view what, int64_t max_bytes) {
  int64_t size = 0;
  ::close(OpenChecked(path, what, max_bytes, &size));
  return size;
}

std::string ReadInputFile(const std::string& path, std::string_view what, int64_t max_bytes) {
  int64_t size = 0;
  const int fd = OpenChecked(path, what, max_bytes, &size);
  std::string text;
  text.reserve(static_cast<size_t>(size));
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      Fail("{} ({}): cannot read: {}", what, path, std::strerror(error));
    }
    if (n == 0) break;
    // A file can grow while it is read (or report size 0, like /proc files).
    if (static_cast<int64_t>(text.size()) + n > max_bytes) {
      ::close(fd);
      Fail("{} ({}): expected at most {} bytes, found more", what, path, max_bytes);
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace shardtrace
