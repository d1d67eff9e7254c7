#include "common/tensor.h"

#include <catch2/catch.hpp>
#include <cstdint>

namespace psgd {
namespace {

TEST_CASE("shapes count elements and validate") {
  CHECK(NumElements({}) == 1);
  CHECK(NumElements({2, 3, 4}) == 24);
  CHECK(ShapeToString({2, 3}) == "[2, 3]");
  CHECK(ValidateShape({5, 5, 3, 64}).ok());
  CHECK(ValidateShape({2, 0}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(ValidateShape({-1}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(ValidateShape({1 << 30, 1 << 30, 4}).code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("aligned buffers are aligned, zeroed and move their storage") {
  for (size_t n : {1, 3, 16, 1000}) {
    AlignedBuffer b(n);
    REQUIRE(b.size() == n);
    CHECK(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer::kAlignment ==
          0);
    for (size_t i = 0; i < n; ++i) CHECK(b.data()[i] == 0.0f);
    float* p = b.data();
    AlignedBuffer moved(std::move(b));
    CHECK(moved.data() == p);
    CHECK(b.data() == nullptr);  // NOLINT(bugprone-use-after-move)
    CHECK(b.size() == 0);
  }
}

TEST_CASE("tensors own storage; views borrow it") {
  Tensor t({2, 3});
  CHECK(t.size() == 6);
  CHECK(t.rank() == 2);
  t.Fill(1.5f);
  TensorView v = t.view();
  v.data()[4] = 7.0f;
  CHECK(t.data()[4] == 7.0f);
  ConstTensorView cv = v;
  CHECK(cv.shape() == Shape{2, 3});
  CHECK(cv.span()[4] == 7.0f);

  Tensor c = t.Clone();
  c.data()[0] = -1.0f;
  CHECK(t.data()[0] == 1.5f);
  CHECK(c.data()[4] == 7.0f);

  Tensor empty;
  CHECK(empty.size() == 0);
}

TEST_CASE("FromVector checks the element count") {
  auto ok = Tensor::FromVector({2, 2}, {1, 2, 3, 4});
  REQUIRE(ok.ok());
  CHECK(ok->data()[3] == 4.0f);
  auto bad = Tensor::FromVector({2, 2}, {1, 2, 3});
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.status().message() ==
        "shape [2, 2] has 4 elements but 3 values were given");
  CHECK(!Tensor::FromVector({0}, {}).ok());
}

}  // namespace
}  // namespace psgd
