#include "worker/bench/cpu_info.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"

namespace psgd {

std::string CpuInfo::Describe() const {
  std::vector<std::string> has, lacks;
  for (const char* f : {"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16"}) {
    (Has(f) ? has : lacks).push_back(f);
  }
  std::string line = absl::StrCat(
      model_name.empty() ? "unknown CPU" : model_name, " (family ", family,
      " model ", model, "), ", logical_cores, " logical cores");
  if (!has.empty()) absl::StrAppend(&line, "; ", absl::StrJoin(has, " "));
  if (!lacks.empty())
    absl::StrAppend(&line, "; no ", absl::StrJoin(lacks, " "));
  return line;
}

absl::StatusOr<CpuInfo> ParseCpuInfo(absl::string_view text) {
  CpuInfo info;
  bool first = true;  // the first processor's fields
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      continue;
    }
    const absl::string_view key =
        absl::StripAsciiWhitespace(line.substr(0, colon));
    const absl::string_view value =
        absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (key == "processor") {
      first = info.logical_cores == 0;
      ++info.logical_cores;
      continue;
    }
    if (!first) continue;
    auto number = [&](int* out) -> absl::Status {
      if (!absl::SimpleAtoi(value, out)) {
        return absl::InvalidArgumentError(
            absl::StrCat("cpuinfo line ", line_number, ": '", key,
                         "' is not a number: '", value, "'"));
      }
      return absl::OkStatus();
    };
    if (key == "vendor_id") {
      info.vendor = std::string(value);
    } else if (key == "model name") {
      info.model_name = std::string(value);
    } else if (key == "cpu family") {
      if (absl::Status s = number(&info.family); !s.ok()) return s;
    } else if (key == "model") {
      if (absl::Status s = number(&info.model); !s.ok()) return s;
    } else if (key == "flags") {
      for (absl::string_view f :
           absl::StrSplit(value, ' ', absl::SkipEmpty())) {
        info.flags.insert(std::string(f));
      }
    }
  }
  if (info.logical_cores == 0) {
    return absl::InvalidArgumentError("cpuinfo names no processor");
  }
  return info;
}

absl::StatusOr<CpuInfo> ReadCpuInfo(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::NotFoundError(
        absl::StrCat("cannot read ", path, ": ", text.status().message()));
  }
  return ParseCpuInfo(*text);
}

}  // namespace psgd
