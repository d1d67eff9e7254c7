// Helpers for the tests of ParameterShard: a two-variable model, pushes of
// constant gradients, and a picture of everything a refusal must leave
// unchanged.
#ifndef PSGD_PS_TESTING_SHARD_TEST_UTIL_H_
#define PSGD_PS_TESTING_SHARD_TEST_UTIL_H_

#include <catch2/catch.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {
namespace testing {

inline const std::vector<int64_t>& ShapeW() {
  static const auto* s = new std::vector<int64_t>{2, 3};
  return *s;
}
inline const std::vector<int64_t>& ShapeB() {
  static const auto* s = new std::vector<int64_t>{2};
  return *s;
}

// Values of the variables "w" (2, 3) and "b" (2).
struct TwoVariables {
  std::vector<float> w = std::vector<float>(6);
  std::vector<float> b = std::vector<float>(2);

  static TwoVariables Constant(float w, float b) {
    TwoVariables t;
    t.w.assign(6, w);
    t.b.assign(2, b);
    return t;
  }
  // Trained parameters, as an Initialize declares them (a push's kinds are
  // not read).
  std::vector<TensorBytes> Bytes() const {
    std::vector<TensorBytes> out = {FloatTensorBytes("w", ShapeW(), w.data()),
                                    FloatTensorBytes("b", ShapeB(), b.data())};
    for (TensorBytes& t : out) t.kind = VariableKind::kParameter;
    return out;
  }
};

// Initial values w = 1 + i/10, b = -1, -2.
inline TwoVariables InitialValues() {
  TwoVariables t;
  for (int i = 0; i < 6; ++i) t.w[i] = 1.0f + 0.1f * i;
  t.b = {-1.0f, -2.0f};
  return t;
}

// Worker w's gradient for step s: multiples of 1/8, exact in float32.
inline TwoVariables ExactGradient(int w, int64_t s) {
  TwoVariables g;
  for (int i = 0; i < 6; ++i) g.w[i] = 0.25f * (w + 1) - 0.125f * i + 0.5f * s;
  g.b = {0.5f * w - 1.0f, 0.25f * s - 0.5f};
  return g;
}

// Async mode, M workers, SGD with learning rate 0.5 (exact steps).
inline ShardOptions AsyncSgdOptions(int m) {
  ShardOptions o;
  o.mode = Mode::kAsync;
  o.total_num_replicas = m;
  o.optimizer.kind = OptimizerOptions::Kind::kSgd;
  o.optimizer.learning_rate = 0.5;
  return o;
}

// A shard holding InitialValues(), with workers 0..M-1 joined.
inline std::unique_ptr<ParameterShard> MakeShard(const ShardOptions& options) {
  auto shard = ParameterShard::Create(options);
  REQUIRE(shard.ok());
  REQUIRE((*shard)->Initialize(InitialValues().Bytes()).ok());
  for (int w = 0; w < options.total_num_replicas; ++w) {
    REQUIRE((*shard)->Join(w).ok());
  }
  return *std::move(shard);
}

inline absl::StatusOr<PushReply> Push(ParameterShard& shard, int worker,
                                      int64_t step, const TwoVariables& g) {
  return shard.Push(worker, step, g.Bytes());
}

inline TwoVariables Weights(ParameterShard& shard) {
  auto snapshot = shard.Pull(0, -1, absl::Now() + absl::Seconds(10));
  REQUIRE(snapshot.ok());
  TwoVariables t;
  auto w = (*snapshot)->weights[0].span();
  auto b = (*snapshot)->weights[1].span();
  t.w.assign(w.begin(), w.end());
  t.b.assign(b.begin(), b.end());
  return t;
}

// Everything a refused request must leave as it was.
struct ShardPicture {
  int64_t step = 0;
  std::vector<float> w, b, m_w, m_b, v_w, v_b;
  int pending = 0;
  std::vector<int> live;
  int64_t aggregated = 0, applied = 0, stale = 0, surplus = 0;
  std::map<int64_t, int64_t> staleness;

  static ShardPicture Of(ParameterShard& shard) {
    ShardPicture p;
    ShardStatus s = shard.Status();
    p.step = s.step;
    if (s.initialized) {
      TwoVariables weights = Weights(shard);
      p.w = weights.w;
      p.b = weights.b;
    }
    p.m_w = shard.CopySlot("m", 0);
    p.m_b = shard.CopySlot("m", 1);
    p.v_w = shard.CopySlot("v", 0);
    p.v_b = shard.CopySlot("v", 1);
    p.pending = s.pending_gradients;
    p.live = s.live_workers;
    p.aggregated = s.counters.aggregated;
    p.applied = s.counters.applied;
    p.stale = s.counters.dropped_stale;
    p.surplus = s.counters.dropped_surplus;
    p.staleness = s.staleness_histogram;
    return p;
  }
  bool operator==(const ShardPicture& o) const {
    return step == o.step && w == o.w && b == o.b && m_w == o.m_w &&
           m_b == o.m_b && v_w == o.v_w && v_b == o.v_b &&
           pending == o.pending && live == o.live &&
           aggregated == o.aggregated && applied == o.applied &&
           stale == o.stale && surplus == o.surplus && staleness == o.staleness;
  }
};

}  // namespace testing
}  // namespace ps
}  // namespace psgd

// Prints a picture when a comparison fails.
template <>
struct Catch::StringMaker<psgd::ps::testing::ShardPicture> {
  static std::string convert(const psgd::ps::testing::ShardPicture& p) {
    std::ostringstream out;
    auto list = [&out](const char* name, const auto& v) {
      out << name << "=[";
      for (const auto& x : v) out << x << " ";
      out << "] ";
    };
    out << "{step=" << p.step << " pending=" << p.pending
        << " aggregated=" << p.aggregated << " applied=" << p.applied
        << " stale=" << p.stale << " surplus=" << p.surplus << " ";
    list("w", p.w);
    list("b", p.b);
    list("m_w", p.m_w);
    list("m_b", p.m_b);
    list("v_w", p.v_w);
    list("v_b", p.v_b);
    list("live", p.live);
    out << "}";
    return out.str();
  }
};

#endif  // PSGD_PS_TESTING_SHARD_TEST_UTIL_H_
