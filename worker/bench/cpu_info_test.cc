// CpuInfo: /proc/cpuinfo's fields as compute_bench names the CPU.
#include "worker/bench/cpu_info.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace {

// Two processors of an AVX2-only AMD EPYC, as Linux prints them (shortened).
constexpr char kEpyc[] =
    "processor\t: 0\n"
    "vendor_id\t: AuthenticAMD\n"
    "cpu family\t: 25\n"
    "model\t\t: 1\n"
    "model name\t: AMD EPYC\n"
    "flags\t\t: fpu sse2 avx fma avx2\n"
    "\n"
    "processor\t: 1\n"
    "vendor_id\t: AuthenticAMD\n"
    "cpu family\t: 99\n"
    "model\t\t: 98\n"
    "model name\t: another\n"
    "flags\t\t: avx512f\n";

TEST_CASE("the first processor's fields and every processor counted") {
  absl::StatusOr<CpuInfo> cpu = ParseCpuInfo(kEpyc);
  REQUIRE(cpu.ok());
  CHECK(cpu->vendor == "AuthenticAMD");
  CHECK(cpu->model_name == "AMD EPYC");
  CHECK(cpu->family == 25);
  CHECK(cpu->model == 1);
  CHECK(cpu->logical_cores == 2);
  CHECK(cpu->Has("avx2"));
  CHECK_FALSE(cpu->Has("avx512f"));  // the second processor's, not read
  CHECK(cpu->Describe() ==
        "AMD EPYC (family 25 model 1), 2 logical cores; avx2 fma; no avx512f "
        "avx512_bf16 amx_bf16");
}

TEST_CASE("bad cpuinfo is refused naming what is wrong") {
  CHECK(ParseCpuInfo("").status().message() == "cpuinfo names no processor");
  absl::StatusOr<CpuInfo> bad =
      ParseCpuInfo("processor\t: 0\ncpu family\t: twenty\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "cpuinfo line 2: 'cpu family' is not a number: 'twenty'");
  CHECK(absl::IsNotFound(ReadCpuInfo("/nonexistent/cpuinfo").status()));
}

TEST_CASE("this machine's CPU is read") {
  absl::StatusOr<CpuInfo> cpu = ReadCpuInfo();
  REQUIRE(cpu.ok());
  CHECK(cpu->logical_cores >= 1);
  CHECK_FALSE(cpu->Describe().empty());
}

}  // namespace
}  // namespace psgd
