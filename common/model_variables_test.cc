#include "common/model_variables.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace {

TEST_CASE("the cifar10 tutorial model has 1,068,298 parameters") {
  std::vector<VariableSpec> v = Cifar10TutorialVariables();
  REQUIRE(ValidateVariableSpecs(v).ok());
  CHECK(v.size() == 10);
  CHECK(TotalParameters(v) == 1068298);
  CHECK(v[4].name == "local3/weights");
  CHECK(v[4].shape == Shape{2304, 384});
}

TEST_CASE("the cifar10 linear model has 17,290 parameters") {
  std::vector<VariableSpec> v = Cifar10LinearVariables();
  REQUIRE(ValidateVariableSpecs(v).ok());
  CHECK(v.size() == 2);
  CHECK(TotalParameters(v) == 17290);
  CHECK(v[0].shape == Shape{1728, 10});
}

TEST_CASE("variable lists with duplicates, empty names or bad shapes fail") {
  std::vector<VariableSpec> v = {{"a", {2}, {}}, {"a", {3}, {}}};
  absl::Status s = ValidateVariableSpecs(v);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() == "variable 'a' appears twice");
  CHECK(!ValidateVariableSpecs({{"", {2}, {}}}).ok());
  absl::Status bad = ValidateVariableSpecs({{"w", {2, 0}, {}}});
  CHECK(bad.message().find("variable 'w'") != absl::string_view::npos);
}

}  // namespace
TEST_CASE("FirstUnknownVariable names the first name that is not a variable") {
  const std::vector<VariableSpec> specs = Cifar10LinearVariables();
  CHECK_FALSE(FirstUnknownVariable({}, specs).has_value());
  CHECK_FALSE(FirstUnknownVariable({"linear/biases", "linear/weights"}, specs)
                  .has_value());
  const absl::optional<std::string> unknown = FirstUnknownVariable(
      {"linear/biases", "conv1/weights", "fc/weights"}, specs);
  REQUIRE(unknown.has_value());
  CHECK(*unknown == "conv1/weights");
}

TEST_CASE("a variable's kind is a field, not its name") {
  VariableSpec named_like_one{"bn1.running_mean", {3}, Initializer()};
  CHECK_FALSE(named_like_one.is_statistic());
  VariableSpec statistic{
      "anything", {3}, Initializer(), VariableKind::kRunningStatistic};
  CHECK(statistic.is_statistic());
  CHECK(statistic.variable() == "anything");
  statistic.slice_of = SliceOf{"whole", 2, 10};
  CHECK(statistic.variable() == "whole");
  CHECK(std::string(VariableKindName(VariableKind::kRunningStatistic)) ==
        "running statistic");
}

TEST_CASE("the fold is PyTorch's: 0.9 * running + 0.1 * batch in float32") {
  const float running[3] = {0.0f, 1.0f, -2.5f};
  const float batch[3] = {1.0f, 3.0f, 0.5f};
  float out[3];
  FoldRunningStatistic(running, batch, 3, out);
  for (int i = 0; i < 3; ++i) {
    CHECK(out[i] == (1.0f - 0.1f) * running[i] + 0.1f * batch[i]);
  }
  CHECK(out[1] == Approx(1.2f));
  FoldRunningStatistic(out, batch, 3, out);  // in place
  CHECK(out[0] == Approx(0.19f));
}

}  // namespace psgd
