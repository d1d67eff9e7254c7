// The CPU backend as a whole: creation by name, options, memory and copies.
// The ops have their own tests (conv2d_test, pooling_test, ...).
#include "worker/cpu/cpu_backend.h"

#include <catch2/catch.hpp>

#include "worker/backend_factory/factory.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Unwrap;

TEST_CASE("backends are created by name; bad names are refused clearly") {
  BackendOptions options;
  for (const std::string& name : testing::CpuBackendNames()) {
    auto backend = Unwrap(CreateBackend(name, options));
    CHECK(backend->name() == "cpu");
  }
  absl::Status s = CreateBackend("tpu", options).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("unknown backend 'tpu'") != absl::string_view::npos);
  s = CreateBackend("cpu:conv=fft", options).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("'conv=fft'") != absl::string_view::npos);
  CHECK(CreateBackend("cpu:", options).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // gpu:K works only with CUDA and a GPU (worker/gpu has its tests).
  absl::StatusOr<std::unique_ptr<Backend>> gpu =
      CreateBackend("gpu:0", options);
  CHECK((gpu.ok() ||
         gpu.status().code() == absl::StatusCode::kFailedPrecondition));
  CHECK(CreateBackend("gpu:x", options).status().code() ==
        absl::StatusCode::kInvalidArgument);
  options.threads = -1;
  CHECK(CreateBackend("cpu", options).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("cpu backend names parse into options") {
  CpuBackendOptions o = Unwrap(ParseCpuBackendName("cpu", 3));
  CHECK(o.threads == 3);
  CHECK(o.conv == ConvAlgorithm::kWinograd);
  CHECK(o.gemm == GemmLibrary::kOneDnn);
  CHECK(Unwrap(ParseCpuBackendName("cpu:conv=onednn", 1)).conv ==
        ConvAlgorithm::kOneDnn);
  CHECK(Unwrap(ParseCpuBackendName("cpu:conv=winograd", 1)).conv ==
        ConvAlgorithm::kWinograd);
  CHECK(RunsWinograd(Unwrap(ParseCpuBackendName("cpu", 1))) ==
        static_cast<bool>(__builtin_cpu_supports("avx512f")));
  for (const char* name : {"cpu:conv=onednn", "cpu:compute=bf16",
                           "cpu:layout=plain", "cpu:conv=im2col"}) {
    INFO(name);
    CHECK_FALSE(RunsWinograd(Unwrap(ParseCpuBackendName(name, 1))));
  }
  CHECK(o.pool == ThreadPool::Runtime::kOpenMp);
  o = Unwrap(
      ParseCpuBackendName("cpu:gemm=openblas,conv=im2col,pool=threads", 1));
  CHECK(o.conv == ConvAlgorithm::kIm2col);
  CHECK(o.gemm == GemmLibrary::kOpenBlas);
  CHECK(o.pool == ThreadPool::Runtime::kOwnThreads);
}

TEST_CASE("memory is zeroed, aligned, and copies round-trip") {
  auto backend = testing::MakeBackend("cpu");
  DeviceTensor t = Unwrap(backend->Allocate({3, 5}));
  CHECK(t.size() == 15);
  CHECK(reinterpret_cast<uintptr_t>(t.view().data()) % 64 == 0);
  CHECK(testing::Download(backend.get(), t.view()) ==
        std::vector<float>(15, 0.0f));
  std::vector<float> values(15);
  for (int i = 0; i < 15; ++i) values[i] = i * 0.5f;
  REQUIRE_OK(
      backend->CopyToDevice(ConstTensorView(values.data(), {15}), t.view()));
  REQUIRE_OK(backend->Synchronize());
  CHECK(testing::Download(backend.get(), t.view()) == values);
  // A view may be reshaped; element counts must agree for copies.
  CHECK(t.view().Reshaped({15}).size() == 15);
  std::vector<float> small(4);
  CHECK(backend->CopyToHost(t.view(), TensorView(small.data(), {4})).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(backend->CopyToDevice(ConstTensorView(small.data(), {4}), t.view())
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK(backend->Allocate({2, 0}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // Moving keeps ownership single.
  DeviceTensor moved = std::move(t);
  CHECK(moved.size() == 15);
}

}  // namespace
}  // namespace psgd
