// Metrics of training runs, as the cluster's workers and servers and
// train_local write them: one JSON object per line (JSON Lines), flushed per
// line, so that a run can be followed and plotted while it runs; a
// summary.json at the end; both in a run directory.
//
//   ASSIGN_OR_RETURN(std::string dir, CreateRunDir("", "runs", "train_local",
//                                                  absl::Now()));
//   ASSIGN_OR_RETURN(auto metrics, MetricsWriter::Open(dir +
//   "/metrics.jsonl")); RETURN_IF_ERROR(metrics->Write(JsonObject()
//                                      .Set("kind", "train")
//                                      .Set("step", step)
//                                      .Set("loss", loss)));
//
// Records take arbitrary fields (numbers, strings, booleans), so that each
// process adds its own (pull_s, staleness, ...). Numbers that are not finite
// (NaN, infinities) are written as null, since JSON has no such values.
//
// Thread-safety: JsonObject is a plain value. MetricsWriter::Write may be
// called from several threads; each record is one whole line.
#ifndef PSGD_COMMON_METRICS_H_
#define PSGD_COMMON_METRICS_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/mutex.h"

namespace psgd {

// A flat JSON object whose fields keep the order they were first set in;
// setting a key again replaces its value.
class JsonObject {
 public:
  JsonObject& Set(absl::string_view key, double value);
  JsonObject& Set(absl::string_view key, int64_t value);
  JsonObject& Set(absl::string_view key, int value) {
    return Set(key, static_cast<int64_t>(value));
  }
  JsonObject& Set(absl::string_view key, bool value);
  JsonObject& Set(absl::string_view key, absl::string_view value);
  JsonObject& Set(absl::string_view key, const char* value) {
    return Set(key, absl::string_view(value));
  }
  JsonObject& Set(absl::string_view key, const std::string& value) {
    return Set(key, absl::string_view(value));
  }
  // An array of integers, [1,2,3].
  JsonObject& SetArray(absl::string_view key, absl::Span<const int64_t> values);

  bool empty() const { return fields_.empty(); }
  // {"key":value,...} on one line.
  std::string ToString() const;
  // The same with one field per line.
  std::string ToMultilineString() const;

 private:
  JsonObject& SetEncoded(absl::string_view key, std::string encoded);
  std::string Join(absl::string_view open, absl::string_view separator,
                   absl::string_view close) const;

  std::vector<std::pair<std::string, std::string>> fields_;  // key, JSON text
};

// A JSON string literal for `s`, quoted and escaped.
std::string JsonQuote(absl::string_view s);

class MetricsWriter {
 public:
  // Creates (or truncates) the file; its directory must exist. With
  // `append`, keeps what is there and adds to it (a task restarted after a
  // crash keeps the lines of the one before; a last line cut short is ended
  // first). INTERNAL or NOT_FOUND naming the path when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> Open(
      const std::string& path, bool append = false);
  ~MetricsWriter();

  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Appends `record` as one line and flushes it. INTERNAL naming the path
  // on a write error.
  absl::Status Write(const JsonObject& record);

  const std::string& path() const { return path_; }

 private:
  MetricsWriter(std::string path, std::FILE* file)
      : path_(std::move(path)), file_(file) {}

  const std::string path_;
  // common/mutex.h's rather than absl::Mutex: Debian's Abseil is not built
  // with ThreadSanitizer, which would not see absl::Mutex's ordering.
  Mutex mu_;
  std::FILE* const file_ ABSL_GUARDED_BY(mu_);
};

// Writes `object` (pretty enough: one field per line) to `path` through a
// temporary file and a rename, so that readers never see half a file.
// INTERNAL naming the path on failure.
absl::Status WriteJsonFile(const std::string& path, const JsonObject& object);

// The run directory: `requested` when not empty, else
// `base`/`name`-YYYYMMDD-HHMMSS (local time of `now`). Creates it with its
// parents and returns it; an existing directory is used as it is.
// FAILED_PRECONDITION naming the path when it exists as a file; INTERNAL
// naming it when it cannot be created.
absl::StatusOr<std::string> CreateRunDir(const std::string& requested,
                                         absl::string_view base,
                                         absl::string_view name,
                                         absl::Time now);

// This process's resident memory (VmRSS of /proc/self/status) in bytes; 0
// where it cannot be read.
int64_t ResidentMemoryBytes();

}  // namespace psgd

#endif  // PSGD_COMMON_METRICS_H_
