// What CPU a figure was measured on, as /proc/cpuinfo names it: the model
// name, family and model (AMD's and Intel's numbers), the cores, and the
// vector extensions the CPU kernels choose by. compute_bench prints it
// beside every figure (docs/PERFORMANCE.md keeps one table per CPU).
//
//   absl::StatusOr<CpuInfo> cpu = ReadCpuInfo();   // /proc/cpuinfo
//   std::printf("%s\n", cpu->Describe().c_str());
//   // AMD EPYC (family 25 model 1), 2 logical cores; avx2 fma, no avx512f
//   // avx512_bf16 amx_bf16
//
// Thread-safety: plain functions and values.
#ifndef PSGD_WORKER_BENCH_CPU_INFO_H_
#define PSGD_WORKER_BENCH_CPU_INFO_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psgd {

struct CpuInfo {
  std::string vendor;           // vendor_id: AuthenticAMD, GenuineIntel
  std::string model_name;       // "model name"
  int family = -1;              // "cpu family"
  int model = -1;               // "model"
  int logical_cores = 0;        // processor entries
  std::set<std::string> flags;  // of the first processor

  bool Has(absl::string_view flag) const {
    return flags.count(std::string(flag)) > 0;
  }
  // One line: model name, family and model, cores, and which of avx2, fma,
  // avx512f, avx512_bf16, amx_bf16 it has and has not.
  std::string Describe() const;
};

// Parses the text of /proc/cpuinfo (x86's "key\t: value" lines, processors
// separated by blank lines). INVALID_ARGUMENT when there is no processor
// entry or a number field is not a number.
absl::StatusOr<CpuInfo> ParseCpuInfo(absl::string_view text);

// ParseCpuInfo of the file at `path`; NOT_FOUND naming it when unreadable.
absl::StatusOr<CpuInfo> ReadCpuInfo(const std::string& path = "/proc/cpuinfo");

}  // namespace psgd

#endif  // PSGD_WORKER_BENCH_CPU_INFO_H_
