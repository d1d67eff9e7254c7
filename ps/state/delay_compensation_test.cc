#include "ps/state/delay_compensation.h"

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "common/tensor.h"

namespace psgd {
namespace ps {
namespace {

std::shared_ptr<const WeightsSnapshot> Weights(int64_t step,
                                               std::vector<float> values) {
  auto s = std::make_shared<WeightsSnapshot>();
  s->step = step;
  const int64_t n = static_cast<int64_t>(values.size());
  s->weights.push_back(*Tensor::FromVector({n}, values));
  return s;
}

std::vector<float> Copy(const float* p, size_t n) {
  return std::vector<float>(p, p + n);
}

TEST_CASE("DC-ASGD: g + lambda * g * g * (w_now - w_then), exactly") {
  // lambda 0.5; w_now - w_then = {0.5, 2, -2}:
  //   2    + 0.5 * 2 * 2 * 0.5        = 2 + 1      = 3
  //   -1   + 0.5 * (-1) * (-1) * 2    = -1 + 1     = 0
  //   0.5  + 0.5 * 0.5 * 0.5 * (-2)   = 0.5 - 0.25 = 0.25
  const std::vector<float> g = {2.0f, -1.0f, 0.5f};
  const std::vector<float> now = {1.0f, 3.0f, 0.0f};
  const std::vector<float> then = {0.5f, 1.0f, 2.0f};
  std::vector<float> out(3);
  CompensateDelay(0.5f, 3, g.data(), now.data(), then.data(), out.data());
  CHECK(out == std::vector<float>{3.0f, 0.0f, 0.25f});
  // Unchanged weights: no compensation at all.
  CompensateDelay(0.5f, 3, g.data(), now.data(), now.data(), out.data());
  CHECK(out == g);
  // Float32, in the order written: lambda 0.1 is not exact in binary.
  const float l = 0.1f, x = 3.0f, d = 0.25f, zero = 0.0f;
  CompensateDelay(l, 1, &x, &d, &zero, out.data());
  CHECK(out[0] == x + l * x * x * (d - zero));
  CHECK(out[0] == Approx(3.225).epsilon(1e-7));
}

TEST_CASE("DC-ASGD: compensates from the worker's last pull of that step") {
  DelayCompensator dc(0.5f, 2);
  REQUIRE(dc.enabled());
  const std::vector<float> g = {2.0f, -1.0f, 0.5f};
  const std::vector<const float*> grads = {g.data()};
  auto now = Weights(5, {1.0f, 3.0f, 0.0f});
  dc.RecordPull(1, Weights(3, {0.5f, 1.0f, 2.0f}));
  dc.RecordPull(-1, Weights(4, {9.0f, 9.0f, 9.0f}));  // the evaluator: ignored

  std::vector<const float*> out;
  REQUIRE(dc.Compensate(1, 3, *now, grads, &out));
  REQUIRE(out.size() == 1);
  CHECK(out[0] != g.data());
  CHECK(Copy(out[0], 3) == std::vector<float>{3.0f, 0.0f, 0.25f});
  CHECK(g == std::vector<float>{2.0f, -1.0f, 0.5f});  // the input stays
  CHECK(dc.compensated() == 1);

  // No recorded pull (worker 0), or one of another step: as it came.
  CHECK_FALSE(dc.Compensate(0, 3, *now, grads, &out));
  CHECK(out == grads);
  CHECK_FALSE(dc.Compensate(1, 4, *now, grads, &out));
  CHECK(out == grads);
  CHECK(dc.uncompensated() == 2);

  // After a restore or rollback: nothing recorded until the next pull.
  dc.Clear();
  CHECK_FALSE(dc.Compensate(1, 3, *now, grads, &out));
  CHECK(dc.uncompensated() == 3);
  dc.RecordPull(1, Weights(5, {1.0f, 3.0f, 0.0f}));
  REQUIRE(dc.Compensate(1, 5, *now, grads, &out));
  CHECK(Copy(out[0], 3) == g);  // w_now == w_then
  CHECK(dc.compensated() == 2);
}

TEST_CASE("DC-ASGD: lambda 0 is off") {
  DelayCompensator dc(0.0f, 1);
  CHECK_FALSE(dc.enabled());
  const std::vector<float> g = {1.0f};
  const std::vector<const float*> grads = {g.data()};
  dc.RecordPull(0, Weights(0, {7.0f}));
  std::vector<const float*> out;
  CHECK_FALSE(dc.Compensate(0, 0, *Weights(1, {8.0f}), grads, &out));
  CHECK(out == grads);
  CHECK(dc.compensated() == 0);
  CHECK(dc.uncompensated() == 0);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
