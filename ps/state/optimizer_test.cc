#include "ps/state/optimizer.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/adam.h"
#include "common/lr_schedule.h"
#include "common/thread_pool.h"

namespace psgd {
namespace ps {
namespace {

double RelativeError(double got, double want) {
  return std::abs(got - want) / std::max(std::abs(want), 1e-30);
}

// Runs `optimizer` in place over one variable.
void Step(Optimizer& optimizer, std::vector<float>& w,
          const std::vector<float>& g, double lr_scale = 1.0) {
  const float* in[] = {w.data()};
  const float* grads[] = {g.data()};
  float* out[] = {w.data()};
  optimizer.Apply(in, grads, out, lr_scale);
}

TEST_CASE("adam matches hand-derived values over three steps") {
  // TF's defaults: lr 0.001, beta1 0.9, beta2 0.999, epsilon 1e-8.
  auto adam = CreateOptimizer(OptimizerOptions{}, {3});
  REQUIRE(adam.ok());
  std::vector<float> w = {0.5f, -1.0f, 2.0f};
  const std::vector<std::vector<float>> grads = {
      {0.1f, -0.2f, 0.3f}, {0.05f, 0.1f, -0.4f}, {-0.3f, 0.0f, 0.2f}};
  // Step 1 by hand: lr_1 = 0.001 * sqrt(1 - 0.999) / (1 - 0.9) = 3.16228e-4,
  // m = 0.1 g, v = 0.001 g^2, so the step is
  // lr_1 * 0.1 g / (0.0316228 |g| + 1e-8) = 0.001 sign(g) (1 - ~3e-7/|g|).
  // Steps 2 and 3 carried on with the same formulas in double precision.
  const std::vector<std::vector<double>> want_w = {
      {0.4990000032, -0.9990000016, 1.999000001},
      {0.4980678262, -0.9987336649, 1.999193511},
      {0.4984150493, -0.9985277859, 1.999094995}};
  const std::vector<std::vector<double>> want_m = {
      {0.01, -0.02, 0.03}, {0.014, -0.008, -0.013}, {-0.0174, -0.0072, 0.0083}};
  const std::vector<std::vector<double>> want_v = {
      {1e-05, 4e-05, 9e-05},
      {1.249e-05, 4.996e-05, 0.00024991},
      {0.00010247751, 4.991004e-05, 0.00028966009}};
  for (int t = 0; t < 3; ++t) {
    Step(**adam, w, grads[t]);
    CHECK((*adam)->step() == t + 1);
    absl::Span<const float> m = (*adam)->Slot("m", 0);
    absl::Span<const float> v = (*adam)->Slot("v", 0);
    REQUIRE(m.size() == 3);
    REQUIRE(v.size() == 3);
    for (int i = 0; i < 3; ++i) {
      INFO("step " << t + 1 << " element " << i);
      CHECK(RelativeError(w[i], want_w[t][i]) < 1e-6);
      CHECK(RelativeError(m[i], want_m[t][i]) < 1e-6);
      CHECK(RelativeError(v[i], want_v[t][i]) < 1e-6);
    }
  }
}

TEST_CASE("adam's vectorised update: the same bits as the element formula") {
  // Variables long enough for the vector loops of the clone this CPU runs
  // (AVX-512, AVX2 or the baseline), with a remainder, and one of a single
  // element (the scalar tail only): each element is AdamElement's, bit for
  // bit, as on every shard and in every replay.
  const std::vector<int64_t> sizes = {1027, 1, 64};
  auto adam = CreateOptimizer(OptimizerOptions{}, sizes);
  REQUIRE(adam.ok());
  std::vector<std::vector<float>> w, m, v;
  for (int64_t n : sizes) {
    w.emplace_back(n);
    m.emplace_back(n, 0.0f);
    v.emplace_back(n, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      w.back()[i] = std::sin(0.37f * static_cast<float>(i + n)) * 1.7f;
    }
  }
  std::vector<std::vector<float>> want = w;
  for (int t = 1; t <= 3; ++t) {
    std::vector<std::vector<float>> g;
    for (size_t k = 0; k < sizes.size(); ++k) {
      g.emplace_back(sizes[k]);
      for (int64_t i = 0; i < sizes[k]; ++i) {
        g.back()[i] = std::cos(1.3f * static_cast<float>(i * t + k)) *
                      std::ldexp(1.0f, -(static_cast<int>(i) % 9));
      }
    }
    std::vector<const float*> in, grads;
    std::vector<float*> out;
    for (size_t k = 0; k < sizes.size(); ++k) {
      in.push_back(w[k].data());
      grads.push_back(g[k].data());
      out.push_back(w[k].data());
    }
    (*adam)->Apply(in, grads, out, 1.0);
    const AdamStep c = TensorFlowAdamStep(AdamHyper{}, t);
    for (size_t k = 0; k < sizes.size(); ++k) {
      for (int64_t i = 0; i < sizes[k]; ++i) {
        want[k][i] = AdamElement(c, want[k][i], g[k][i], &m[k][i], &v[k][i]);
      }
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      INFO("step " << t << " variable " << k);
      absl::Span<const float> got_m = (*adam)->Slot("m", k);
      int64_t differ = 0;
      for (int64_t i = 0; i < sizes[k]; ++i) {
        if (std::memcmp(&w[k][i], &want[k][i], sizeof(float)) != 0 ||
            std::memcmp(&got_m[i], &m[k][i], sizeof(float)) != 0) {
          ++differ;
        }
      }
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("async_beta1: Adam's momentum in async mode, by hand") {
  // beta1 0.9 in the optimizer block, 0.5 in async mode; beta2 0.75 and lr
  // 0.5 keep the arithmetic short.
  ShardOptions o;
  o.mode = Mode::kAsync;
  o.optimizer.learning_rate = 0.5;
  o.optimizer.beta2 = 0.75;
  o.async_beta1 = 0.5;
  auto adam = CreateOptimizer(ShardOptimizerOptions(o), {1});
  REQUIRE(adam.ok());
  std::vector<float> w = {3.0f};
  // Step 1, g = 2: m = 0.5 * 2 = 1, v = 0.25 * 4 = 1 (exact),
  // lr_1 = 0.5 * sqrt(1 - 0.75) / (1 - 0.5) = 0.5, w = 3 - 0.5 * 1 / (1 +
  // 1e-8) = 2.5 (1 + 1e-8 rounds to 1 in float32).
  Step(**adam, w, {2.0f});
  CHECK((*adam)->Slot("m", 0)[0] == 1.0f);
  CHECK((*adam)->Slot("v", 0)[0] == 1.0f);
  CHECK(w[0] == 2.5f);
  // Step 2, g = 2: m = 0.5 * 1 + 0.5 * 2 = 1.5 (with beta1 0.9 it would be
  // 0.9 * 0.2 + 0.1 * 2 = 0.38), v = 0.75 * 1 + 0.25 * 4 = 1.75,
  // lr_2 = 0.5 * sqrt(1 - 0.5625) / (1 - 0.25) = 0.4409585518,
  // w = 2.5 - lr_2 * 1.5 / sqrt(1.75) = 2.5 - 0.5 = 2.
  Step(**adam, w, {2.0f});
  CHECK((*adam)->Slot("m", 0)[0] == 1.5f);
  CHECK((*adam)->Slot("v", 0)[0] == 1.75f);
  CHECK(RelativeError(w[0], 2.0) < 1e-6);
}

TEST_CASE("adam keeps one step count for all variables of a shard") {
  OptimizerOptions o;
  o.learning_rate = 0.01;
  auto adam = CreateOptimizer(o, {1, 2});
  REQUIRE(adam.ok());
  std::vector<float> a = {1.0f}, b = {1.0f, 2.0f};
  std::vector<float> ga = {0.5f}, gb = {0.5f, -0.5f};
  for (int t = 1; t <= 4; ++t) {
    const float* in[] = {a.data(), b.data()};
    const float* g[] = {ga.data(), gb.data()};
    float* out[] = {a.data(), b.data()};
    (*adam)->Apply(in, g, out, 1.0);
  }
  CHECK((*adam)->step() == 4);
  // Same gradient history, same update: a[0] and b[0] move together.
  CHECK(a[0] == b[0]);
  CHECK((*adam)->Slot("m", 1).size() == 2);
  CHECK((*adam)->Slot("m", 2).empty());
  CHECK((*adam)->Slot("x", 0).empty());
}

TEST_CASE("adam writes out of place without touching its input") {
  auto adam = CreateOptimizer(OptimizerOptions{}, {2});
  REQUIRE(adam.ok());
  const std::vector<float> w = {1.0f, 2.0f};
  const std::vector<float> g = {1.0f, -1.0f};
  std::vector<float> out(2, 0.0f);
  const float* in[] = {w.data()};
  const float* grads[] = {g.data()};
  float* outs[] = {out.data()};
  (*adam)->Apply(in, grads, outs, 1.0);
  CHECK(w == std::vector<float>{1.0f, 2.0f});
  CHECK(std::abs(out[0] - 0.999f) < 1e-6f);
  CHECK(std::abs(out[1] - 2.001f) < 1e-6f);
}

TEST_CASE("sgd and the learning-rate scale") {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kSgd;
  o.learning_rate = 0.5;
  auto sgd = CreateOptimizer(o, {2});
  REQUIRE(sgd.ok());
  CHECK((*sgd)->name() == "sgd");
  std::vector<float> w = {1.0f, 1.0f};
  Step(**sgd, w, {1.0f, -2.0f});
  CHECK(w == std::vector<float>{0.5f, 2.0f});
  Step(**sgd, w, {1.0f, 1.0f}, 0.25);  // lr 0.125
  CHECK(w == std::vector<float>{0.375f, 1.875f});
  CHECK((*sgd)->step() == 2);
  CHECK((*sgd)->Slot("m", 0).empty());

  // Adam scales lr_t the same way: half the scale, half the first step.
  auto a1 = CreateOptimizer(OptimizerOptions{}, {1});
  auto a2 = CreateOptimizer(OptimizerOptions{}, {1});
  std::vector<float> w1 = {0.0f}, w2 = {0.0f};
  Step(**a1, w1, {1.0f});
  Step(**a2, w2, {1.0f}, 0.5);
  CHECK(RelativeError(w2[0], w1[0] * 0.5) < 1e-6);
}

TEST_CASE("a learning-rate schedule: sgd's exact steps") {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kSgd;
  o.learning_rate = 1.0;
  o.schedule.warmup_steps = 4;
  o.schedule.warmup_from = 0.0;
  o.schedule.decay = LrSchedule::Decay::kStep;
  o.schedule.decay_every = 2;
  o.schedule.decay_factor = 0.5;
  auto sgd = CreateOptimizer(o, {1});
  REQUIRE(sgd.ok());
  // Updates 1..4 warm up (0.25, 0.5, 0.75, 1); then 1, 0.5, 0.5, 0.25.
  const std::vector<float> factors = {0.25f, 0.5f, 0.75f, 1.0f,
                                      1.0f,  0.5f, 0.5f,  0.25f};
  std::vector<float> w = {0.0f};
  float want = 0.0f;
  for (float f : factors) {
    // The rate it reports for the update is the one it applies.
    CHECK((*sgd)->NextRate(0.5) == 0.5 * f);
    Step(**sgd, w, {1.0f}, /*lr_scale=*/0.5);  // the staleness scale too
    want -= 0.5f * f;
    CHECK(w[0] == want);
  }
  // Adam reports its rate without the bias correction.
  OptimizerOptions a;
  a.learning_rate = 0.01f;
  a.schedule = o.schedule;
  auto adam = CreateOptimizer(a, {1});
  REQUIRE(adam.ok());
  CHECK((*adam)->NextRate(2.0) == Approx(0.01 * 0.25 * 2.0));
  Step(**adam, w, {1.0f});
  CHECK((*adam)->NextRate(1.0) == Approx(0.01 * 0.5));
}

TEST_CASE("a learning-rate schedule: adam's exact step, and after a restore") {
  OptimizerOptions o;
  o.schedule.scale = 2.0;
  o.schedule.decay = LrSchedule::Decay::kCosine;
  o.schedule.decay_steps = 10;
  auto adam = CreateOptimizer(o, {2});
  REQUIRE(adam.ok());
  std::vector<float> w = {0.5f, -1.0f};
  const std::vector<float> g = {0.1f, -0.3f};
  // By common/adam.h with the schedule's factor at each t.
  std::vector<float> ref_w = w, m(2, 0.0f), v(2, 0.0f);
  auto reference_step = [&](int64_t t) {
    const AdamStep c = TensorFlowAdamStep(
        AdamHyper{o.learning_rate, o.beta1, o.beta2, o.epsilon}, t,
        LrFactor(o.schedule, t));
    for (int i = 0; i < 2; ++i) {
      ref_w[i] = AdamElement(c, ref_w[i], g[i], &m[i], &v[i]);
    }
  };
  for (int64_t t = 1; t <= 3; ++t) {
    Step(**adam, w, g);
    reference_step(t);
    CHECK(w == ref_w);
  }
  // A shard restored from a checkpoint saved here goes on where the
  // schedule was (t = 4), bit for bit.
  auto restored = CreateOptimizer(o, {2});
  REQUIRE(restored.ok());
  REQUIRE((*restored)->LoadState((*adam)->SaveState()).ok());
  std::vector<float> w_restored = w;
  Step(**adam, w, g);
  Step(**restored, w_restored, g);
  reference_step(4);
  CHECK(w == ref_w);
  CHECK(w_restored == ref_w);
  CHECK(LrFactor(o.schedule, 4) != LrFactor(o.schedule, 1));  // it moved
}

// PyTorch's SGD (dampening 0) in double, for one element.
struct TorchSgd {
  double momentum, weight_decay;
  bool nesterov;
  double buf = 0;
  double Step(double w, double g, double lr) {
    double d = g + weight_decay * w;
    if (momentum > 0 || nesterov) {
      buf = momentum * buf + d;
      d = nesterov ? d + momentum * buf : buf;
    }
    return w - lr * d;
  }
};

TEST_CASE("momentum SGD: PyTorch's formulas, Nesterov and weight decay") {
  const bool nesterov = GENERATE(false, true);
  const double decay = GENERATE(0.0, 5e-4);
  INFO("nesterov " << nesterov << ", weight decay " << decay);
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kMomentum;
  o.learning_rate = 0.1;
  o.momentum = 0.9;
  o.nesterov = nesterov;
  o.weight_decay = decay;
  auto opt = CreateOptimizer(o, {3});
  REQUIRE(opt.ok());
  CHECK((*opt)->name() == "momentum");
  std::vector<float> w = {0.5f, -1.0f, 2.0f};
  std::vector<TorchSgd> torch(3, TorchSgd{0.9, decay, nesterov});
  std::vector<double> want = {0.5, -1.0, 2.0};
  const std::vector<std::vector<float>> grads = {
      {0.1f, -0.2f, 0.3f}, {0.05f, 0.1f, -0.4f}, {-0.3f, 0.0f, 0.2f}};
  for (int t = 0; t < 3; ++t) {
    Step(**opt, w, grads[t]);
    absl::Span<const float> buf = (*opt)->Slot("momentum", 0);
    REQUIRE(buf.size() == 3);
    for (int i = 0; i < 3; ++i) {
      INFO("step " << t + 1 << " element " << i);
      want[i] = torch[i].Step(want[i], grads[t][i], 0.1);
      CHECK(RelativeError(w[i], want[i]) < 1e-6);
      CHECK(std::abs(buf[i] - torch[i].buf) < 1e-6);
    }
  }
}

TEST_CASE("weight decay spares the variables in no_weight_decay") {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kSgd;
  o.learning_rate = 0.1;
  o.weight_decay = 0.5;
  o.no_weight_decay = {"bn/gamma"};
  // A split variable's slices are exempt too: they name their variable
  // (VariableLayout::VariableNames), not a name to parse.
  auto opt = CreateOptimizer(o, {1, 1, 1}, {"conv/w", "bn/gamma", "bn/gamma"});
  REQUIRE(opt.ok());
  std::vector<float> w = {1.0f, 1.0f, 1.0f};
  const std::vector<float> g = {0.0f, 0.0f, 0.0f};
  const float* in[] = {&w[0], &w[1], &w[2]};
  const float* grads[] = {&g[0], &g[1], &g[2]};
  float* out[] = {&w[0], &w[1], &w[2]};
  (*opt)->Apply(in, grads, out, 1.0);
  CHECK(w[0] == 1.0f - 0.1f * 0.5f);
  CHECK(w[1] == 1.0f);
  CHECK(w[2] == 1.0f);
}

TEST_CASE("the momentum slot is saved and restored bit-exactly") {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kMomentum;
  o.learning_rate = 0.05;
  o.momentum = 0.9;
  o.nesterov = true;
  auto a = CreateOptimizer(o, {4});
  REQUIRE(a.ok());
  std::vector<float> w = {0.1f, 0.2f, -0.3f, 0.4f};
  Step(**a, w, {0.3f, -0.1f, 0.7f, 1e-3f});
  Step(**a, w, {-0.2f, 0.4f, 0.1f, 2e-3f});
  const OptimizerState saved = (*a)->SaveState();
  CHECK(saved.kind == OptimizerOptions::Kind::kMomentum);
  CHECK(saved.slot_names == std::vector<std::string>{"momentum"});
  auto b = CreateOptimizer(o, {4});
  REQUIRE(b.ok());
  REQUIRE((*b)->LoadState(saved).ok());
  std::vector<float> w2 = w;
  Step(**a, w, {0.5f, 0.5f, -0.5f, 0.25f});
  Step(**b, w2, {0.5f, 0.5f, -0.5f, 0.25f});
  CHECK(w == w2);
  CHECK((*b)->step() == 3);
  // A checkpoint of another optimizer is refused, naming both.
  auto adam = CreateOptimizer(OptimizerOptions{}, {4});
  REQUIRE(adam.ok());
  const absl::Status s = (*adam)->LoadState(saved);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("'momentum'") && Catch::Contains("adam"));
  CHECK_FALSE((*b)->LoadState((*adam)->SaveState()).ok());
}

TEST_CASE("an update on a pool's threads: the same bits as on one") {
  // Variables larger than a thread's least share (kMinBulkPartBytes of
  // floats, 1M) and small ones between them, one without a gradient: the
  // pool cuts the large ones between its threads.
  OptimizerOptions o;
  SECTION("adam") {}
  SECTION("sgd") {
    o.kind = OptimizerOptions::Kind::kSgd;
    o.learning_rate = 0.1;
  }
  SECTION("momentum, nesterov, weight decay") {
    o.kind = OptimizerOptions::Kind::kMomentum;
    o.learning_rate = 0.1;
    o.momentum = 0.9;
    o.nesterov = true;
    o.weight_decay = 5e-4;
  }
  const std::vector<int64_t> sizes = {2200003, 7, 0, 1048577, 5, 65536};
  ThreadPool pool(3);
  auto alone = CreateOptimizer(o, sizes);
  auto shared = CreateOptimizer(o, sizes, {}, &pool);
  REQUIRE(alone.ok());
  REQUIRE(shared.ok());
  std::vector<std::vector<float>> w1, w2, g;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<float>& w = w1.emplace_back(sizes[k]);
    std::vector<float>& gk = g.emplace_back(sizes[k]);
    for (int64_t i = 0; i < sizes[k]; ++i) {
      w[i] = std::sin(0.001f * static_cast<float>(i + k));
      gk[i] = std::cos(0.003f * static_cast<float>(i) + k);
    }
    w2.push_back(w);
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<const float*> in1, in2, grads;
    std::vector<float*> out1, out2;
    for (size_t k = 0; k < sizes.size(); ++k) {
      in1.push_back(w1[k].data());
      in2.push_back(w2[k].data());
      out1.push_back(w1[k].data());
      out2.push_back(w2[k].data());
      grads.push_back(k == 4 ? nullptr : g[k].data());  // 4: no gradient
    }
    (*alone)->Apply(in1, grads, out1, 1.0);
    (*shared)->Apply(in2, grads, out2, 1.0);
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    INFO("variable " << k);
    CHECK(std::memcmp(w1[k].data(), w2[k].data(),
                      w1[k].size() * sizeof(float)) == 0);
    for (const char* slot : {"m", "v", "momentum"}) {
      absl::Span<const float> s1 = (*alone)->Slot(slot, static_cast<int>(k));
      absl::Span<const float> s2 = (*shared)->Slot(slot, static_cast<int>(k));
      REQUIRE(s1.size() == s2.size());
      CHECK(std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)) == 0);
    }
  }
  // The updates changed the weights (the comparison compared something).
  CHECK(w1[0][100] != std::sin(0.001f * 100));
}

TEST_CASE("bad optimizer options are refused") {
  OptimizerOptions o;
  o.learning_rate = -1;
  CHECK(CreateOptimizer(o, {1}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  o = OptimizerOptions{};
  o.beta1 = 1.0;
  absl::Status s = CreateOptimizer(o, {1}).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message().find("beta1=1") != absl::string_view::npos);
  CHECK(!CreateOptimizer(OptimizerOptions{}, {-1}).ok());
  o = OptimizerOptions{};
  o.kind = OptimizerOptions::Kind::kMomentum;
  o.momentum = 1.0;
  s = CreateOptimizer(o, {1}).status();
  CHECK(s.message().find("momentum=1: must be in [0, 1)") !=
        absl::string_view::npos);
  o.momentum = 0.0;
  o.nesterov = true;
  s = CreateOptimizer(o, {1}).status();
  CHECK(s.message().find("nesterov") != absl::string_view::npos);
  o = OptimizerOptions{};
  o.weight_decay = 1e-4;  // Adam keeps TensorFlow's form
  CHECK(!CreateOptimizer(o, {1}).ok());
}

}  // namespace
}  // namespace ps
}  // namespace psgd
