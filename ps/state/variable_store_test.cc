#include "ps/state/variable_store.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/thread_pool.h"

namespace psgd {
namespace ps {
namespace {

const std::vector<int64_t> kShape23 = {2, 3};
const std::vector<int64_t> kShape2 = {2};

std::unique_ptr<VariableStore> MakeStore(const std::vector<float>& w,
                                         const std::vector<float>& b) {
  std::vector<TensorBytes> init = {ParameterBytes("w", kShape23, w.data()),
                                   ParameterBytes("b", kShape2, b.data())};
  auto store = VariableStore::Create(init);
  REQUIRE(store.ok());
  return *std::move(store);
}

bool Says(const absl::Status& s, absl::StatusCode code,
          absl::string_view text) {
  return s.code() == code && s.message().find(text) != absl::string_view::npos;
}

TEST_CASE("a store holds its initial values at step 0 in the given order") {
  std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {7, 8};
  auto store = MakeStore(w, b);
  CHECK(store->layout().names == std::vector<std::string>{"w", "b"});
  CHECK(store->layout().num_parameters == 8);
  CHECK(store->layout().Find("b") == 1);
  CHECK(store->layout().Find("x") == -1);
  auto snap = store->current();
  CHECK(snap->step == 0);
  CHECK(snap->weights[1].span()[1] == 8.0f);
}

TEST_CASE("an update publishes a new version and leaves held ones alone") {
  std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {7, 8};
  auto store = MakeStore(w, b);
  auto held = store->current();
  for (int step = 1; step <= 4; ++step) {
    store->Update(step, [](absl::Span<const float* const> in,
                           absl::Span<float* const> out) {
      for (int i = 0; i < 6; ++i) out[0][i] = in[0][i] + 1;
      for (int i = 0; i < 2; ++i) out[1][i] = in[1][i];
    });
  }
  CHECK(store->current()->step == 4);
  CHECK(store->current()->weights[0].span()[0] == 5.0f);
  CHECK(held->step == 0);
  CHECK(held->weights[0].span()[0] == 1.0f);
}

TEST_CASE("snapshots may be released on another thread after the store") {
  std::vector<float> w(6, 1.0f), b(2, 0.0f);
  auto store = MakeStore(w, b);
  auto snap = store->current();
  store.reset();
  std::thread t([s = std::move(snap)]() mutable { s.reset(); });
  t.join();
}

TEST_CASE("bad tensors are refused naming the tensor") {
  std::vector<float> w(6, 1.0f);
  TensorBytes t = FloatTensorBytes("w", kShape23, w.data());
  CHECK(CheckFloatTensor(t, "gradient").ok());

  TensorBytes half = t;
  half.dtype = DType::kFloat16;
  CHECK(Says(CheckFloatTensor(half, "gradient"),
             absl::StatusCode::kInvalidArgument,
             "gradient 'w' has dtype float16"));
  TensorBytes short_data = t;
  short_data.data.remove_suffix(4);
  CHECK(Says(CheckFloatTensor(short_data, "gradient"),
             absl::StatusCode::kInvalidArgument, "needs 24 bytes"));
  const std::vector<int64_t> bad_shape = {2, -3};
  TensorBytes negative = t;
  negative.shape = bad_shape;
  CHECK(Says(CheckFloatTensor(negative, "gradient"),
             absl::StatusCode::kInvalidArgument, "gradient 'w'"));
  TensorBytes unnamed = t;
  unnamed.name = "";
  CHECK(Says(CheckFloatTensor(unnamed, "gradient"),
             absl::StatusCode::kInvalidArgument, "empty name"));
  w[4] = std::numeric_limits<float>::quiet_NaN();
  CHECK(Says(CheckFloatTensor(t, "gradient"),
             absl::StatusCode::kInvalidArgument, "at element 4"));
  w[4] = 0;
  w[0] = -std::numeric_limits<float>::infinity();
  CHECK(Says(CheckFloatTensor(t, "gradient"),
             absl::StatusCode::kInvalidArgument, "value -inf at element 0"));
}

TEST_CASE("a check shared among a pool's threads: the first bad element") {
  // 3.5M floats: three parts of at least kMinBulkPartBytes each.
  const int64_t n = 3500000;
  const std::vector<int64_t> shape = {n};
  std::vector<float> g(n), copy(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) g[i] = 1e-3f * static_cast<float>(i % 97);
  TensorBytes t = FloatTensorBytes("g", shape, g.data());
  ThreadPool pool(3);
  const float max = 1e6f;
  REQUIRE(CheckFloatTensor(t, "gradient", max, copy.data(), &pool).ok());
  // The pass copied every value.
  CHECK(std::memcmp(copy.data(), g.data(), n * sizeof(float)) == 0);
  // Bad values in the second and third parts: the first is named.
  g[2900000] = std::numeric_limits<float>::quiet_NaN();
  g[2000001] = -std::numeric_limits<float>::infinity();
  CHECK(Says(CheckFloatTensor(t, "gradient", max, copy.data(), &pool),
             absl::StatusCode::kInvalidArgument,
             "value -inf at element 2000001"));
  CHECK(Says(CheckFloatTensor(t, "gradient", max, nullptr, &pool),
             absl::StatusCode::kInvalidArgument,
             "value -inf at element 2000001"));
  g[2000001] = 0;
  CHECK(Says(CheckFloatTensor(t, "gradient", max, nullptr, &pool),
             absl::StatusCode::kInvalidArgument, "at element 2900000"));
  g[2900000] = 0;
  g[n - 1] = 2 * max;  // beyond the bound, in the last part
  CHECK(Says(CheckFloatTensor(t, "gradient", max, copy.data(), &pool),
             absl::StatusCode::kInvalidArgument,
             absl::StrCat("at element ", n - 1)));
}

TEST_CASE("a push's tensors checked as one loop: each its own status") {
  // Five tensors of 0.6M floats: none is a thread's least part (1M) alone,
  // together they are split over the pool's three threads.
  const int64_t n = 600000;
  const std::vector<int64_t> shape = {n};
  const std::vector<int64_t> wrong_shape = {n + 1};
  std::vector<std::vector<float>> g(5, std::vector<float>(n));
  std::vector<std::vector<float>> copies(5, std::vector<float>(n, -1.0f));
  for (int k = 0; k < 5; ++k) {
    for (int64_t i = 0; i < n; ++i) g[k][i] = 1e-3f * ((i + k) % 89);
  }
  const std::vector<std::string> names = {"t0", "t1", "t2", "t3", "t4"};
  std::vector<TensorBytes> t;
  for (int k = 0; k < 5; ++k) {
    t.push_back(FloatTensorBytes(names[k], shape, g[k].data()));
  }
  t[4].shape = wrong_shape;  // refused before any value is read
  g[1][n - 1] = std::numeric_limits<float>::quiet_NaN();
  g[3][7] = 5e6f;
  std::vector<float*> into;
  for (auto& c : copies) into.push_back(c.data());
  into[2] = nullptr;  // checked where it lies
  ThreadPool pool(3);
  const std::vector<absl::Status> s =
      CheckFloatTensors(t, "gradient", 1e6f, into, &pool);
  REQUIRE(s.size() == 5);
  CHECK(s[0].ok());
  CHECK(Says(
      s[1], absl::StatusCode::kInvalidArgument,
      absl::StrCat("'t1' has the non-finite value nan at element ", n - 1)));
  CHECK(s[2].ok());
  CHECK(Says(s[3], absl::StatusCode::kInvalidArgument,
             "'t3' has the value 5e+06 at element 7"));
  CHECK(Says(s[4], absl::StatusCode::kInvalidArgument, "'t4' of shape"));
  // The good tensors' values were copied whole, across the threads' cuts.
  CHECK(std::memcmp(copies[0].data(), g[0].data(), n * sizeof(float)) == 0);
  CHECK(copies[2][0] == -1.0f);  // no copy asked for
  // The same statuses one tensor at a time.
  for (int k = 0; k < 5; ++k) {
    INFO("tensor " << k);
    CHECK(CheckFloatTensor(t[k], "gradient", 1e6f, nullptr) == s[k]);
  }
}

TEST_CASE("initial values that repeat a name or are empty are refused") {
  std::vector<float> w(6, 1.0f);
  std::vector<TensorBytes> twice = {ParameterBytes("w", kShape23, w.data()),
                                    ParameterBytes("w", kShape23, w.data())};
  CHECK(Says(VariableStore::Create(twice).status(),
             absl::StatusCode::kInvalidArgument, "'w' appears twice"));
  CHECK(!VariableStore::Create({}).ok());
}

TEST_CASE("gradients are matched to the layout by name and shape") {
  std::vector<float> w(6, 1.0f), b(2, 0.0f);
  auto store = MakeStore(w, b);
  std::vector<const float*> ordered;
  std::vector<TensorBytes> ok = {FloatTensorBytes("b", kShape2, b.data()),
                                 FloatTensorBytes("w", kShape23, w.data())};
  REQUIRE(store->MatchGradients(ok, &ordered).ok());
  CHECK(ordered[0] == w.data());
  CHECK(ordered[1] == b.data());

  std::vector<TensorBytes> unknown = ok;
  unknown[0].name = "c";
  CHECK(Says(store->MatchGradients(unknown, &ordered),
             absl::StatusCode::kInvalidArgument, "unknown variable 'c'"));
  std::vector<TensorBytes> missing = {ok[1]};
  CHECK(Says(store->MatchGradients(missing, &ordered),
             absl::StatusCode::kInvalidArgument,
             "no gradient for variable 'b'"));
  std::vector<TensorBytes> repeated = {ok[0], ok[1], ok[1]};
  CHECK(Says(store->MatchGradients(repeated, &ordered),
             absl::StatusCode::kInvalidArgument, "two gradients for"));
  const std::vector<int64_t> shape32 = {3, 2};
  std::vector<TensorBytes> reshaped = ok;
  reshaped[1].shape = shape32;
  CHECK(
      Says(store->MatchGradients(reshaped, &ordered),
           absl::StatusCode::kInvalidArgument,
           "gradient 'w' has shape [3, 2] but the variable has shape [2, 3]"));
}

TEST_CASE("another variable set is told apart from the stored one") {
  std::vector<float> w(6, 1.0f), b(2, 0.0f);
  auto store = MakeStore(w, b);
  std::vector<TensorBytes> same = {FloatTensorBytes("b", kShape2, b.data()),
                                   FloatTensorBytes("w", kShape23, w.data())};
  CHECK(store->CheckSameVariables(same).ok());
  CHECK(Says(store->CheckSameVariables({same[0]}),
             absl::StatusCode::kFailedPrecondition,
             "stored variable 'w' is missing"));
  std::vector<TensorBytes> other = same;
  other[0].name = "bias";
  CHECK(Says(store->CheckSameVariables(other),
             absl::StatusCode::kFailedPrecondition, "'bias' is not among"));
  other = same;
  other[1].shape = kShape2;
  CHECK(Says(store->CheckSameVariables(other),
             absl::StatusCode::kFailedPrecondition, "has shape [2]"));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
