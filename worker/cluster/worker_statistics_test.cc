// Where a cluster worker's batch norm statistics go (WorkerStatistics): on
// the servers, session variables after the model's with the batch
// statistics in every push; LOCAL, the model's own, saved and read back; a
// model without state, nothing.
#include "worker/cluster/worker_statistics.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace psgd {
namespace {

// A model with one batch norm's statistics (or none); its state and batch
// statistics are set by the test.
class StatefulModel : public Model {
 public:
  explicit StatefulModel(bool with_state) {
    if (with_state) {
      state_specs_ = {{"bn.running_mean", {2}, Initializer::Constant(0)},
                      {"bn.running_var", {2}, Initializer::Constant(1)}};
      SetTo(&state_, 0.0f);
      SetTo(&batch_, 5.0f);
    }
  }
  std::string name() const override { return "stateful"; }
  const std::vector<VariableSpec>& variables() const override { return vars_; }
  Shape image_shape() const override { return {1, 1, 1}; }
  int64_t num_classes() const override { return 2; }
  absl::StatusOr<StepResult> ComputeGradients(const NamedConstViews&,
                                              ConstTensorView,
                                              absl::Span<const int32_t>,
                                              NamedTensors*) override {
    return StepResult{};
  }
  const std::vector<VariableSpec>& state() const override {
    return state_specs_;
  }
  absl::Status GetState(NamedTensors* out) override {
    for (const auto& [name, t] : state_) out->insert_or_assign(name, t.Clone());
    return absl::OkStatus();
  }
  absl::Status SetState(const NamedConstViews& state) override {
    for (const auto& [name, v] : state) {
      Tensor t(v.shape());
      std::copy(v.data(), v.data() + t.size(), t.data());
      state_.insert_or_assign(name, std::move(t));
    }
    return absl::OkStatus();
  }
  absl::Status GetBatchStatistics(NamedTensors* out) override {
    for (const auto& [name, t] : batch_) out->insert_or_assign(name, t.Clone());
    return absl::OkStatus();
  }
  absl::StatusOr<StepResult> Evaluate(const NamedConstViews&, ConstTensorView,
                                      absl::Span<const int32_t>) override {
    return StepResult{};
  }
  absl::Status Logits(const NamedConstViews&, ConstTensorView,
                      TensorView) override {
    return absl::OkStatus();
  }

  void SetTo(NamedTensors* t, float value) {
    for (const VariableSpec& s : state_specs_) {
      t->insert_or_assign(s.name, *Tensor::FromVector({2}, {value, value}));
    }
  }
  float StateValue(const std::string& name) {
    return state_.at(name).data()[0];
  }

  NamedTensors state_;
  NamedTensors batch_;

 private:
  std::vector<VariableSpec> vars_ = {{"w", {2}, Initializer::Constant(0)}};
  std::vector<VariableSpec> state_specs_;
};

std::string Path(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/worker_stats";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/" + name);
  return dir + "/" + name;
}

TEST_CASE(
    "on the servers: session variables after the model's, the batch "
    "statistics in each push, the pulled ones for evaluation") {
  StatefulModel model(/*with_state=*/true);
  WorkerStatistics stats(&model, {/*on_servers=*/true, "", 100, 0, 1});
  REQUIRE(stats.on_servers());
  CHECK(stats.session_variables() == 2);
  std::vector<VariableSpec> variables = model.variables();
  std::vector<ps::NamedTensorView> buffers;
  REQUIRE(stats.Prepare(&variables, &buffers).ok());
  REQUIRE(variables.size() == 3);
  CHECK(variables[1].name == "bn.running_mean");
  CHECK(variables[2].name == "bn.running_var");
  REQUIRE(buffers.size() == 2);
  std::vector<ps::NamedConstTensorView> initial;
  stats.AppendInitial(&initial);
  REQUIRE(initial.size() == 2);
  CHECK(initial[1].view.data()[0] == 1.0f);  // running_var starts at 1

  REQUIRE(stats.TakeBatch().ok());
  std::vector<ps::NamedConstTensorView> push;
  stats.AppendPush(&push);
  REQUIRE(push.size() == 2);
  CHECK(push[0].name == "bn.running_mean");
  CHECK(push[0].view.data()[0] == 5.0f);

  // A pull wrote the servers' statistics into the buffers.
  buffers[0].view.data()[0] = 0.25f;
  REQUIRE(stats.BeforeEvaluation().ok());
  CHECK(model.StateValue("bn.running_mean") == 0.25f);
}

TEST_CASE(
    "LOCAL: nothing in the session or the push; saved every N steps "
    "and read back by the next process") {
  const std::string path = Path("local");
  StatefulModel model(/*with_state=*/true);
  WorkerStatistics stats(&model, {/*on_servers=*/false, path, 2, 0, 1});
  CHECK_FALSE(stats.on_servers());
  CHECK(stats.session_variables() == 0);
  std::vector<VariableSpec> variables = model.variables();
  std::vector<ps::NamedTensorView> buffers;
  REQUIRE(stats.Prepare(&variables, &buffers).ok());  // no file yet
  CHECK(variables.size() == 1);
  CHECK(buffers.empty());
  REQUIRE(stats.TakeBatch().ok());
  std::vector<ps::NamedConstTensorView> push;
  stats.AppendPush(&push);
  CHECK(push.empty());

  model.SetTo(&model.state_, 3.0f);
  REQUIRE(stats.AfterStep(1).ok());
  CHECK_FALSE(std::filesystem::exists(path));
  REQUIRE(stats.AfterStep(2).ok());
  REQUIRE(std::filesystem::exists(path));

  StatefulModel restarted(/*with_state=*/true);
  WorkerStatistics again(&restarted, {/*on_servers=*/false, path, 2, 0, 1});
  REQUIRE(again.Prepare(&variables, &buffers).ok());
  CHECK(restarted.StateValue("bn.running_var") == 3.0f);
}

TEST_CASE("a model without batch norm: nothing anywhere") {
  StatefulModel model(/*with_state=*/false);
  WorkerStatistics stats(&model, {/*on_servers=*/true, Path("none"), 1, 0, 1});
  CHECK_FALSE(stats.on_servers());
  std::vector<VariableSpec> variables = model.variables();
  std::vector<ps::NamedTensorView> buffers;
  REQUIRE(stats.Prepare(&variables, &buffers).ok());
  CHECK(variables.size() == 1);
  std::vector<ps::NamedConstTensorView> push;
  REQUIRE(stats.TakeBatch().ok());
  stats.AppendPush(&push);
  CHECK(push.empty());
  REQUIRE(stats.AfterStep(1).ok());
  CHECK_FALSE(std::filesystem::exists(Path("none")));
}

}  // namespace
}  // namespace psgd
