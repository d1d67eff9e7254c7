#include "common/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psgd {
namespace {

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

constexpr size_t kHeader = 8 + 8 + 4;

absl::Status WritableByOthers(const std::string& dir, mode_t mode) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "directory '%s' has mode %04o: users other than its owner may add "
      "files to it; `chmod go-w %s`, or use a directory of your own",
      dir, mode & 07777, dir));
}

}  // namespace

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetLe(absl::string_view in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  return v;
}

uint32_t Crc32c(absl::string_view data, uint32_t crc) {
  static const std::array<uint32_t, 256> kTable = MakeCrcTable();
  crc = ~crc;
  for (unsigned char b : data) crc = kTable[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data) {
  // Unique per call, also between threads of one process writing the same
  // file (two shards of one process completing a checkpoint's MANIFEST at
  // once): a shared temporary name would let one rename the other's file.
  // A random part too, and O_EXCL | O_NOFOLLOW: a name another user could
  // guess and plant (a link to a file of theirs or ours) is never written.
  static std::atomic<uint64_t> calls{0};
  uint64_t salt = 0;
  if (getrandom(&salt, sizeof(salt), 0) != sizeof(salt)) salt = 0;
  std::string tmp = absl::StrCat(path, ".tmp.", getpid(), ".",
                                 calls.fetch_add(1), ".", absl::Hex(salt));
  int fd = open(tmp.c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", tmp);
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = Errno("cannot write", tmp);
      close(fd);
      unlink(tmp.c_str());
      return s;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    absl::Status s = Errno("cannot fsync", tmp);
    close(fd);
    unlink(tmp.c_str());
    return s;
  }
  if (close(fd) != 0) {
    absl::Status s = Errno("cannot close", tmp);
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = Errno("cannot rename to", path);
    unlink(tmp.c_str());
    return s;
  }
  // Make the rename itself durable.
  std::string dir = ".";
  if (size_t slash = path.rfind('/'); slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
  }
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("no file '", path, "'"));
    }
    return Errno("cannot open", path);
  }
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      absl::Status s = Errno("cannot read", path);
      close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

absl::Status MakeDirectories(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string prefix = path.substr(0, i);
      if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
        return Errno("cannot create directory", prefix);
      }
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InternalError(absl::StrCat("'", path, "' is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status MakeOwnDirectories(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string prefix = path.substr(0, i);
      if (mkdir(prefix.c_str(), 0755) == 0) {
        // Durable: the new entry in its parent.
        const size_t slash = prefix.rfind('/');
        const std::string parent = slash == std::string::npos ? "."
                                   : slash == 0               ? "/"
                                                : prefix.substr(0, slash);
        const int dfd =
            open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
          fsync(dfd);
          close(dfd);
        }
      } else if (errno != EEXIST) {
        return Errno("cannot create directory", prefix);
      }
    }
  }
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", path, "' is not a directory (or is a link)"));
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("directory '", path, "' belongs to uid ", st.st_uid,
                     ", not to this user (uid ", geteuid(), ")"));
  }
  if ((st.st_mode & 022) != 0) return WritableByOthers(path, st.st_mode);
  return absl::OkStatus();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status CheckTrustedDirectoryFd(int dir_fd, const std::string& dir) {
  struct stat st;
  if (fstat(dir_fd, &st) != 0) return Errno("cannot stat", dir);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", dir, "' is not a directory"));
  }
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("directory '", dir, "' belongs to uid ", st.st_uid,
                     ", neither this user (uid ", geteuid(),
                     ") nor root: its owner could put any file there"));
  }
  if ((st.st_mode & 022) != 0) return WritableByOthers(dir, st.st_mode);
  return absl::OkStatus();
}

absl::Status CheckTrustedDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("no directory '", dir, "'"));
    }
    if (errno == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", dir, "' is not a directory"));
    }
    return Errno("cannot open directory", dir);
  }
  absl::Status s = CheckTrustedDirectoryFd(fd, dir);
  close(fd);
  return s;
}

std::string FrameChecksummed(absl::string_view magic,
                             absl::string_view payload) {
  std::string out;
  out.reserve(kHeader + payload.size());
  out.append(magic.data(), magic.size());
  PutLe(&out, payload.size(), 8);
  PutLe(&out, Crc32c(payload), 4);
  out.append(payload.data(), payload.size());
  return out;
}

absl::StatusOr<std::string> UnframeChecksummed(absl::string_view magic,
                                               absl::string_view bytes,
                                               absl::string_view filename) {
  if (bytes.size() < kHeader) {
    return absl::DataLossError(
        absl::StrCat(filename, ": truncated: ", bytes.size(),
                     " bytes, shorter than the ", kHeader, "-byte header"));
  }
  if (bytes.substr(0, 8) != magic) {
    return absl::DataLossError(absl::StrCat(
        filename, ": not a '", magic, "' file (wrong magic at offset 0)"));
  }
  uint64_t length = GetLe(bytes.substr(8), 8);
  uint32_t crc = static_cast<uint32_t>(GetLe(bytes.substr(16), 4));
  uint64_t have = bytes.size() - kHeader;
  if (length != have) {
    return absl::DataLossError(absl::StrCat(
        filename, ": ", length > have ? "truncated" : "oversized",
        ": the header says ", length, " payload bytes, the file has ", have));
  }
  absl::string_view payload = bytes.substr(kHeader);
  if (Crc32c(payload) != crc) {
    return absl::DataLossError(
        absl::StrCat(filename, ": checksum mismatch (the file is corrupt)"));
  }
  return std::string(payload);
}

}  // namespace psgd
