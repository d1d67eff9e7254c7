// The pushes a shard holds before it decides them: parts gathered into one
// push in layout order, refusals that change nothing, a newer push that
// starts afresh, and complete pushes taken in their workers' order (a
// decided push takes its worker's earlier ones along).
#include "ps/state/push_stage.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {
namespace {

const std::vector<std::string> kNames = {"a", "b", "c"};
const int64_t kShape[] = {1};

absl::StatusOr<int> MatchName(const TensorBytes& g) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (g.name == kNames[i]) return static_cast<int>(i);
  }
  return absl::NotFoundError(absl::StrCat("no variable '", g.name, "'"));
}

TensorBytes Grad(const std::string& name, bool no_gradient = false) {
  TensorBytes t;
  t.name =
      std::find(kNames.begin(), kNames.end(), name) != kNames.end()
          ? absl::string_view(*std::find(kNames.begin(), kNames.end(), name))
          : absl::string_view("zzz");
  t.shape = kShape;
  t.no_gradient = no_gradient;
  return t;
}

// A part of worker 1's push `push_id` for `step` with one float per name:
// its value is `value`.
absl::StatusOr<std::optional<StagedPush>> Part(
    PushStage& stage, int64_t step, uint64_t push_id,
    const std::vector<TensorBytes>& grads, float value,
    int64_t generation = 1) {
  std::vector<StagedGradient> copies(grads.size());
  for (StagedGradient& c : copies) {
    c.copy = AlignedBuffer(1);
    c.copy.data()[0] = value;
    c.bytes = sizeof(float);
  }
  return stage.AddPart(1, step, generation, push_id, 3, grads, MatchName,
                       &copies);
}

TEST_CASE("parts gather into one push in layout order") {
  PushStage stage;
  auto first = Part(stage, 4, 9, {Grad("c")}, 3.0f);
  REQUIRE(first.ok());
  CHECK_FALSE(first->has_value());
  CHECK(stage.PartsReceived(1) == 1);
  CHECK(stage.PartBytes() == sizeof(float));
  auto last =
      Part(stage, 4, 9, {Grad("a"), Grad("b", /*no_gradient=*/true)}, 1.0f);
  REQUIRE(last.ok());
  REQUIRE(last->has_value());
  const StagedPush& push = **last;
  CHECK(push.step == 4);
  CHECK(push.push_id == 9);
  const std::vector<const float*> g = push.Gradients();
  REQUIRE(g.size() == 3);
  CHECK(*g[0] == 1.0f);
  CHECK(g[1] == nullptr);  // marked as having no gradient
  CHECK(*g[2] == 3.0f);
  CHECK(stage.PartsReceived(1) == 0);  // the stage is empty again
  CHECK(stage.PartBytes() == 0);
}

TEST_CASE("a refused part changes nothing") {
  PushStage stage;
  REQUIRE(Part(stage, 4, 9, {Grad("a")}, 1.0f).ok());
  // A second gradient for a variable staged before, or twice in the part.
  auto twice = Part(stage, 4, 9, {Grad("a")}, 2.0f);
  CHECK(twice.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(twice.status().message()).find("variable 'a'") !=
        std::string::npos);
  CHECK(Part(stage, 4, 9, {Grad("b"), Grad("b")}, 2.0f).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // An unknown variable: the match's refusal.
  CHECK(Part(stage, 4, 9, {Grad("b"), Grad("zzz")}, 2.0f).status().code() ==
        absl::StatusCode::kNotFound);
  // A part for an older step.
  CHECK(Part(stage, 3, 8, {Grad("b")}, 2.0f).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(stage.PartsReceived(1) == 1);
  auto rest = Part(stage, 4, 9, {Grad("b"), Grad("c")}, 2.0f);
  REQUIRE(rest.ok());
  REQUIRE(rest->has_value());
  CHECK(*(*rest)->Gradients()[0] == 1.0f);
}

TEST_CASE("a part of a newer push, or of another generation, starts afresh") {
  PushStage stage;
  REQUIRE(Part(stage, 4, 9, {Grad("a"), Grad("b")}, 1.0f).ok());
  REQUIRE(Part(stage, 5, 10, {Grad("a")}, 2.0f).ok());  // newer step
  CHECK(stage.PartsReceived(1) == 1);
  REQUIRE(Part(stage, 5, 11, {Grad("b")}, 2.0f).ok());  // another push id
  CHECK(stage.PartsReceived(1) == 1);
  // After a rollback (generation 2) an older step is a new push.
  REQUIRE(Part(stage, 2, 12, {Grad("c")}, 2.0f, /*generation=*/2).ok());
  CHECK(stage.PartsReceived(1) == 1);
  CHECK(stage.DropParts(1));
  CHECK_FALSE(stage.DropParts(1));
}

StagedPush Complete(int64_t step, uint64_t push_id) {
  StagedPush p;
  p.step = step;
  p.push_id = push_id;
  return p;
}

TEST_CASE("a refused push goes alone") {
  PushStage stage;
  stage.KeepComplete(1, Complete(1, 100));
  stage.KeepComplete(1, Complete(1, 101));  // a second push for step 1
  stage.KeepComplete(1, Complete(2, 102));
  stage.DropOneComplete(1, 101);
  CHECK(stage.FindComplete(1, 101) == nullptr);
  CHECK(stage.FindComplete(1, 100) != nullptr);  // earlier: stays
  CHECK(stage.FindComplete(1, 102) != nullptr);
  stage.DropOneComplete(1, 999);  // not kept: nothing happens
  CHECK(stage.CompleteOf(1) == 2);
}

TEST_CASE("a decided push takes its worker's earlier pushes along") {
  PushStage stage;
  stage.KeepComplete(2, Complete(1, 200));
  stage.KeepComplete(1, Complete(1, 100));
  stage.KeepComplete(1, Complete(2, 101));
  stage.KeepComplete(1, Complete(3, 102));
  stage.KeepComplete(1, Complete(4, 103));
  CHECK(stage.CompleteOf(1) == 4);
  CHECK(stage.FindComplete(1, 101)->step == 2);
  CHECK(stage.FindComplete(1, 999) == nullptr);
  std::optional<StagedPush> taken = stage.TakeComplete(1, 102);
  REQUIRE(taken.has_value());
  CHECK(taken->step == 3);
  // Earlier: never committed.
  CHECK(stage.FindComplete(1, 100) == nullptr);
  CHECK(stage.FindComplete(1, 101) == nullptr);
  CHECK(stage.FindComplete(1, 103) != nullptr);  // later: stays
  CHECK(stage.CompleteOf(2) == 1);               // other workers untouched
  CHECK_FALSE(stage.TakeComplete(1, 102).has_value());
  // Through an arrival, included.
  stage.KeepComplete(1, Complete(5, 104));
  stage.DropCompleteThrough(1, stage.FindComplete(1, 103)->arrival);
  CHECK(stage.FindComplete(1, 103) == nullptr);
  CHECK(stage.FindComplete(1, 104) != nullptr);
  stage.DropComplete(1);
  CHECK(stage.CompleteOf(1) == 0);
  CHECK(stage.CompleteOf(2) == 1);
  stage.ClearComplete();
  CHECK(stage.CompleteOf(2) == 0);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
