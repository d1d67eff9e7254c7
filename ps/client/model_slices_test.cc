#include "ps/client/model_slices.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace ps {
namespace {

// "a" (4, 2) split in two over 2 shards, "b" (3) whole.
Placement TwoShards() {
  auto p = PlaceVariables({{"a", {4, 2}, {}}, {"b", {3}, {}}}, 2, 16);
  REQUIRE(p.ok());
  return *p;
}

TEST_CASE("slices borrow the rows of whole tensors and assemble back") {
  const Placement p = TwoShards();
  std::vector<float> a = {0, 1, 2, 3, 4, 5, 6, 7}, b = {8, 9, 10};
  std::vector<const float*> model;
  REQUIRE(OrderModel(p,
                     std::vector<NamedConstTensorView>{
                         {"b", ConstTensorView(b.data(), {3})},
                         {"a", ConstTensorView(a.data(), {4, 2})}},
                     &model)
              .ok());
  std::vector<float> a2(8), b2(3);
  std::vector<float*> out = {a2.data(), b2.data()};
  for (int shard = 0; shard < 2; ++shard) {
    std::vector<TensorBytes> slices = ShardSlices(p, shard, model);
    for (const TensorBytes& t : slices) {
      // No copy: the bytes are the whole tensor's rows.
      CHECK((t.data.data() >= reinterpret_cast<const char*>(a.data()) ||
             t.data.data() == reinterpret_cast<const char*>(b.data())));
    }
    REQUIRE(AssembleShard(p, shard, slices, out).ok());
  }
  CHECK(a2 == a);
  CHECK(b2 == b);
}

TEST_CASE("what a shard returns is checked against the placement") {
  const Placement p = TwoShards();
  std::vector<float> a(8), b(3);
  std::vector<const float*> model = {a.data(), b.data()};
  std::vector<float*> out = {a.data(), b.data()};
  const int shard_of_b = p.slices[p.variable_slices[1][0]].shard;
  std::vector<TensorBytes> slices = ShardSlices(p, shard_of_b, model);
  auto says = [&](std::vector<TensorBytes> t, absl::string_view text) {
    absl::Status s = AssembleShard(p, shard_of_b, t, out);
    INFO(s.ToString());
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(s.message().find(text) != absl::string_view::npos);
  };
  says({}, "did not return");
  says({slices[0], slices[0]}, "twice");
  std::vector<TensorBytes> renamed = slices;
  renamed[0].name = "zzz";
  says(renamed, "does not put on it");
  std::vector<TensorBytes> cut = slices;
  cut.back().data.remove_suffix(4);
  says(cut, "bytes; expected float32");
  std::vector<TensorBytes> half = slices;
  half.back().dtype = DType::kFloat16;
  says(half, "as float16");
}

}  // namespace
}  // namespace ps
}  // namespace psgd
