// The checks of a pushed gradient made before the shard's mutex is taken,
// with no shard around them: what each refuses, the message that names
// it, and where the checked values are copied.
#include "ps/shard/push_checks.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ps/testing/shard_test_util.h"

namespace psgd {
namespace ps {
namespace {

using testing::ShapeB;
using testing::ShapeW;
using testing::TwoVariables;

// A layout of "w" (2, 3), a trained parameter, and "b" (2), declared a
// running statistic.
std::shared_ptr<const VariableLayout> LayoutWithStatistic() {
  TwoVariables v = TwoVariables::Constant(1.0f, 1.0f);
  std::vector<TensorBytes> tensors = v.Bytes();
  tensors[1].kind = VariableKind::kRunningStatistic;
  auto store = VariableStore::Create(tensors);
  REQUIRE(store.ok());
  return (*store)->shared_layout();
}

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

TEST_CASE("CheckPushedTensors refuses a NaN and names its kind") {
  ThreadPool pool(2);
  TwoVariables g = TwoVariables::Constant(0.25f, -0.5f);
  std::vector<float*> no_copy(2, nullptr);
  int layout_calls = 0;
  std::shared_ptr<const VariableLayout> layout = LayoutWithStatistic();
  auto source = [&]() {
    ++layout_calls;
    return layout;
  };

  SECTION("all finite: every tensor passes, and the layout is not read") {
    std::vector<absl::Status> s =
        CheckPushedTensors(g.Bytes(), no_copy, &pool, source);
    REQUIRE(s.size() == 2);
    CHECK(s[0].ok());
    CHECK(s[1].ok());
    CHECK(layout_calls == 0);
  }
  SECTION("a NaN in a parameter's gradient is refused as a gradient") {
    g.w[4] = std::numeric_limits<float>::quiet_NaN();
    std::vector<absl::Status> s =
        CheckPushedTensors(g.Bytes(), no_copy, &pool, source);
    CHECK(s[0].code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(s[0], "gradient"));
    CHECK(Contains(s[0], "'w'"));
    CHECK_FALSE(Contains(s[0], "batch statistic"));
    CHECK(s[1].ok());
  }
  SECTION("a NaN in a statistic's value is refused as a batch statistic") {
    g.b[1] = std::numeric_limits<float>::infinity();
    std::vector<absl::Status> s =
        CheckPushedTensors(g.Bytes(), no_copy, &pool, source);
    CHECK(s[0].ok());
    CHECK(s[1].code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(s[1], "batch statistic"));
    CHECK(Contains(s[1], "'b'"));
    CHECK(layout_calls == 1);
  }
  SECTION("before the shard has a layout, a refusal is named a gradient") {
    g.b[0] = std::numeric_limits<float>::quiet_NaN();
    std::vector<absl::Status> s = CheckPushedTensors(
        g.Bytes(), no_copy, &pool,
        []() { return std::shared_ptr<const VariableLayout>(); });
    CHECK(s[1].code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(s[1], "gradient"));
  }
}

TEST_CASE("CheckPushedTensors copies the checked values where asked") {
  ThreadPool pool(2);
  TwoVariables g = testing::ExactGradient(1, 3);
  std::vector<float> w_copy(6, -7.0f);
  std::vector<float*> copy_to = {w_copy.data(), nullptr};
  std::vector<absl::Status> s = CheckPushedTensors(
      g.Bytes(), copy_to, &pool,
      []() { return std::shared_ptr<const VariableLayout>(); });
  REQUIRE(s[0].ok());
  REQUIRE(s[1].ok());
  CHECK(w_copy == g.w);
}

TEST_CASE("A tensor marked without a gradient carries no bytes") {
  ThreadPool pool(1);
  TwoVariables g = TwoVariables::Constant(0.5f, 0.5f);
  std::vector<TensorBytes> tensors = g.Bytes();
  std::vector<float*> no_copy(2, nullptr);
  auto no_layout = []() { return std::shared_ptr<const VariableLayout>(); };

  SECTION("with bytes: refused, naming the byte count") {
    tensors[0].no_gradient = true;
    std::vector<absl::Status> s =
        CheckPushedTensors(tensors, no_copy, &pool, no_layout);
    CHECK(s[0].code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(s[0], "without a gradient"));
    CHECK(Contains(s[0], "24 bytes"));
    CHECK(s[1].ok());
  }
  SECTION("name and shape only: passes") {
    tensors[0].no_gradient = true;
    tensors[0].data = absl::string_view();
    std::vector<absl::Status> s =
        CheckPushedTensors(tensors, no_copy, &pool, no_layout);
    CHECK(s[0].ok());
    CHECK(s[1].ok());
  }
}

TEST_CASE("CheckKnownShapes refuses a known name of another shape") {
  std::shared_ptr<const VariableLayout> layout = LayoutWithStatistic();
  std::vector<float> six(6, 0.0f);
  const std::vector<int64_t> wrong = {3, 2};
  const std::vector<int64_t> any = {5};

  TensorBytes w_wrong = FloatTensorBytes("w", wrong, six.data());
  absl::Status s = CheckKnownShapes({w_wrong}, layout.get());
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(s, "'w'"));
  CHECK(Contains(s, "[3, 2]"));

  TensorBytes w_right = FloatTensorBytes("w", ShapeW(), six.data());
  TensorBytes b_right = FloatTensorBytes("b", ShapeB(), six.data());
  CHECK(CheckKnownShapes({w_right, b_right}, layout.get()).ok());
  // An unknown name is left to the push's own checks, as is every tensor
  // before the shard has a layout.
  TensorBytes unknown = FloatTensorBytes("u", any, six.data());
  CHECK(CheckKnownShapes({unknown}, layout.get()).ok());
  CHECK(CheckKnownShapes({w_wrong}, nullptr).ok());
}

TEST_CASE("CheckNoLocalStatistics refuses statistics a LOCAL cluster keeps") {
  TwoVariables v = TwoVariables::Constant(1.0f, 1.0f);
  std::vector<TensorBytes> tensors = v.Bytes();
  CHECK(
      CheckNoLocalStatistics(BatchNormStatistics::kLocal, tensors, "initialize")
          .ok());
  tensors[1].kind = VariableKind::kRunningStatistic;
  absl::Status s =
      CheckNoLocalStatistics(BatchNormStatistics::kLocal, tensors, "restore");
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(s, "restore: 'b'"));
  CHECK(Contains(s, "LOCAL"));
  CHECK(CheckNoLocalStatistics(BatchNormStatistics::kServer, tensors, "restore")
            .ok());
}

TEST_CASE("StagingFor borrows with a keeper and allocates without one") {
  TwoVariables g = TwoVariables::Constant(0.5f, 0.5f);
  std::vector<TensorBytes> tensors = g.Bytes();
  tensors[1].no_gradient = true;
  tensors[1].data = absl::string_view();
  std::vector<float*> copy_to = {nullptr, nullptr};

  SECTION("borrowed: the staged data is the request's own") {
    auto keep = std::make_shared<int>(1);
    std::vector<StagedGradient> staged = StagingFor(tensors, keep, &copy_to);
    REQUIRE(staged.size() == 2);
    CHECK(staged[0].data() == g.w.data());
    CHECK(staged[0].bytes == 24);
    CHECK(staged[0].keep == keep);
    CHECK(copy_to[0] == nullptr);
    CHECK(staged[1].bytes == 0);
    CHECK(copy_to[1] == nullptr);
  }
  SECTION("copied: a buffer of its own, named for the check's pass") {
    std::vector<StagedGradient> staged =
        StagingFor(tensors, std::shared_ptr<const void>(), &copy_to);
    REQUIRE(staged.size() == 2);
    CHECK(staged[0].borrowed == nullptr);
    CHECK(staged[0].bytes == 24);
    REQUIRE(copy_to[0] != nullptr);
    CHECK(copy_to[0] == staged[0].data());
    CHECK(copy_to[0] != g.w.data());
    CHECK(copy_to[1] == nullptr);
  }
}

}  // namespace
}  // namespace ps
}  // namespace psgd
