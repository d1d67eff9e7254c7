#include "common/security.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cluster_name.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

// The token a token file's `text` holds (a trailing newline ignored), or
// INVALID_ARGUMENT naming `path`.
absl::StatusOr<std::string> TokenOfFileText(absl::string_view text,
                                            const std::string& path) {
  std::string token(absl::StripTrailingAsciiWhitespace(text));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file '", path, "' is empty"));
  }
  if (absl::Status s = ValidateToken(token); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file '", path, "': ", s.message()));
  }
  return token;
}

std::string Errno(absl::string_view what) {
  return absl::StrCat(what, ": ", std::strerror(errno));
}

// Makes `dir` and its missing parents, the ones made 0700.
absl::Status MakePrivateDirectories(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", dir, "' is not a directory"));
    }
    return absl::OkStatus();
  }
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    RETURN_IF_ERROR(MakePrivateDirectories(dir.substr(0, slash)));
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(Errno(absl::StrCat("cannot make '", dir, "'")));
  }
  return absl::OkStatus();
}

// The most a token file may hold: a token and its newline, with room to
// spare. Nothing longer is read (a link to /dev/zero would never end).
constexpr size_t kMaxTokenFileBytes = 4096;

// The token of the file at `path`, read only when nobody but this user (or
// root) can have chosen it: see ReadTokenFile in security.h.
absl::StatusOr<std::string> ReadCheckedTokenFile(const std::string& path) {
  const std::string dir = DirectoryOf(path);
  const std::string base = path.rfind('/') == std::string::npos
                               ? path
                               : path.substr(path.rfind('/') + 1);
  if (base.empty() || base == "." || base == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("token file '", path, "' names a directory"));
  }
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("no file '", path, "'"));
    }
    return absl::InternalError(
        Errno(absl::StrCat("cannot open the directory of '", path, "'")));
  }
  if (absl::Status s = CheckTrustedDirectoryFd(dfd, dir); !s.ok()) {
    close(dfd);
    return absl::FailedPreconditionError(
        absl::StrCat("token file '", path, "' refused: ", s.message()));
  }
  // O_NONBLOCK: a FIFO must not hold the open until someone writes to it.
  const int fd =
      openat(dfd, base.c_str(),
             O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  const int open_errno = errno;
  close(dfd);
  if (fd < 0) {
    if (open_errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("no file '", path, "'"));
    }
    if (open_errno == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat("token file '", path,
                       "' is a symbolic link: refused (name the "
                       "real file instead)"));
    }
    errno = open_errno;
    return absl::InternalError(Errno(absl::StrCat("cannot open '", path, "'")));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const std::string e = Errno(absl::StrCat("cannot stat '", path, "'"));
    close(fd);
    return absl::InternalError(e);
  }
  absl::Status refused;
  if (!S_ISREG(st.st_mode) ||
      st.st_size > static_cast<off_t>(kMaxTokenFileBytes)) {
    refused = absl::FailedPreconditionError(absl::StrCat(
        "token file '", path, "' is not a regular file of at most 4 KiB"));
  } else if (st.st_uid != geteuid() && st.st_uid != 0) {
    refused = absl::FailedPreconditionError(
        absl::StrCat("token file '", path, "' belongs to uid ", st.st_uid,
                     ", neither this user (uid ", geteuid(),
                     ") nor root: a cluster's token must be its own user's"));
  } else if ((st.st_mode & 077) != 0) {
    refused = absl::FailedPreconditionError(absl::StrFormat(
        "token file '%s' has mode %04o: others may read it; `chmod 600 %s` "
        "(or delete it, and the next task makes a new one)",
        path, st.st_mode & 07777, path));
  }
  if (!refused.ok()) {
    close(fd);
    return refused;
  }
  // At most one byte past the limit: a file that grew since fstat.
  std::string text(kMaxTokenFileBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string e = Errno(absl::StrCat("cannot read '", path, "'"));
      close(fd);
      return absl::InternalError(e);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (got > kMaxTokenFileBytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "token file '", path, "' is not a regular file of at most 4 KiB"));
  }
  text.resize(got);
  return TokenOfFileText(text, path);
}

}  // namespace

absl::StatusOr<std::string> DefaultTokenFile(absl::string_view cluster_name) {
  if (!IsValidClusterName(cluster_name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster name '", cluster_name, "' is not ", kClusterNameRule));
  }
  if (const char* env = std::getenv("PSGD_TOKEN_FILE");
      env != nullptr && env[0] != '\0') {
    return std::string(env);
  }
  std::string config_home;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME");
      xdg != nullptr && xdg[0] == '/') {
    config_home = xdg;
  } else {
    std::string home;
    if (const char* h = std::getenv("HOME"); h != nullptr && h[0] == '/') {
      home = h;
    } else if (const passwd* pw = getpwuid(geteuid());
               pw != nullptr && pw->pw_dir != nullptr && pw->pw_dir[0] == '/') {
      home = pw->pw_dir;
    }
    if (home.empty()) {
      return absl::FailedPreconditionError(
          "no home directory for the cluster's token file: set "
          "PSGD_TOKEN_FILE, or security.token_file in the config");
    }
    config_home = absl::StrCat(home, "/.config");
  }
  return absl::StrCat(config_home, "/psgd/tokens/", cluster_name, ".token");
}

std::string PeerTokenFileOf(absl::string_view token_file) {
  return absl::StrCat(token_file, ".peer");
}

absl::StatusOr<std::string> ReadOrCreateTokenFile(const std::string& path) {
  {
    absl::StatusOr<std::string> existing = ReadCheckedTokenFile(path);
    if (existing.status().code() != absl::StatusCode::kNotFound) {
      return existing;
    }
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? std::string() : path.substr(0, slash);
  RETURN_IF_ERROR(MakePrivateDirectories(dir));
  // Never made where another user could have put a file of their own first.
  if (absl::Status d = CheckTrustedDirectory(DirectoryOf(path)); !d.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("token file '", path, "' not made: ", d.message()));
  }
  unsigned char secret[32];
  if (getrandom(secret, sizeof(secret), 0) != sizeof(secret)) {
    return absl::InternalError(Errno("getrandom"));
  }
  const std::string token = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(secret), sizeof(secret)));
  // A whole file under a fresh name, then linked: link() fails with EEXIST
  // when another task got there first, and that task's file is whole.
  unsigned char salt[8];
  if (getrandom(salt, sizeof(salt), 0) != sizeof(salt)) {
    return absl::InternalError(Errno("getrandom"));
  }
  const std::string temp =
      absl::StrCat(path, ".tmp.",
                   absl::BytesToHexString(absl::string_view(
                       reinterpret_cast<const char*>(salt), 8)));
  const int fd = open(
      temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        Errno(absl::StrCat("cannot create '", temp, "'")));
  }
  const std::string text = token + "\n";
  const bool written = write(fd, text.data(), text.size()) ==
                           static_cast<ssize_t>(text.size()) &&
                       fsync(fd) == 0;
  const std::string write_error =
      Errno(absl::StrCat("cannot write '", temp, "'"));
  close(fd);
  if (!written) {
    unlink(temp.c_str());
    return absl::InternalError(write_error);
  }
  const bool linked = link(temp.c_str(), path.c_str()) == 0;
  const int link_errno = errno;
  unlink(temp.c_str());
  if (!linked) {
    if (link_errno == EEXIST) {
      return ReadCheckedTokenFile(path);
    }
    errno = link_errno;
    return absl::InternalError(Errno(absl::StrCat("cannot make '", path, "'")));
  }
  return token;
}

absl::Status ValidateToken(absl::string_view token) {
  if (token.empty()) return absl::InvalidArgumentError("the token is empty");
  if (token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token has ", token.size(), " characters, more than ",
                     kMaxTokenBytes));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the token has character ", i + 1, " of code ", static_cast<int>(c),
          ": only visible ASCII characters (no spaces) can travel in gRPC "
          "metadata"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  return ReadCheckedTokenFile(path);
}

absl::StatusOr<DefaultToken> ReadOrCreateDefaultToken(
    absl::string_view cluster_name) {
  DefaultToken d;
  ASSIGN_OR_RETURN(d.file, DefaultTokenFile(cluster_name));
  ASSIGN_OR_RETURN(d.token, ReadOrCreateTokenFile(d.file));
  return d;
}

absl::StatusOr<ClusterToken> ResolveClusterToken(absl::string_view cluster_name,
                                                 const TokenSource& source) {
  ClusterToken t;
  if (source.token.has_value()) {
    RETURN_IF_ERROR(ValidateToken(*source.token));
    t.token = *source.token;
  } else if (!source.token_file.empty()) {
    ASSIGN_OR_RETURN(t.token, ReadTokenFile(source.token_file));
    t.file = source.token_file;
  } else if (!source.insecure) {
    absl::StatusOr<DefaultToken> d = ReadOrCreateDefaultToken(cluster_name);
    if (!d.ok()) return Annotate(d.status(), "the cluster's default token: ");
    t.token = std::move(d->token);
    t.file = std::move(d->file);
  }
  return t;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char da[SHA256_DIGEST_LENGTH], db[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(a.data()), a.size(), da);
  SHA256(reinterpret_cast<const unsigned char*>(b.data()), b.size(), db);
  return CRYPTO_memcmp(da, db, sizeof(da)) == 0;
}

}  // namespace psgd
