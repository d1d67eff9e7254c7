// The adaptive N rule in exact arithmetic: times in whole seconds, so that
// every offset, mean and rate is exact; the choice follows n / T(n).
#include "ps/state/adaptive_backups.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace ps {
namespace {

absl::Time At(double seconds) {
  return absl::UnixEpoch() + absl::Seconds(seconds);
}

TEST_CASE("a persistently slow worker is left out once the window saw it") {
  // M = 4; three workers take 1 s, one takes 3 s.
  AdaptiveBackups a({/*n_min=*/1, /*n_max=*/4, /*window=*/3, /*warmup=*/2});
  CHECK(a.n() == 4);
  a.Published(0, At(0));
  for (int w = 0; w < 3; ++w) a.Arrived(0, At(1));
  a.Arrived(0, At(3));
  CHECK(a.Completed(0, At(3)) == 4);  // warming up: n_max
  CHECK(a.last_rates().empty());
  a.Published(1, At(3));
  for (int w = 0; w < 3; ++w) a.Arrived(1, At(4));
  a.Arrived(1, At(6));
  // Steps 0 and 1: offsets {1, 1, 1, 3}; T = 1, 1, 1, 3; n / T = 1, 2, 3,
  // 4/3: three.
  CHECK(a.Completed(1, At(6)) == 3);
  REQUIRE(a.last_rates().size() == 4);
  CHECK(a.last_rates()[0] == 1.0);
  CHECK(a.last_rates()[2] == 3.0);
  CHECK(a.last_rates()[3] == Approx(4.0 / 3.0));
  // Step 2 completes at 7 with three; the slow gradient has not come: its
  // 4th offset counts as the step's age, 1 s. T(4) = (3 + 3 + 1) / 3.
  a.Published(2, At(6));
  for (int w = 0; w < 3; ++w) a.Arrived(2, At(7));
  CHECK(a.Completed(2, At(7)) == 3);
  CHECK(a.last_rates()[3] == Approx(4.0 / (7.0 / 3.0)));
  CHECK(a.n() == 3);
}

TEST_CASE("equal rates go to the larger N; a recovered worker comes back") {
  AdaptiveBackups a({2, 4, 2, 0});
  a.Published(0, At(0));
  // Offsets 1, 1, 2, 2: n / T = 1, 2, 1.5, 2 for n = 1..4: n in [2, 4]
  // gives 2, 1.5, 2: the tie of 2 and 4 goes to 4.
  a.Arrived(0, At(1));
  a.Arrived(0, At(1));
  a.Arrived(0, At(2));
  a.Arrived(0, At(2));
  CHECK(a.Completed(0, At(2)) == 4);
  // Then one worker stalls for 10 s (step 1 waits for its 4th gradient):
  // offsets {1, 1, 2, 2} and {1, 1, 1, 10}: T = 1, 1.5, 6 for n = 2..4:
  // rates 2, 2, 2/3: the tie goes to 3.
  a.Published(1, At(2));
  for (int w = 0; w < 3; ++w) a.Arrived(1, At(3));
  a.Arrived(1, At(12));
  CHECK(a.Completed(1, At(12)) == 3);
  // Steps with all four gradients at 1 s: while the stalled step is in the
  // window (of 2) N stays 3; once it has left, 4 again.
  a.Published(2, At(12));
  for (int w = 0; w < 4; ++w) a.Arrived(2, At(13));
  CHECK(a.Completed(2, At(13)) == 3);
  a.Published(3, At(13));
  for (int w = 0; w < 4; ++w) a.Arrived(3, At(14));
  CHECK(a.Completed(3, At(14)) == 4);
}

TEST_CASE("the minimum N binds where fewer would average faster") {
  // Offsets 1, 3, 6, 12: n / T = 1, 2/3, 1/2, 1/3 for n = 1..4, best at 1.
  auto choose = [](int n_min) {
    AdaptiveBackups a({n_min, /*n_max=*/4, /*window=*/1, /*warmup=*/0});
    a.Published(0, At(0));
    for (double t : {1, 3, 6, 12}) a.Arrived(0, At(t));
    return std::make_pair(a.Completed(0, At(12)), a.last_rates());
  };
  CHECK(choose(1).first == 1);
  const auto [n, rates] = choose(2);
  CHECK(n == 2);               // not 1: the minimum
  REQUIRE(rates.size() == 3);  // n = 2..4
  CHECK(rates[0] == Approx(2.0 / 3.0));
  CHECK(rates[2] == Approx(1.0 / 3.0));
}

TEST_CASE("pushes for steps outside the window are ignored") {
  AdaptiveBackups a({1, 2, 1, 0});
  a.Arrived(5, At(1));  // nothing published yet
  a.Published(0, At(0));
  a.Arrived(0, At(2));
  a.Arrived(0, At(2));
  CHECK(a.Completed(0, At(2)) == 2);
  a.Published(1, At(2));
  a.Arrived(0, At(100));  // step 0 is out of the window of 1 once 1 is done
  a.Arrived(1, At(3));
  a.Arrived(1, At(3));
  CHECK(a.Completed(1, At(3)) == 2);
  CHECK(a.last_rates()[1] == 2.0);  // T(2) = 1: step 0's late push unseen
}

TEST_CASE("bad options are refused naming the field") {
  CHECK(ValidateAdaptiveBackupOptions({1, 4, 20, 5}, 4).ok());
  CHECK_THAT(
      std::string(ValidateAdaptiveBackupOptions({1, 5, 20, 5}, 4).message()),
      Catch::Contains("max_replicas 5 is more than total_num_replicas (4)"));
  CHECK_THAT(
      std::string(ValidateAdaptiveBackupOptions({3, 2, 20, 5}, 4).message()),
      Catch::Contains("min_replicas 3"));
  CHECK_THAT(
      std::string(ValidateAdaptiveBackupOptions({0, 2, 20, 5}, 4).message()),
      Catch::Contains("min_replicas 0"));
  CHECK_THAT(
      std::string(ValidateAdaptiveBackupOptions({1, 2, 0, 5}, 4).message()),
      Catch::Contains("window_steps"));
  CHECK_THAT(
      std::string(ValidateAdaptiveBackupOptions({1, 2, 5, -1}, 4).message()),
      Catch::Contains("warmup_steps"));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
