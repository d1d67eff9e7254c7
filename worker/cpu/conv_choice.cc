#include "worker/cpu/conv_choice.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "spdlog/spdlog.h"

namespace psgd {
namespace {

// A host tensor of `shape` (64-byte aligned, as the CPU backend's "device"
// memory) filled with `value`.
Tensor Filled(const Shape& shape, float value) {
  Tensor t(shape);
  t.Fill(value);
  return t;
}

DeviceView View(Tensor& t) { return DeviceView(t.data(), t.shape()); }

// The largest cache file read; a line per shape and CPU is far less.
constexpr int64_t kMaxCacheFileBytes = int64_t{1} << 20;

// The file at `path`, opened through no link, up to kMaxCacheFileBytes.
absl::StatusOr<std::string> ReadNoFollow(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(path);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::string data(kMaxCacheFileBytes + 1, '\0');
  int64_t got = 0;
  while (got < static_cast<int64_t>(data.size())) {
    const ssize_t r = read(fd, data.data() + got, data.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += r;
  }
  close(fd);
  if (got > kMaxCacheFileBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is over ", kMaxCacheFileBytes,
                     " bytes; not a cache of choices"));
  }
  data.resize(got);
  return data;
}
ConstDeviceView CView(const Tensor& t) {
  return ConstDeviceView(t.data(), t.shape());
}

}  // namespace

absl::StatusOr<double> TimeConvPasses(Conv2dOp* op) {
  const Conv2dShape& s = op->shape();
  // Values away from zero and denormals: the time does not depend on them.
  const Tensor x = Filled(s.input(), 0.5f), w = Filled(s.filter(), 0.01f),
               b = Filled(s.bias(), 0.1f), dy = Filled(s.output(), 0.25f);
  Tensor y(s.output()), dx(s.input()), dw(s.filter()), db(s.bias());
  double best = 0.0;
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(op->Forward(CView(x), CView(w), CView(b), View(y)));
    RETURN_IF_ERROR(op->BackwardData(CView(dy), CView(w), View(dx)));
    RETURN_IF_ERROR(
        op->BackwardFilter(CView(x), CView(dy), View(dw), View(db)));
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    if (round == 1 || (round > 1 && ms < best)) best = ms;  // round 0: warm
  }
  return best;
}

std::optional<bool> ConvChooser::Cached(const std::string& key) {
  MutexLock lock(&mu_);
  auto it = chosen_.find(key);
  if (it == chosen_.end()) return std::nullopt;
  // A choice the cache file held is noted when first used.
  NoteLocked(key, &it->second);
  return it->second.winograd;
}

void ConvChooser::NoteLocked(const std::string& key, Choice* c) {
  if (c->noted) return;
  c->noted = true;
  notes_.push_back(absl::StrFormat(
      "%s: Winograd %.2f ms, direct %.2f ms%s: %s", key, c->winograd_ms,
      c->direct_ms,
      c->from_file ? absl::StrCat(" (measured before, ", cache_path_, ")") : "",
      c->winograd ? "Winograd" : "direct"));
}

int ConvChooser::UseCacheFile(const std::string& path, const std::string& cpu) {
  const std::string dir = DirectoryOf(path);
  if (absl::Status s = MakeOwnDirectories(dir); !s.ok()) {
    spdlog::warn("conv choices: no cache file ({}); each process measures",
                 std::string(s.message()));
    return 0;
  }
  absl::StatusOr<std::string> data = ReadNoFollow(path);
  if (!data.ok() && !absl::IsNotFound(data.status())) {
    spdlog::warn("conv choices: not using {} ({}); each process measures", path,
                 std::string(data.status().message()));
    return 0;
  }
  MutexLock lock(&mu_);
  cache_path_ = path;
  cpu_ = cpu;
  if (!data.ok()) return 0;
  int taken = 0, line_number = 0;
  for (absl::string_view line : absl::StrSplit(*data, '\n')) {
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    const std::vector<absl::string_view> f = absl::StrSplit(line, '\t');
    Choice c;
    c.from_file = true;
    if (f.size() != 5 || (f[2] != "Winograd" && f[2] != "direct") ||
        !absl::SimpleAtod(f[3], &c.winograd_ms) ||
        !absl::SimpleAtod(f[4], &c.direct_ms)) {
      spdlog::warn(
          "conv choices: {} line {} is not CPU<TAB>shape<TAB>Winograd|direct"
          "<TAB>ms<TAB>ms; passed over",
          path, line_number);
      continue;
    }
    if (f[0] != cpu) continue;  // another CPU's
    c.winograd = f[2] == "Winograd";
    // The first line of a key wins (two processes may both have measured).
    if (chosen_.emplace(std::string(f[1]), c).second) ++taken;
  }
  return taken;
}

void ConvChooser::AppendToFile(const std::string& key, const Choice& c) {
  std::string path, cpu;
  {
    MutexLock lock(&mu_);
    path = cache_path_;
    cpu = cpu_;
  }
  if (path.empty()) return;
  const std::string line = absl::StrFormat("%s\t%s\t%s\t%.3f\t%.3f\n", cpu, key,
                                           c.winograd ? "Winograd" : "direct",
                                           c.winograd_ms, c.direct_ms);
  // One write of one line with O_APPEND: processes appending at once do
  // not interleave their lines.
  const int fd =
      open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
           0644);
  if (fd < 0 || write(fd, line.data(), line.size()) !=
                    static_cast<ssize_t>(line.size())) {
    spdlog::warn("conv choices: cannot append to {}: {}", path,
                 std::strerror(errno));
  }
  if (fd >= 0) close(fd);
}

absl::StatusOr<bool> ConvChooser::Choose(const std::string& key,
                                         Conv2dOp* winograd, Conv2dOp* direct) {
  if (std::optional<bool> cached = Cached(key); cached.has_value()) {
    return *cached;
  }
  // Measured outside the lock (seconds for a large shape); two backends
  // that measure the same shape at once keep the first answer stored.
  ASSIGN_OR_RETURN(const double w_ms, measure_(winograd));
  ASSIGN_OR_RETURN(const double d_ms, measure_(direct));
  // The timing's buffers (a whole batch's activations, several times) are
  // free now, but glibc keeps freed blocks below its mmap threshold in the
  // heap, resident: hand them back, or they stay under the step's arena
  // (cnn10 at batch 256: 0.07 GB of a 1.09 GB peak).
  malloc_trim(0);
  Choice c;
  c.winograd = w_ms < d_ms;
  c.winograd_ms = w_ms;
  c.direct_ms = d_ms;
  bool inserted = false;
  bool use_winograd = false;
  {
    MutexLock lock(&mu_);
    auto emplaced = chosen_.emplace(key, c);
    inserted = emplaced.second;
    NoteLocked(key, &emplaced.first->second);
    use_winograd = emplaced.first->second.winograd;
  }
  if (inserted) AppendToFile(key, c);
  return use_winograd;
}

std::vector<std::string> ConvChooser::Notes() const {
  MutexLock lock(&mu_);
  return notes_;
}

std::string CpuIdentity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "unknown CPU", family = "?", model = "?";
  std::set<std::string> flags;
  const std::set<std::string> wanted = {"avx2",        "fma",      "avx512f",
                                        "avx512_bf16", "amx_bf16", "amx_tile"};
  while (std::getline(in, line)) {
    const std::vector<std::string> kv =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    if (kv.size() != 2) {
      if (line.empty() && !flags.empty()) break;  // the first CPU is enough
      continue;
    }
    const std::string k(absl::StripAsciiWhitespace(kv[0]));
    const std::string v(absl::StripAsciiWhitespace(kv[1]));
    if (k == "model name") name = v;
    if (k == "cpu family") family = v;
    if (k == "model") model = v;
    if (k == "flags") {
      for (absl::string_view f : absl::StrSplit(v, ' ')) {
        if (wanted.count(std::string(f))) flags.insert(std::string(f));
      }
    }
  }
  std::string id = absl::StrCat(name, "; family ", family, " model ", model,
                                "; ", absl::StrJoin(flags, " "));
  for (char& ch : id) {
    if (ch == '\t' || ch == '\n') ch = ' ';
  }
  return id;
}

std::string DefaultConvCachePath() {
  if (const char* p = std::getenv("PSGD_CONV_CACHE"); p != nullptr) {
    const std::string path = p;
    return path == "none" ? "" : path;
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x) {
    return absl::StrCat(x, "/psgd/conv_choices.tsv");
  }
  if (const char* h = std::getenv("HOME"); h != nullptr && *h) {
    return absl::StrCat(h, "/.cache/psgd/conv_choices.tsv");
  }
  return "";
}

ConvChooser* ProcessConvChooser() {
  static ConvChooser* chooser = [] {
    auto* c = new ConvChooser(&TimeConvPasses);
    if (const std::string path = DefaultConvCachePath(); !path.empty()) {
      c->UseCacheFile(path, CpuIdentity());
    }
    return c;
  }();
  return chooser;
}

}  // namespace psgd
