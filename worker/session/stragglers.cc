#include "worker/session/stragglers.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace psgd {
namespace {

absl::Duration Seconds(double s) { return absl::Seconds(s); }

std::string DescribeDistribution(const config::DelayDistribution& d) {
  switch (d.kind()) {
    case config::DelayDistribution::NONE:
      return "none";
    case config::DelayDistribution::CONSTANT:
      return absl::StrFormat("constant %g s", d.shift_seconds());
    case config::DelayDistribution::SHIFTED_EXPONENTIAL:
      return absl::StrFormat("%g s + exponential of mean %g s",
                             d.shift_seconds(), d.mean_seconds());
    case config::DelayDistribution::PARETO:
      return absl::StrFormat("Pareto of scale %g s, alpha %g",
                             d.scale_seconds(), d.alpha());
  }
  return "unknown";
}

}  // namespace

absl::Duration DrawDelay(const config::DelayDistribution& d,
                         std::mt19937_64* engine) {
  switch (d.kind()) {
    case config::DelayDistribution::NONE:
      return absl::ZeroDuration();
    case config::DelayDistribution::CONSTANT:
      return Seconds(d.shift_seconds());
    case config::DelayDistribution::SHIFTED_EXPONENTIAL: {
      std::exponential_distribution<double> e(1.0 / d.mean_seconds());
      return Seconds(d.shift_seconds() + e(*engine));
    }
    case config::DelayDistribution::PARETO: {
      // U in (0, 1]: never divides by zero.
      const double u =
          1.0 - std::uniform_real_distribution<double>(0.0, 1.0)(*engine);
      // A day at most: a draw of alpha <= 1's infinite-mean tail must
      // still end.
      return Seconds(
          std::min(d.scale_seconds() * std::pow(u, -1.0 / d.alpha()), 86400.0));
    }
  }
  return absl::ZeroDuration();
}

std::mt19937_64 EmulationEngine(uint64_t seed, int worker_index, int stream) {
  std::seed_seq seq{static_cast<uint32_t>(seed),
                    static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(worker_index),
                    static_cast<uint32_t>(stream), 0x5f3759dfu};
  return std::mt19937_64(seq);
}

StragglerEmulator StragglerEmulator::ForWorker(
    const config::ClusterConfig& config, int worker_index) {
  StragglerEmulator e;
  for (const config::StragglerConfig& s : config.stragglers()) {
    bool mine = s.workers().empty();
    for (int w : s.workers()) mine |= w == worker_index;
    if (!mine) continue;
    e.entries_.push_back(s);
    e.transfer_ += Seconds(s.transfer_delay_seconds());
  }
  e.engine_ = EmulationEngine(config.training().seed(), worker_index, 1);
  return e;
}

InjectedDelay StragglerEmulator::AfterCompute(absl::Duration compute) {
  InjectedDelay d;
  for (const config::StragglerConfig& s : entries_) {
    d.slow += (s.slow_factor() - 1.0) * compute;
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(engine_);
    if (u < s.stall_probability()) d.stall += Seconds(s.stall_seconds());
    d.extra += DrawDelay(s.extra_delay(), &engine_);
  }
  return d;
}

absl::StatusOr<ComputeTimes> ComputeTimes::Create(
    const config::EmulationConfig& emulation, uint64_t seed, int worker_index) {
  ComputeTimes t;
  t.engine_ = EmulationEngine(seed, worker_index, 2);
  if (emulation.compute_samples_file().empty()) {
    t.distribution_ = emulation.compute();
    t.description_ = DescribeDistribution(t.distribution_);
    return t;
  }
  const std::string& path = emulation.compute_samples_file();
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "emulation.compute_samples_file: cannot read '", path, "'"));
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    double v = 0;
    if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("emulation.compute_samples_file: ", path, ":", n, ": '",
                       text, "' is not a number of seconds >= 0"));
    }
    t.samples_.push_back(v);
  }
  if (t.samples_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "emulation.compute_samples_file: ", path, " holds no step times"));
  }
  t.description_ =
      absl::StrCat("samples of ", path, " (", t.samples_.size(), ")");
  return t;
}

absl::Duration ComputeTimes::Next() {
  if (samples_.empty()) return DrawDelay(distribution_, &engine_);
  std::uniform_int_distribution<size_t> pick(0, samples_.size() - 1);
  return Seconds(samples_[pick(engine_)]);
}

}  // namespace psgd
