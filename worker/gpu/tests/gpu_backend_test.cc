// The GPU backend as a whole: creation by name and the refusal of devices
// that do not exist, zero-filled memory, copies through the pinned staging
// ring (many uploads in flight, sizes that force it to wrap and to grow),
// count checks, and the plan notes.
#include "worker/gpu/gpu_backend.h"

#include <catch2/catch.hpp>

#include "worker/backend_factory/factory.h"
#include "worker/gpu/tests/gpu_testing.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Download;
using testing::Unwrap;
using testing::Upload;

TEST_CASE("gpu backends are created by name; missing devices are refused") {
  auto gpu = testing::MakeGpuBackend("gpu:0");
  CHECK(gpu->name() == "gpu:0");
  CHECK(IsGpuBackend(*gpu));
  CHECK(!GpuDescription(*gpu).empty());
  auto tf32 = testing::MakeGpuBackend("gpu:0:tf32=on,lrn=kernel");
  CHECK(tf32->name() == "gpu:0:tf32=on,lrn=kernel");
  absl::Status s = CreateBackend("gpu:99", BackendOptions()).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message().find("device 99 does not exist") !=
        absl::string_view::npos);
  auto cpu = testing::MakeBackend("cpu");
  CHECK(!IsGpuBackend(*cpu));
  CHECK(GpuDescription(*cpu).empty());
}

TEST_CASE("gpu memory is zeroed and copies round-trip through staging") {
  auto gpu = testing::MakeGpuBackend("gpu:0");
  DeviceTensor t = Unwrap(gpu->Allocate({3, 5}));
  CHECK(t.size() == 15);
  CHECK(Download(gpu.get(), t.view()) == std::vector<float>(15, 0.0f));
  CHECK(gpu->Allocate({2, 0}).status().code() ==
        absl::StatusCode::kInvalidArgument);

  // 48 uploads of 1 MiB in a row (the staging ring of 16 MiB wraps), then
  // one of 40 MiB (it grows), all read back.
  const int64_t mib = (1 << 20) / sizeof(float);
  std::vector<DeviceTensor> tensors;
  std::vector<std::vector<float>> values;
  for (int i = 0; i < 48; ++i) {
    values.push_back(testing::RandomValues(mib, 100 + i, -1, 1));
    tensors.push_back(Upload(gpu.get(), values.back(), {mib}));
  }
  values.push_back(testing::RandomValues(40 * mib, 7, -1, 1));
  tensors.push_back(Upload(gpu.get(), values.back(), {40 * mib}));
  REQUIRE_OK(gpu->Synchronize());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO(i);
    CHECK(Download(gpu.get(), tensors[i].view()) == values[i]);
  }
  // The host buffer may change right after CopyToDevice returns.
  std::vector<float> host(1000, 1.0f);
  DeviceTensor d = Unwrap(gpu->Allocate({1000}));
  REQUIRE_OK(gpu->CopyToDevice(ConstTensorView(host.data(), {1000}), d.view()));
  std::fill(host.begin(), host.end(), 2.0f);
  CHECK(Download(gpu.get(), d.view()) == std::vector<float>(1000, 1.0f));

  std::vector<float> small(4);
  CHECK(gpu->CopyToHost(t.view(), TensorView(small.data(), {4})).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(
      gpu->CopyToDevice(ConstTensorView(small.data(), {4}), t.view()).code() ==
      absl::StatusCode::kInvalidArgument);
  DeviceTensor moved = std::move(t);
  CHECK(moved.size() == 15);
}

TEST_CASE("gpu plans note what they chose") {
  auto gpu = testing::MakeGpuBackend("gpu:0");
  CHECK(GpuPlanNotes(*gpu).empty());
  auto conv = Unwrap(gpu->CreateConv2d({2, 3, 8, 8, 4, 5, 5}));
  auto lrn = Unwrap(gpu->CreateLrn({2, 16, 8, 8, LrnParams()}));
  const std::vector<std::string> notes = GpuPlanNotes(*gpu);
  REQUIRE(notes.size() == 2);
  CHECK(notes[0].find("forward algo") != std::string::npos);
  CHECK(notes[0].find("fma math") != std::string::npos);
  CHECK(notes[1].find("cuDNN") != std::string::npos);
}

}  // namespace
}  // namespace psgd
