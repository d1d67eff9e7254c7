// A CPU backend of one thread computes on one thread: a ResNet-20 training
// step and an evaluation start no thread in the process (oneDNN's
// primitives take their OpenMP thread count when they are made, so a
// cluster worker of `threads: 1` beside another on two cores used to run
// every convolution and batch norm on two threads: four busy threads on
// two cores).
//
// Its own binary: OpenMP's threads, once started by another test, stay.
#include <catch2/catch.hpp>
#include <filesystem>
#include <vector>

#include "common/model_variables.h"
#include "worker/backend_factory/factory.h"
#include "worker/models/initialize.h"
#include "worker/models/registry.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Unwrap;

int ProcessThreads() {
  int n = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

TEST_CASE("threads 1: a training step and an evaluation on one thread") {
  // Libraries may start threads of their own when loaded (OpenBLAS's
  // pool): what counts is that the step adds none.
  const int before = ProcessThreads();
  BackendOptions options;
  options.threads = 1;
  auto backend = Unwrap(CreateBackend("cpu", options));
  auto model = Unwrap(CreateModel("resnet20", backend.get()));
  NamedTensors weights = InitialValues(model->variables(), 3);
  constexpr int kBatch = 4;
  const std::vector<float> pixels =
      testing::RandomValues(kBatch * 3 * 32 * 32, 5, -1, 1);
  Tensor images = Unwrap(Tensor::FromVector({kBatch, 3, 32, 32}, pixels));
  const std::vector<int32_t> labels = {0, 1, 2, 3};
  NamedTensors grads;
  Unwrap(
      model->ComputeGradients(ViewsOf(weights), images.view(), labels, &grads));
  Unwrap(model->Evaluate(ViewsOf(weights), images.view(), labels));
  CHECK(ProcessThreads() == before);
}

}  // namespace
}  // namespace psgd
