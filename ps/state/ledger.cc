#include "ps/state/ledger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace ps {
namespace {

// The size of an open file; -1 (logged) when it cannot be read.
int64_t FileSize(std::FILE* file) {
  struct stat st;
  if (::fstat(fileno(file), &st) != 0) return -1;
  return st.st_size;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Ledger>> Ledger::Open(const std::string& path,
                                                     const std::string& owner) {
  // Its directory first (made where missing): this user's, not a link,
  // writable by nobody else; then the file itself never through a link.
  if (absl::Status s = MakeOwnDirectories(DirectoryOf(path)); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(owner, ": the ledger ", path,
                                               ": ", s.message()));
  }
  const int fd =
      ::open(path.c_str(),
             O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        owner, ": cannot open the ledger ", path, ": ", std::strerror(errno),
        errno == ELOOP ? " (a symbolic link: refused)" : ""));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != ::geteuid()) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(owner, ": the ledger ", path,
                     " is not a regular file of this user's: refused"));
  }
  std::FILE* file = ::fdopen(fd, "a");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat(owner, ": cannot open the ledger ",
                                            path, ": ", std::strerror(error)));
  }
  return std::unique_ptr<Ledger>(new Ledger(path, owner, file));
}

Ledger::Ledger(std::string path, std::string owner, std::FILE* file)
    : path_(std::move(path)), owner_(std::move(owner)), file_(file) {}

Ledger::~Ledger() { Write(); }

void Ledger::Add(std::string line) {
  line += '\n';
  MutexLock lock(&pending_mu_);
  pending_.push_back(std::move(line));
}

void Ledger::Write() {
  MutexLock lock(&write_mu_);
  WriteLocked();
}

void Ledger::WriteLocked() {
  std::vector<std::string> lines;
  {
    MutexLock lock(&pending_mu_);
    lines.swap(pending_);
  }
  if (lines.empty()) return;
  // Whole lines or nothing: one write of them all, straight to the file
  // (nothing stays in a stdio buffer), and on a failure (a full disk) the
  // file cut back to where it was and the lines kept pending for the next
  // write, so that the ledger never holds a part of a line nor loses one.
  std::string text;
  for (const std::string& line : lines) text += line;
  std::FILE* file = file_.get();
  std::fflush(file);
  const int fd = fileno(file);
  const int64_t before = FileSize(file);
  size_t done = 0;
  int error = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (error == 0) {
    if (failing_) {
      spdlog::info(
          "{}: the ledger {} is written again ({} line(s) that waited)", owner_,
          path_, lines.size());
    }
    failing_ = false;
    return;
  }
  if (done > 0 && before >= 0 && ::ftruncate(fd, before) != 0) {
    spdlog::error("{}: cutting the ledger {} back to {} bytes: {}", owner_,
                  path_, before, std::strerror(errno));
  }
  if (!failing_) {  // once, not at every write while the disk is full
    spdlog::error(
        "{}: writing the ledger {}: {}; its lines wait, written with the next "
        "write that succeeds",
        owner_, path_, std::strerror(error));
  }
  failing_ = true;
  MutexLock lock(&pending_mu_);
  lines.insert(lines.end(), std::make_move_iterator(pending_.begin()),
               std::make_move_iterator(pending_.end()));
  pending_.swap(lines);
}

int64_t Ledger::Flush() {
  MutexLock lock(&write_mu_);
  WriteLocked();
  return FileSize(file_.get());
}

void Ledger::Truncate(int64_t length) {
  MutexLock lock(&write_mu_);
  WriteLocked();
  const int64_t size = FileSize(file_.get());
  // A checkpoint never names more than the file held when it was taken
  // (Flush); longer would pad the file with zeros, which no line is.
  if (length > size) {
    spdlog::error(
        "{}: the ledger {} holds {} bytes, fewer than the {} its checkpoint "
        "names; it is left as it is",
        owner_, path_, size, length);
    length = size;
  }
  if (::ftruncate(fileno(file_.get()), length) != 0) {
    spdlog::error("{}: cutting the ledger {} back to {} bytes: {}", owner_,
                  path_, length, std::strerror(errno));
  }
}

}  // namespace ps
}  // namespace psgd
