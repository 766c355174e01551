#include "tools/train/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kgrad {
namespace train {
namespace {

absl::Status Errno(const std::string& path, const char* what) {
  return absl::PermissionDeniedError(absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

// Writes all of `bytes` to fd (write may take less than asked).
bool WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(tmp, "cannot create");
  if (!WriteAll(fd, bytes) || ::fsync(fd) != 0) {
    absl::Status s = Errno(tmp, "write failed");
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  if (::close(fd) != 0) {
    absl::Status s = Errno(tmp, "write failed");
    ::unlink(tmp.c_str());
    return s;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno(path, "cannot replace");
    ::unlink(tmp.c_str());
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, int64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": ", st.st_size, " bytes, more than the limit of ", max_bytes));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != bytes.size()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return bytes;
}

}  // namespace train
}  // namespace kgrad
