// WaitingPulls: pulls held until they are ready and answered once, withdrawn,
// ended all at once, and the staleness bound's clock with the time it held
// pulls back. Pulls through a whole shard: shard_test.cc and
// shard_async_test.cc.
#include "ps/shard/waiting_pulls.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace psgd {
namespace ps {
namespace {

using Snapshot = WaitingPulls::Snapshot;

Snapshot AtStep(int64_t step) {
  auto s = std::make_shared<WeightsSnapshot>();
  s->step = step;
  return s;
}

// Runs what Release or EndAll moved out; `answers` gets each pull's answer
// under its name ("step 5" for a snapshot of step 5, else the status code).
void RunAll(WaitingPulls::Ready* ready) {
  for (auto& [done, value] : *ready) done(std::move(value));
  ready->clear();
}

WaitingPulls::PullDone Into(std::map<std::string, std::string>* answers,
                            std::string name) {
  return [answers, name](absl::StatusOr<Snapshot> value) {
    (*answers)[name] =
        value.ok()
            ? "step " + std::to_string((*value)->step)
            : std::string(absl::StatusCodeToString(value.status().code()));
  };
}

const absl::Time kT0 = absl::FromUnixSeconds(1000);

// Workers 0..n-1 live, each joined on the pulls' clock as the shard does.
Membership JoinAll(int n, WaitingPulls* pulls) {
  Membership members(n);
  for (int w = 0; w < n; ++w) {
    REQUIRE(members.Join(w, kT0));
    pulls->Join(w, members.LiveWorkers());
  }
  return members;
}

TEST_CASE("a pull is held until it is ready, and answered once") {
  WaitingPulls pulls(/*staleness_bound=*/-1, /*num_workers=*/4);
  std::map<std::string, std::string> answers;
  const uint64_t a = pulls.Hold(3, 0, Into(&answers, "a"), false, kT0);
  const uint64_t b = pulls.Hold(5, 1, Into(&answers, "b"), false, kT0);
  REQUIRE(a != 0);
  REQUIRE(b != 0);
  REQUIRE(a != b);
  CHECK(pulls.size() == 2);

  int64_t step = 3;
  std::vector<int> answered_for;
  WaitingPulls::Ready ready;
  auto release = [&]() {
    pulls.Release([&](int64_t min_step, int) { return step >= min_step; },
                  [&](int worker_id) {
                    answered_for.push_back(worker_id);
                    return AtStep(step);
                  },
                  kT0, &ready);
    RunAll(&ready);
  };
  release();
  CHECK(answers == std::map<std::string, std::string>{{"a", "step 3"}});
  CHECK(answered_for == std::vector<int>{0});
  CHECK(pulls.size() == 1);
  CHECK_FALSE(pulls.Cancel(a));  // answered: nothing to withdraw

  release();  // step 3 again: b still waits, a is not answered twice
  CHECK(answers.size() == 1);
  step = 5;
  release();
  CHECK(answers.at("b") == "step 5");
  CHECK(answered_for == std::vector<int>{0, 1});
  CHECK(pulls.size() == 0);
}

TEST_CASE("a withdrawn pull is never answered") {
  WaitingPulls pulls(-1, 2);
  std::map<std::string, std::string> answers;
  const uint64_t a = pulls.Hold(1, 0, Into(&answers, "a"), false, kT0);
  pulls.Hold(1, 1, Into(&answers, "b"), false, kT0);
  CHECK(pulls.Cancel(a));
  CHECK_FALSE(pulls.Cancel(a));
  CHECK_FALSE(pulls.Cancel(12345));  // never issued
  WaitingPulls::Ready ready;
  pulls.Release([](int64_t, int) { return true; },
                [](int) { return AtStep(1); }, kT0, &ready);
  RunAll(&ready);
  CHECK(answers == std::map<std::string, std::string>{{"b", "step 1"}});
}

TEST_CASE("EndAll answers every held pull with the status") {
  WaitingPulls pulls(-1, 3);
  std::map<std::string, std::string> answers;
  pulls.Hold(7, 0, Into(&answers, "a"), false, kT0);
  pulls.Hold(9, -1, Into(&answers, "evaluator"), false, kT0);
  WaitingPulls::Ready ready;
  pulls.EndAll(absl::CancelledError("shut down"), &ready);
  CHECK(pulls.size() == 0);
  CHECK(answers.empty());  // nothing runs until the shard runs the list
  RunAll(&ready);
  CHECK(answers == std::map<std::string, std::string>{
                       {"a", "CANCELLED"}, {"evaluator", "CANCELLED"}});
}

TEST_CASE("the workers with a pull held, the evaluator not among them") {
  WaitingPulls pulls(-1, 4);
  std::map<std::string, std::string> answers;
  pulls.Hold(1, 2, Into(&answers, "a"), false, kT0);
  pulls.Hold(1, -1, Into(&answers, "b"), false, kT0);
  pulls.Hold(2, 2, Into(&answers, "c"), false, kT0);
  const uint64_t d = pulls.Hold(1, 3, Into(&answers, "d"), false, kT0);
  CHECK(pulls.Workers() == std::set<int>{2, 3});
  pulls.Cancel(d);
  CHECK(pulls.Workers() == std::set<int>{2});
}

TEST_CASE("the staleness bound holds a worker ahead of the slowest other") {
  // Bound 1: a worker two pushes ahead of every other live worker waits.
  WaitingPulls pulls(/*staleness_bound=*/1, /*num_workers=*/3);
  Membership members = JoinAll(3, &pulls);
  CHECK(pulls.bounded());
  pulls.Tick(0);
  CHECK_FALSE(pulls.BoundHolds(0, members));  // one ahead: within the bound
  pulls.Tick(0);
  CHECK(pulls.BoundHolds(0, members));
  CHECK_FALSE(pulls.BoundHolds(1, members));
  CHECK_FALSE(pulls.BoundHolds(-1, members));  // the evaluator never waits

  // Held at kT0, released 2.5 s later once the others have pushed.
  std::map<std::string, std::string> answers;
  pulls.Hold(0, 0, Into(&answers, "w0"), /*bound_held=*/true, kT0);
  pulls.Hold(0, 1, Into(&answers, "w1"), /*bound_held=*/false, kT0);
  WaitingPulls::Ready ready;
  auto release = [&](absl::Time now) {
    pulls.Release(
        [&](int64_t, int worker_id) {
          return !pulls.BoundHolds(worker_id, members);
        },
        [](int) { return AtStep(0); }, now, &ready);
    RunAll(&ready);
  };
  release(kT0 + absl::Seconds(1));
  CHECK(answers.count("w0") == 0);
  CHECK(answers.count("w1") == 1);
  pulls.Tick(1);
  pulls.Tick(2);
  release(kT0 + absl::Milliseconds(2500));
  CHECK(answers.count("w0") == 1);

  ShardStatus s;
  pulls.AddStatus(&s);
  CHECK(s.pulls_waiting == 0);
  CHECK(s.ssp_blocked_pulls == 1);
  CHECK(s.ssp_blocked_seconds == Approx(2.5));

  // A new generation: every clock is 0 and nobody is ahead.
  pulls.Tick(0);
  pulls.Tick(0);
  pulls.Tick(0);
  CHECK(pulls.BoundHolds(0, members));
  pulls.ResetClocks();
  CHECK_FALSE(pulls.BoundHolds(0, members));
}

TEST_CASE("a slow worker that leaves holds nobody back") {
  WaitingPulls pulls(0, 2);
  Membership members = JoinAll(2, &pulls);
  pulls.Tick(0);
  CHECK(pulls.BoundHolds(0, members));
  members.Leave(1);
  CHECK_FALSE(pulls.BoundHolds(0, members));
}

TEST_CASE("without a bound no pull is ever held back") {
  WaitingPulls pulls(-1, 2);
  Membership members = JoinAll(2, &pulls);
  for (int i = 0; i < 100; ++i) pulls.Tick(0);
  CHECK_FALSE(pulls.bounded());
  CHECK_FALSE(pulls.BoundHolds(0, members));
}

}  // namespace
}  // namespace ps
}  // namespace psgd
