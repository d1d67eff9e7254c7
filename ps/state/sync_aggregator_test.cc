#include "ps/state/sync_aggregator.h"

#include <catch2/catch.hpp>

namespace psgd {
namespace ps {
namespace {

using Verdict = SyncAggregator::Verdict;

TEST_CASE("gradients are classified by the step they were computed from") {
  CHECK(SyncAggregator::Classify(5, 5) == Verdict::kAccept);
  CHECK(SyncAggregator::Classify(5, 4) == Verdict::kSurplus);
  CHECK(SyncAggregator::Classify(5, 3) == Verdict::kStale);
  CHECK(SyncAggregator::Classify(5, 0) == Verdict::kStale);
  CHECK(SyncAggregator::Classify(5, 6) == Verdict::kFuture);
  CHECK(SyncAggregator::Classify(0, 0) == Verdict::kAccept);
}

TEST_CASE("a step needs min(N, live) gradients, at least one") {
  SyncAggregator a({2}, 3);
  CHECK(a.Required(4) == 3);
  CHECK(a.Required(3) == 3);
  CHECK(a.Required(2) == 2);
  CHECK(a.Required(0) == 1);
  CHECK(!a.IsComplete(0));  // nothing gathered: nothing to complete
  const std::vector<float> g = {1.0f, 2.0f};
  const float* grads[] = {g.data()};
  a.Add(grads);
  CHECK(!a.IsComplete(4));
  CHECK(a.IsComplete(1));
  CHECK(a.IsComplete(0));
  a.Add(grads);
  a.Add(grads);
  CHECK(a.IsComplete(4));
}

TEST_CASE("with N following the live workers: live minus the backups") {
  SyncAggregator a({2}, 3);
  a.set_backups(1);  // M = 4, N = 3
  CHECK(a.Required(4) == 3);
  CHECK(a.Required(3) == 2);
  CHECK(a.Required(2) == 1);
  CHECK(a.Required(1) == 1);
  CHECK(a.Required(6) == 5);  // more live than the config listed
  CHECK(a.replicas_to_aggregate() == 3);
}

TEST_CASE("the mean of the gathered gradients, then a fresh step") {
  SyncAggregator a({2, 1}, 3);
  const std::vector<float> g1 = {1.0f, 2.0f}, h1 = {3.0f};
  const std::vector<float> g2 = {2.0f, 4.0f}, h2 = {6.0f};
  const std::vector<float> g3 = {6.0f, 0.0f}, h3 = {0.0f};
  for (auto [g, h] : {std::pair(&g1, &h1), {&g2, &h2}, {&g3, &h3}}) {
    const float* grads[] = {g->data(), h->data()};
    a.Add(grads);
  }
  CHECK(a.count() == 3);
  std::vector<const float*> mean = a.Mean();
  CHECK(mean[0][0] == 3.0f);
  CHECK(mean[0][1] == 2.0f);
  CHECK(mean[1][0] == 3.0f);
  a.Reset();
  CHECK(a.count() == 0);
  // The next step's first gradient replaces the old sum.
  const float* grads[] = {g1.data(), h1.data()};
  a.Add(grads);
  mean = a.Mean();
  CHECK(mean[0][1] == 2.0f);
  CHECK(mean[1][0] == 3.0f);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
