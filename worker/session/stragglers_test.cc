// Straggler emulation's draws (seeded, per worker, as the config says),
// emulated compute's times, and the config's refusals of bad settings.
#include "worker/session/stragglers.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "common/cluster_config.h"

namespace psgd {
namespace {

constexpr char kBase[] = R"(
name: "s"
ps { address: "127.0.0.1:5000" }
worker { address: "127.0.0.1:6000" }
worker { address: "127.0.0.1:6001" }
worker { address: "127.0.0.1:6002" }
training { steps: 10 seed: 7 }
data { source: SYNTHETIC }
model { name: "cifar10_linear" }
)";

ClusterConfig Config(const std::string& extra) {
  absl::StatusOr<ClusterConfig> c =
      ParseClusterConfig(std::string(kBase) + extra, "s.pbtxt");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return *c;
}

std::string ErrorOf(const std::string& extra) {
  absl::StatusOr<ClusterConfig> c =
      ParseClusterConfig(std::string(kBase) + extra, "s.pbtxt");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

TEST_CASE("a worker takes the entries that name it or every worker") {
  const ClusterConfig c = Config(R"(
stragglers { workers: 1 slow_factor: 3 transfer_delay_seconds: 0.25 }
stragglers { transfer_delay_seconds: 0.5 }
)");
  StragglerEmulator w0 = StragglerEmulator::ForWorker(c, 0);
  StragglerEmulator w1 = StragglerEmulator::ForWorker(c, 1);
  CHECK(w0.enabled());
  CHECK(w0.transfer() == absl::Milliseconds(500));
  CHECK(w1.transfer() == absl::Milliseconds(750));
  // 3x slow: two more computes' worth after each compute; exact.
  CHECK(w1.AfterCompute(absl::Milliseconds(55)).total() ==
        absl::Milliseconds(110));
  CHECK(w0.AfterCompute(absl::Milliseconds(55)).total() ==
        absl::ZeroDuration());
  CHECK_FALSE(StragglerEmulator::ForWorker(Config(""), 0).enabled());
}

TEST_CASE("stalls come with their probability, seeded per worker") {
  const ClusterConfig c =
      Config("stragglers { stall_probability: 0.01 stall_seconds: 1 }");
  auto count = [&](int worker, std::vector<int>* at) {
    StragglerEmulator e = StragglerEmulator::ForWorker(c, worker);
    int stalls = 0;
    for (int step = 0; step < 10000; ++step) {
      const InjectedDelay d = e.AfterCompute(absl::Milliseconds(55));
      CHECK(d.slow == absl::ZeroDuration());
      if (d.stall > absl::ZeroDuration()) {
        CHECK(d.stall == absl::Seconds(1));
        ++stalls;
        at->push_back(step);
      }
    }
    return stalls;
  };
  std::vector<int> a, b, again;
  const int n = count(0, &a);
  CHECK(n >= 50);
  CHECK(n <= 150);
  count(1, &b);
  count(0, &again);
  CHECK(a == again);  // the same seed and worker: the same steps
  CHECK(a != b);      // another worker: others
  // Probabilities 0 and 1.
  StragglerEmulator never = StragglerEmulator::ForWorker(
      Config("stragglers { stall_probability: 0 stall_seconds: 1 }"), 0);
  StragglerEmulator always = StragglerEmulator::ForWorker(
      Config("stragglers { stall_probability: 1 stall_seconds: 0.5 }"), 0);
  for (int i = 0; i < 100; ++i) {
    CHECK(never.AfterCompute(absl::Milliseconds(1)).total() ==
          absl::ZeroDuration());
    CHECK(always.AfterCompute(absl::Milliseconds(1)).total() ==
          absl::Milliseconds(500));
  }
}

TEST_CASE("delays are drawn from their distributions") {
  std::mt19937_64 engine = EmulationEngine(1, 0, 0);
  config::DelayDistribution d;
  CHECK(DrawDelay(d, &engine) == absl::ZeroDuration());
  d.set_kind(config::DelayDistribution::CONSTANT);
  d.set_shift_seconds(0.125);
  CHECK(DrawDelay(d, &engine) == absl::Milliseconds(125));
  d.set_kind(config::DelayDistribution::SHIFTED_EXPONENTIAL);
  d.set_mean_seconds(0.5);
  double sum = 0;
  for (int i = 0; i < 20000; ++i) {
    const double s = absl::ToDoubleSeconds(DrawDelay(d, &engine));
    CHECK(s >= 0.125);
    sum += s;
  }
  CHECK(sum / 20000 == Approx(0.625).epsilon(0.05));
  d.set_kind(config::DelayDistribution::PARETO);
  d.set_scale_seconds(0.01);
  d.set_alpha(1.5);
  int above_ten_times = 0;
  for (int i = 0; i < 20000; ++i) {
    const absl::Duration x = DrawDelay(d, &engine);
    CHECK(x >= absl::Milliseconds(10));
    above_ten_times += x > absl::Milliseconds(100);
  }
  // P(X > 10 x_m) = 10^-1.5 = 3.2%.
  CHECK(above_ten_times > 400);
  CHECK(above_ten_times < 900);
}

TEST_CASE("emulated compute draws from a distribution or measured times") {
  config::EmulationConfig e;
  e.mutable_compute()->set_kind(config::DelayDistribution::CONSTANT);
  e.mutable_compute()->set_shift_seconds(0.0625);  // exact in float
  absl::StatusOr<ComputeTimes> t = ComputeTimes::Create(e, 1, 0);
  REQUIRE(t.ok());
  CHECK(t->Next() == absl::Microseconds(62500));
  CHECK(t->description() == "constant 0.0625 s");

  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/times";
  std::ofstream(path) << "# compute_s of a real run\n0.05\n0.07\n\n";
  config::EmulationConfig f;
  f.set_compute_samples_file(path);
  t = ComputeTimes::Create(f, 1, 0);
  REQUIRE(t.ok());
  bool saw[2] = {false, false};
  for (int i = 0; i < 100; ++i) {
    const absl::Duration x = t->Next();
    REQUIRE((x == absl::Milliseconds(50) || x == absl::Milliseconds(70)));
    saw[x == absl::Milliseconds(70)] = true;
  }
  CHECK((saw[0] && saw[1]));

  std::ofstream(path) << "0.05\nfast\n";
  absl::Status s = ComputeTimes::Create(f, 1, 0).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains(path + ":2") && Catch::Contains("'fast'"));
  f.set_compute_samples_file(path + ".missing");
  CHECK(absl::IsNotFound(ComputeTimes::Create(f, 1, 0).status()));
}

TEST_CASE("bad straggler and emulation settings are refused naming them") {
  CHECK_THAT(ErrorOf("stragglers { stall_probability: 1.5 }"),
             Catch::Contains("s.pbtxt:") &&
                 Catch::Contains("stragglers[0].stall_probability") &&
                 Catch::Contains("not in [0, 1]"));
  CHECK_THAT(ErrorOf("stragglers { stall_seconds: -1 }"),
             Catch::Contains("stragglers[0].stall_seconds"));
  CHECK_THAT(ErrorOf("stragglers { } stragglers { slow_factor: 0.5 }"),
             Catch::Contains("stragglers[1].slow_factor"));
  CHECK_THAT(ErrorOf("stragglers { transfer_delay_seconds: -0.1 }"),
             Catch::Contains("stragglers[0].transfer_delay_seconds"));
  CHECK_THAT(ErrorOf("stragglers { workers: 3 }"),
             Catch::Contains("stragglers[0].workers") &&
                 Catch::Contains("worker 3 is not among the config's 3"));
  CHECK_THAT(ErrorOf("stragglers { extra_delay { kind: PARETO alpha: 2 } }"),
             Catch::Contains("stragglers[0].extra_delay.scale_seconds"));
  CHECK_THAT(ErrorOf("stragglers { extra_delay { kind: PARETO "
                     "scale_seconds: 0.1 alpha: -1 } }"),
             Catch::Contains("stragglers[0].extra_delay.alpha"));
  CHECK_THAT(ErrorOf("stragglers { extra_delay { kind: SHIFTED_EXPONENTIAL "
                     "shift_seconds: -1 mean_seconds: 1 } }"),
             Catch::Contains("extra_delay.shift_seconds"));
  CHECK_THAT(ErrorOf("emulation { }"),
             Catch::Contains("emulation") &&
                 Catch::Contains("exactly one of compute and "
                                 "compute_samples_file"));
  CHECK_THAT(ErrorOf("emulation { compute { kind: SHIFTED_EXPONENTIAL } }"),
             Catch::Contains("emulation.compute.mean_seconds"));
  std::string external = kBase;
  external.replace(external.find("cifar10_linear"), 14, "external");
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(
      external + "emulation { compute { kind: CONSTANT shift_seconds: 1 } }",
      "s.pbtxt");
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(std::string(c.status().message()),
             Catch::Contains("model 'external'"));
  std::string epochs = kBase;
  epochs.replace(epochs.find("steps: 10"), 9, "epochs: 1");
  c = ParseClusterConfig(
      epochs + "emulation { compute { kind: CONSTANT shift_seconds: 1 } }",
      "s.pbtxt");
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(std::string(c.status().message()),
             Catch::Contains("training.epochs"));
}

}  // namespace
}  // namespace psgd
