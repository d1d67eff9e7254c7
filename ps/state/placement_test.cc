#include "ps/state/placement.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Every element of every variable is in exactly one slice, rows in order.
void CheckCoverage(const Placement& p) {
  for (size_t v = 0; v < p.variables.size(); ++v) {
    int64_t next_row = 0, next_offset = 0;
    for (int s : p.variable_slices[v]) {
      const Slice& slice = p.slices[s];
      CHECK(slice.variable == static_cast<int>(v));
      CHECK(slice.row_begin == next_row);
      CHECK(slice.offset == next_offset);
      CHECK(slice.num_elements == NumElements(slice.shape));
      next_row = slice.row_end;
      next_offset += slice.num_elements;
    }
    CHECK(next_offset == NumElements(p.variables[v].shape));
  }
  int64_t total = 0;
  for (int64_t b : p.shard_bytes) total += b;
  CHECK(total == TotalParameters(p.variables) * 4);
}

TEST_CASE("the cifar10 model over 2 shards: local3 split, bytes balanced") {
  auto p = PlaceVariables(Cifar10TutorialVariables(), 2, kMiB);
  REQUIRE(p.ok());
  CheckCoverage(*p);
  // Only local3/weights (3,538,944 bytes) is above 1 MiB: 4 parts wanted,
  // 2 shards, so 2 slices of 1152 rows, one on each shard.
  REQUIRE(p->slices.size() == 11);
  const std::vector<int>& local3 = p->variable_slices[4];
  REQUIRE(local3.size() == 2);
  const Slice& a = p->slices[local3[0]];
  const Slice& b = p->slices[local3[1]];
  CHECK(a.name == "local3/weights/part_0");
  CHECK(b.name == "local3/weights/part_1");
  CHECK(a.shape == Shape{1152, 384});
  CHECK(b.row_begin == 1152);
  CHECK(a.shard != b.shard);
  // Greedy largest first: conv2/weights (409,600 bytes) joins part_0 on
  // shard 0, everything smaller then fits on shard 1.
  CHECK(p->shard_bytes[0] == 1769472 + 409600);
  CHECK(p->shard_bytes[1] == 2094120);
  CHECK(p->ShardVariables(0).size() + p->ShardVariables(1).size() == 11);
}

TEST_CASE("placement is deterministic") {
  for (int shards : {1, 2, 3, 4, 7}) {
    auto p1 = PlaceVariables(Cifar10TutorialVariables(), shards, 256 << 10);
    auto p2 = PlaceVariables(Cifar10TutorialVariables(), shards, 256 << 10);
    REQUIRE(p1.ok());
    REQUIRE(p2.ok());
    CheckCoverage(*p1);
    CHECK(PlacementToString(*p1) == PlacementToString(*p2));
    CHECK(p1->shard_slices == p2->shard_slices);
  }
}

TEST_CASE("slices of one variable go to distinct shards") {
  // One big variable and S = 4, threshold tiny: 4 slices, one per shard.
  std::vector<VariableSpec> v = {{"big", {10, 3}, {}}, {"small", {2}, {}}};
  auto p = PlaceVariables(v, 4, 4);
  REQUIRE(p.ok());
  CheckCoverage(*p);
  REQUIRE(p->variable_slices[0].size() == 4);
  std::vector<int> shards;
  for (int s : p->variable_slices[0]) shards.push_back(p->slices[s].shard);
  std::sort(shards.begin(), shards.end());
  CHECK(shards == std::vector<int>{0, 1, 2, 3});
  // 10 rows in 4 parts: 3, 3, 2, 2.
  CHECK(p->slices[p->variable_slices[0][0]].shape == Shape{3, 3});
  CHECK(p->slices[p->variable_slices[0][3]].shape == Shape{2, 3});
}

TEST_CASE("no split with one shard, one row, or below the threshold") {
  std::vector<VariableSpec> v = {
      {"w", {100, 100}, {}}, {"row", {1, 5000}, {}}, {"scalar", {}, {}}};
  auto one = PlaceVariables(v, 1, 1024);
  REQUIRE(one.ok());
  CHECK(one->slices.size() == 3);
  auto two = PlaceVariables(v, 2, 1024);
  REQUIRE(two.ok());
  CheckCoverage(*two);
  CHECK(two->variable_slices[0].size() == 2);
  CHECK(two->variable_slices[1].size() == 1);  // one row: cannot split
  CHECK(two->slices[two->variable_slices[2][0]].shape.empty());
  auto big = PlaceVariables(v, 2, 1 << 20);
  REQUIRE(big.ok());
  CHECK(big->slices.size() == 3);
}

TEST_CASE("bad placement inputs are refused") {
  std::vector<VariableSpec> v = {{"w", {4}, {}}};
  CHECK(PlaceVariables(v, 0, kMiB).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(!PlaceVariables(v, 2, 0).ok());
  CHECK(!PlaceVariables({{"w", {0}, {}}}, 2, kMiB).ok());
  // "w" split into "w/part_0" collides with a variable of that name.
  std::vector<VariableSpec> clash = {{"w", {8, 8}, {}}, {"w/part_0", {1}, {}}};
  absl::Status s = PlaceVariables(clash, 2, 16).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("'w/part_0'") != absl::string_view::npos);
}

TEST_CASE("the shards' slices put back together as the placed variables") {
  const std::vector<VariableSpec> model = Cifar10TutorialVariables();
  auto p = PlaceVariables(model, 2, 1 * kMiB);
  REQUIRE(p.ok());
  // Every shard's slices, shard by shard, as the shards report them.
  std::vector<VariableSpec> slices;
  for (int shard = 0; shard < 2; ++shard) {
    for (const VariableSpec& v : p->ShardVariables(shard)) {
      slices.push_back(v);
    }
  }
  auto back = VariablesOfSlices(slices);
  REQUIRE(back.ok());
  REQUIRE(back->size() == model.size());
  for (const VariableSpec& v : model) {
    auto it =
        std::find_if(back->begin(), back->end(),
                     [&](const VariableSpec& b) { return b.name == v.name; });
    REQUIRE(it != back->end());
    CHECK(it->shape == v.shape);
  }
  // A part missing, repeated, rows that do not follow on, other trailing
  // dimensions, another kind: refused.
  auto part = [](int j, int64_t row, Shape shape,
                 VariableKind kind = VariableKind::kParameter) {
    VariableSpec s{absl::StrCat("w-", j), std::move(shape), Initializer(),
                   kind};
    s.slice_of = SliceOf{"w", j, row};
    return s;
  };
  CHECK_FALSE(VariablesOfSlices({part(0, 0, {2, 3}), part(2, 2, {2, 3})}).ok());
  CHECK_FALSE(VariablesOfSlices({part(0, 0, {2, 3}), part(0, 0, {2, 3})}).ok());
  CHECK_FALSE(VariablesOfSlices({part(0, 0, {2, 3}), part(1, 2, {2, 4})}).ok());
  CHECK_FALSE(VariablesOfSlices({part(0, 0, {2, 3}), part(1, 1, {2, 3})}).ok());
  CHECK_FALSE(
      VariablesOfSlices({part(0, 0, {2, 3}),
                         part(1, 2, {2, 3}, VariableKind::kRunningStatistic)})
          .ok());
  CHECK_FALSE(VariablesOfSlices(
                  {VariableSpec{"w", {2}, Initializer()}, part(0, 0, {2})})
                  .ok());
  // A name that looks like a slice is a whole variable: nothing parses it.
  auto whole = VariablesOfSlices(
      {part(0, 0, {2, 3}), part(1, 2, {1, 3}),
       VariableSpec{
           "b/part_0", {3}, Initializer(), VariableKind::kRunningStatistic}});
  REQUIRE(whole.ok());
  REQUIRE(whole->size() == 2);
  CHECK((*whole)[0].name == "w");
  CHECK((*whole)[0].shape == Shape{3, 3});
  CHECK((*whole)[1].name == "b/part_0");
  CHECK((*whole)[1].shape == Shape{3});
  CHECK((*whole)[1].kind == VariableKind::kRunningStatistic);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
