#include "worker/gpu/gpu_options.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace psgd {
namespace {

absl::Status BadValue(absl::string_view name, absl::string_view item,
                      absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat(
      "backend '", name, "': option '", item, "' must be ", expected));
}

absl::StatusOr<bool> ParseOnOff(absl::string_view name, absl::string_view item,
                                absl::string_view value) {
  if (value == "on") return true;
  if (value == "off") return false;
  return BadValue(name, item, "on or off");
}

}  // namespace

std::string GpuBackendOptions::ToString() const {
  const GpuBackendOptions defaults;
  std::vector<std::string> parts;
  if (tf32 != defaults.tf32) parts.push_back(tf32 ? "tf32=on" : "tf32=off");
  if (conv_algo != defaults.conv_algo) {
    parts.push_back(conv_algo == ConvAlgoSearch::kFind ? "conv_algo=find"
                                                       : "conv_algo=heuristic");
  }
  if (lrn != defaults.lrn) {
    parts.push_back(lrn == GpuLrn::kCudnn ? "lrn=cudnn" : "lrn=kernel");
  }
  if (deterministic != defaults.deterministic) {
    parts.push_back(deterministic ? "deterministic=on" : "deterministic=off");
  }
  if (workspace_limit_bytes != defaults.workspace_limit_bytes) {
    parts.push_back(absl::StrCat("workspace_mb=", workspace_limit_bytes >> 20));
  }
  std::string name = absl::StrCat("gpu:", device);
  if (!parts.empty()) absl::StrAppend(&name, ":", absl::StrJoin(parts, ","));
  return name;
}

absl::StatusOr<GpuBackendOptions> ParseGpuBackendName(absl::string_view name) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, "gpu:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a GPU backend name: '", name, "' (expected gpu:K)"));
  }
  std::pair<absl::string_view, absl::string_view> device_and_options =
      absl::StrSplit(rest, absl::MaxSplits(':', 1));
  GpuBackendOptions options;
  if (!absl::SimpleAtoi(device_and_options.first, &options.device) ||
      options.device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend '", name, "': device '", device_and_options.first,
                     "' is not a non-negative integer"));
  }
  if (rest.size() == device_and_options.first.size()) return options;
  if (device_and_options.second.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend '", name, "': empty option list after the device"));
  }
  for (absl::string_view item :
       absl::StrSplit(device_and_options.second, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = kv.first, value = kv.second;
    if (key == "tf32") {
      absl::StatusOr<bool> on = ParseOnOff(name, item, value);
      if (!on.ok()) return on.status();
      options.tf32 = *on;
    } else if (key == "deterministic") {
      absl::StatusOr<bool> on = ParseOnOff(name, item, value);
      if (!on.ok()) return on.status();
      options.deterministic = *on;
    } else if (key == "conv_algo") {
      if (value == "find") {
        options.conv_algo = ConvAlgoSearch::kFind;
      } else if (value == "heuristic") {
        options.conv_algo = ConvAlgoSearch::kHeuristic;
      } else {
        return BadValue(name, item, "find or heuristic");
      }
    } else if (key == "lrn") {
      if (value == "cudnn") {
        options.lrn = GpuLrn::kCudnn;
      } else if (value == "kernel") {
        options.lrn = GpuLrn::kKernel;
      } else {
        return BadValue(name, item, "cudnn or kernel");
      }
    } else if (key == "workspace_mb") {
      int64_t mb = 0;
      if (!absl::SimpleAtoi(value, &mb) || mb < 0 || mb > (int64_t{1} << 20)) {
        return BadValue(name, item, "a number of MiB in [0, 1048576]");
      }
      options.workspace_limit_bytes = mb << 20;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "backend '", name, "': unknown option '", item,
          "' (known: tf32, conv_algo, lrn, deterministic, workspace_mb)"));
    }
  }
  return options;
}

}  // namespace psgd
