// The emulated model computes nothing: its step takes the drawn compute time
// and gives zero gradients of the model's real sizes whatever the batch (it
// never reads the images or the labels: here they are unreadable memory and
// labels no model accepts), and it refuses to evaluate.
#include "worker/models/emulated_model.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace psgd {
namespace {

TEST_CASE("an emulated step never reads its batch and gives zero gradients") {
  int draws = 0;
  absl::StatusOr<std::unique_ptr<EmulatedModel>> model =
      EmulatedModel::Create("resnet20", [&draws] {
        ++draws;
        return absl::ZeroDuration();
      });
  REQUIRE(model.ok());
  Shape batch_shape = {4};
  for (int64_t d : (*model)->image_shape()) batch_shape.push_back(d);
  // No memory behind the images, and labels far out of [0, 10): a model that
  // looked at either would crash or refuse.
  const ConstTensorView images(nullptr, batch_shape);
  const std::vector<int32_t> labels = {-7, 1000, 10, -1};
  NamedTensors gradients;
  absl::StatusOr<StepResult> r =
      (*model)->ComputeGradients(NamedConstViews{}, images, labels, &gradients);
  REQUIRE(r.ok());
  CHECK(draws == 1);
  CHECK(r->examples == 4);
  CHECK(r->loss == 0.0);
  REQUIRE(gradients.size() == (*model)->variables().size());
  for (const VariableSpec& v : (*model)->variables()) {
    const Tensor& g = gradients.at(v.name);
    CHECK(g.shape() == v.shape);
    for (int64_t i = 0; i < g.size(); ++i) REQUIRE(g.data()[i] == 0.0f);
  }
  CHECK_FALSE((*model)->Evaluate(NamedConstViews{}, images, labels).ok());
}

}  // namespace
}  // namespace psgd
