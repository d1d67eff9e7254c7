#include "ps/state/membership.h"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

namespace psgd {
namespace ps {
namespace {

TEST_CASE("workers join, leave and rejoin") {
  Membership m(4);
  const absl::Time t0 = absl::UnixEpoch();
  CHECK(m.num_live() == 0);
  CHECK(m.Join(2, t0));
  CHECK(!m.Join(2, t0));  // idempotent
  CHECK(m.Join(0, t0));
  CHECK(m.LiveWorkers() == std::vector<int>{0, 2});
  CHECK(m.Leave(2));
  CHECK(!m.Leave(2));
  CHECK(!m.Leave(3));  // never joined
  CHECK(m.num_live() == 1);
  CHECK(m.Join(2, t0));
  CHECK(m.num_live() == 2);
}

TEST_CASE("worker ids outside [0, M) are refused") {
  Membership m(2);
  CHECK(m.CheckWorkerId(1).ok());
  absl::Status s = m.CheckWorkerId(2);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() == "worker_id 2 is not in [0, total_num_replicas=2)");
  CHECK(!m.CheckWorkerId(-1).ok());
}

TEST_CASE("last push step survives a rejoin") {
  Membership m(1);
  CHECK(m.last_push_step(0) == -1);
  m.Join(0, absl::UnixEpoch());
  m.RecordPush(0, 5);
  m.Leave(0);
  m.Join(0, absl::UnixEpoch());
  CHECK(m.last_push_step(0) == 5);
}

TEST_CASE("live workers not seen since a time, for heartbeat expiry") {
  Membership m(3);
  const absl::Time t0 = absl::UnixEpoch();
  m.Join(0, t0);
  m.Join(1, t0 + absl::Seconds(5));
  m.Join(2, t0);
  m.Touch(2, t0 + absl::Seconds(10));
  m.Leave(0);
  CHECK(m.LiveNotSeenSince(t0 + absl::Seconds(6)) == std::vector<int>{1});
  CHECK(m.LiveNotSeenSince(t0 + absl::Seconds(11)) == std::vector<int>{1, 2});
}

TEST_CASE("a new incarnation under an id is seen once; 0 records nothing") {
  Membership m(2);
  CHECK_FALSE(m.NewIncarnation(0, 0));
  CHECK(m.NewIncarnation(0, 7));  // the first process under id 0
  CHECK_FALSE(m.NewIncarnation(0, 7));
  CHECK_FALSE(m.NewIncarnation(0, 0));  // a join that sends none
  CHECK(m.NewIncarnation(0, 9));        // restarted
  CHECK_FALSE(m.NewIncarnation(1, 0));
}

TEST_CASE("failures are kept by id until the worker joins again") {
  Membership m(3);
  m.SetFailure(2, "ModelMismatchError");
  m.SetFailure(0, "out of memory");
  using Failures = std::vector<std::pair<int, std::string>>;
  CHECK(m.Failures() ==
        Failures{{0, "out of memory"}, {2, "ModelMismatchError"}});
  m.ClearFailure(0);
  CHECK(m.Failures() == Failures{{2, "ModelMismatchError"}});
  m.CountExpired();
  m.CountExpired();
  CHECK(m.expired() == 2);
  m.set_expired(5);
  CHECK(m.expired() == 5);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
