#include "worker/bench/flops.h"

#include <catch2/catch.hpp>

#include "worker/models/network.h"

namespace psgd {
namespace {

TEST_CASE("a network's training FLOPs count conv and dense layers") {
  NetworkBuilder b("tiny", {3, 8, 8}, 10, 0.0f);
  int x = b.Conv(b.input(), "conv1", 4, 3, 1, 1);  // reads the images
  x = b.Relu(b.BatchNorm(x, "bn1"));
  x = b.Conv(x, "conv2", 6, 3, /*stride=*/2, 1);  // 8x8 -> 4x4
  x = b.Dense(b.GlobalAvgPool(x), "fc", 10);
  absl::StatusOr<NetworkSpec> spec = std::move(b).Build();
  REQUIRE(spec.ok());
  // conv1: forward and weight gradient, no input gradient.
  const double conv1 = 2.0 * (4 * 8 * 8) * 3 * 9;
  // conv2: 6 x 4 x 4 outputs of 4 x 3 x 3 multiply-adds, three times.
  const double conv2 = 2.0 * (6 * 4 * 4) * 4 * 9;
  const double fc = 2.0 * 6 * 10;
  CHECK(NetworkTrainingFlopsPerImage(*spec) ==
        Approx(2 * conv1 + 3 * conv2 + 3 * fc));
}

}  // namespace
}  // namespace psgd
