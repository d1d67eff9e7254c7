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
  CHECK_FALSE(
      FirstUnknownVariable({"linear/biases", "linear/weights"}, specs)
          .has_value());
  const absl::optional<std::string> unknown = FirstUnknownVariable(
      {"linear/biases", "conv1/weights", "fc/weights"}, specs);
  REQUIRE(unknown.has_value());
  CHECK(*unknown == "conv1/weights");
}

}  // namespace psgd
