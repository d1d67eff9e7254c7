#include "common/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"

namespace psgd {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoError(absl::string_view what, const std::string& path,
                        int err) {
  std::string message =
      absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

}  // namespace

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += ch;  // UTF-8 passes through
        }
    }
  }
  out += '"';
  return out;
}

JsonObject& JsonObject::SetEncoded(absl::string_view key, std::string encoded) {
  for (auto& [k, v] : fields_) {
    if (k == key) {
      v = std::move(encoded);
      return *this;
    }
  }
  fields_.emplace_back(std::string(key), std::move(encoded));
  return *this;
}

JsonObject& JsonObject::Set(absl::string_view key, double value) {
  if (!std::isfinite(value)) return SetEncoded(key, "null");
  // 16 significant digits: a Unix time keeps its microseconds.
  return SetEncoded(key, absl::StrFormat("%.16g", value));
}

JsonObject& JsonObject::Set(absl::string_view key, int64_t value) {
  return SetEncoded(key, absl::StrCat(value));
}

JsonObject& JsonObject::SetArray(absl::string_view key,
                                 absl::Span<const int64_t> values) {
  return SetEncoded(key, absl::StrCat("[", absl::StrJoin(values, ","), "]"));
}

JsonObject& JsonObject::Set(absl::string_view key, bool value) {
  return SetEncoded(key, value ? "true" : "false");
}

JsonObject& JsonObject::Set(absl::string_view key, absl::string_view value) {
  return SetEncoded(key, JsonQuote(value));
}

std::string JsonObject::Join(absl::string_view open,
                             absl::string_view separator,
                             absl::string_view close) const {
  std::string out(open);
  for (size_t i = 0; i < fields_.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : separator, JsonQuote(fields_[i].first),
                    ":", fields_[i].second);
  }
  absl::StrAppend(&out, close);
  return out;
}

std::string JsonObject::ToString() const { return Join("{", ",", "}"); }

std::string JsonObject::ToMultilineString() const {
  if (fields_.empty()) return "{}\n";
  return Join("{\n  ", ",\n  ", "\n}\n");
}

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(
    const std::string& path, bool append) {
  // O_NOFOLLOW: a link planted at the name is refused, not followed.
  const int fd = open(path.c_str(),
                      O_CREAT | O_NOFOLLOW | O_CLOEXEC |
                          (append ? (O_RDWR | O_APPEND) : (O_WRONLY | O_TRUNC)),
                      0644);
  if (fd < 0) return ErrnoError("cannot create metrics file", path, errno);
  std::FILE* file = fdopen(fd, append ? "a+" : "w");
  if (file == nullptr) {
    const int error = errno;
    close(fd);
    return ErrnoError("cannot create metrics file", path, error);
  }
  if (append && std::fseek(file, -1, SEEK_END) == 0 &&
      std::fgetc(file) != '\n') {
    std::fseek(file, 0, SEEK_END);
    if (std::fputc('\n', file) == EOF || std::fflush(file) != 0) {
      const int error = errno;
      std::fclose(file);
      return ErrnoError("cannot write metrics", path, error);
    }
  }
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(path, file));
}

MetricsWriter::~MetricsWriter() {
  MutexLock lock(&mu_);
  std::fclose(file_);
}

absl::Status MetricsWriter::Write(const JsonObject& record) {
  const std::string line = record.ToString() + "\n";
  MutexLock lock(&mu_);
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fflush(file_) != 0) {
    return ErrnoError("cannot write metrics", path_, errno);
  }
  return absl::OkStatus();
}

absl::Status WriteJsonFile(const std::string& path, const JsonObject& object) {
  const std::string dir = fs::path(path).parent_path().string();
  std::error_code ec;
  if (!dir.empty() && !fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("cannot create '", path, "': no directory '", dir, "'"));
  }
  return WriteFileAtomically(path, object.ToMultilineString());
}

absl::StatusOr<std::string> CreateRunDir(const std::string& requested,
                                         absl::string_view base,
                                         absl::string_view name,
                                         absl::Time now) {
  std::string dir = requested;
  if (dir.empty()) {
    dir = (fs::path(std::string(base)) /
           absl::StrCat(
               name, "-",
               absl::FormatTime("%Y%m%d-%H%M%S", now, absl::LocalTimeZone())))
              .string();
  }
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": exists and is not a directory"));
  }
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat(dir, ": cannot create the run directory: ", ec.message()));
  }
  return dir;
}

int64_t ResidentMemoryBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  long long kb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "VmRSS: %lld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return static_cast<int64_t>(kb) * 1024;
}

}  // namespace psgd
