// The parts of the GPU backend that run everywhere: backend names and their
// options, the clear refusal of "gpu:K" where there is no CUDA build or no
// GPU, and the host Adam reference. Not tagged gpu: CI runs it.
#include "worker/gpu/gpu_options.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "worker/backend_factory/factory.h"
#include "worker/gpu/adam.h"
#include "worker/gpu/gpu_backend_factory.h"

namespace psgd {
namespace {

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != absl::string_view::npos;
}

TEST_CASE("gpu backend names parse into options and print back") {
  absl::StatusOr<GpuBackendOptions> o = ParseGpuBackendName("gpu:0");
  REQUIRE(o.ok());
  CHECK(o->device == 0);
  CHECK(!o->tf32);
  CHECK(o->conv_algo == ConvAlgoSearch::kFind);
  CHECK(o->lrn == GpuLrn::kCudnn);
  CHECK(!o->deterministic);
  CHECK(o->workspace_limit_bytes == int64_t{256} << 20);
  CHECK(o->ToString() == "gpu:0");

  o = ParseGpuBackendName(
      "gpu:3:tf32=on,conv_algo=heuristic,lrn=kernel,deterministic=on,"
      "workspace_mb=64");
  REQUIRE(o.ok());
  CHECK(o->device == 3);
  CHECK(o->tf32);
  CHECK(o->conv_algo == ConvAlgoSearch::kHeuristic);
  CHECK(o->lrn == GpuLrn::kKernel);
  CHECK(o->deterministic);
  CHECK(o->workspace_limit_bytes == int64_t{64} << 20);
  const std::string name = o->ToString();
  absl::StatusOr<GpuBackendOptions> again = ParseGpuBackendName(name);
  REQUIRE(again.ok());
  CHECK(again->ToString() == name);
  CHECK(ParseGpuBackendName("gpu:1:tf32=off")->ToString() == "gpu:1");
}

TEST_CASE("bad gpu backend names are refused naming the part") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"gpu", "not a GPU backend name"},
      {"cpu:0", "not a GPU backend name"},
      {"gpu:", "device '' is not a non-negative integer"},
      {"gpu:-1", "device '-1'"},
      {"gpu:x", "device 'x'"},
      {"gpu:0:", "empty option list"},
      {"gpu:0:tf32=maybe", "'tf32=maybe' must be on or off"},
      {"gpu:0:conv_algo=fft", "must be find or heuristic"},
      {"gpu:0:lrn=fast", "must be cudnn or kernel"},
      {"gpu:0:workspace_mb=-5", "a number of MiB"},
      {"gpu:0:speed=max", "unknown option 'speed=max'"},
  };
  for (const auto& [name, part] : cases) {
    INFO(name);
    absl::Status s = ParseGpuBackendName(name).status();
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(s.message(), part));
  }
}

// Where this runs without CUDA or without a GPU (CI), "gpu:K" must say so
// clearly; on a GPU machine gpu:0 is created and gpu:99 does not exist.
TEST_CASE("gpu:K without a build with CUDA or a GPU is a clear refusal") {
  BackendOptions options;
  absl::StatusOr<std::unique_ptr<Backend>> gpu0 =
      CreateBackend("gpu:0", options);
  if (gpu0.ok()) {
    CHECK((*gpu0)->name() == "gpu:0");
  } else {
    INFO(gpu0.status().ToString());
    CHECK(gpu0.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(Contains(gpu0.status().message(), "gpu:0"));
    CHECK((Contains(gpu0.status().message(), "cudaGetDeviceCount") ||
           Contains(gpu0.status().message(), "this build has no CUDA")));
  }
  absl::Status s = CreateBackend("gpu:99", options).status();
  INFO(s.ToString());
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Contains(s.message(), "gpu:99"));
  GpuBackendOptions direct;
  direct.device = 99;
  CHECK(CreateGpuBackend(direct).status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("the host Adam reference follows torch.optim.Adam") {
  gpu::AdamParams p;
  p.learning_rate = 0.1f;
  std::vector<float> w = {1.0f, -2.0f}, g = {0.5f, -0.25f}, m(2), v(2);
  gpu::AdamUpdateReference(p, 1, absl::MakeSpan(w), g, absl::MakeSpan(m),
                           absl::MakeSpan(v));
  // Step 1: m_hat = g, v_hat = g^2, so each weight moves by lr * sign(g).
  CHECK(w[0] == Approx(0.9).epsilon(1e-5));
  CHECK(w[1] == Approx(-1.9).epsilon(1e-5));
  CHECK(m[0] == Approx(0.05));
  CHECK(v[0] == Approx(0.001 * 0.25).epsilon(1e-4));  // 1 - 0.999f
  const AdamStep c = gpu::ComputeAdamStepConstants(p, 2);
  CHECK(c.step_size == Approx(0.1 / (1 - 0.81)));
  CHECK(c.sqrt_v_scale == Approx(1.0 / std::sqrt(1 - 0.999 * 0.999)));
}

}  // namespace
}  // namespace psgd
