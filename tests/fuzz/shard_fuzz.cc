#include "tests/fuzz/shard_fuzz.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/ps.pb.h"
#include "ps/server/request_handler.h"
#include "ps/shard/shard.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/shard_picture.h"

namespace psgd {
namespace fuzz {
namespace {

using ps::ParameterShard;

// Waiting pulls kept at most; the oldest is withdrawn beyond that.
constexpr size_t kMaxWaitingPulls = 32;

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The codes a refusal may carry (ps/shard/shard.h,
// ps/server/request_handler.h): ABORTED is a push or pull of another generation
// than the shard's (docs/RELIABILITY.md, "Generations").
bool DocumentedRefusal(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s) ||
         absl::IsCancelled(s) || absl::IsAborted(s);
}

class Driver {
 public:
  explicit Driver(const FuzzConfig& config)
      : options_(config.ToServerOptions()) {
    absl::StatusOr<std::unique_ptr<ParameterShard>> shard =
        ParameterShard::Create(options_);
    FUZZ_EXPECT(shard.ok(), shard.status().ToString());
    shard_ = *std::move(shard);
    handler_ = std::make_unique<ps::ShardRequestHandler>(shard_.get());
  }

  void Run(FuzzOp op, absl::string_view payload);
  // Destroys the shard (which shuts it down) and checks the pulls it ended.
  void Finish();

 private:
  struct PullRecord {
    int64_t min_step = 0;
    int worker_id = -1;
    uint64_t ticket = 0;
    bool cancelled = false;
    int calls = 0;
    absl::Status status;
    int64_t step = -1;  // of the weights it got
  };

  template <typename Request, typename Response, typename Call>
  void Unary(absl::string_view payload, Call call);
  void CheckAccepted(FuzzOp op, const google::protobuf::MessageLite& request,
                     const google::protobuf::MessageLite& response);
  void CheckPush(const ps::wire::PushRequest& request,
                 const ps::wire::PushResponse& response);
  void Pull(absl::string_view payload);
  void OnPullDone(PullRecord* r, absl::StatusOr<ParameterShard::Snapshot> s);
  void CancelPull(size_t index);
  void ExpireWorkers(int sixteenths);
  void CheckWaitingPulls();
  bool Waiting(const PullRecord& r) const {
    return !r.cancelled && r.calls == 0;
  }

  const ps::ServerOptions options_;
  // Before the shard, which answers them when it is destroyed.
  std::vector<std::unique_ptr<PullRecord>> pulls_;
  std::unique_ptr<ParameterShard> shard_;
  std::unique_ptr<ps::ShardRequestHandler> handler_;
  ShardPicture before_, after_;
};

void Driver::Run(FuzzOp op, absl::string_view payload) {
  before_ = ShardPicture::Of(*shard_);
  switch (op) {
    case FuzzOp::kInitialize:
      Unary<ps::wire::InitializeRequest, ps::wire::InitializeResponse>(
          payload,
          [&](auto& q, auto* r) { return handler_->Initialize(q, r); });
      break;
    case FuzzOp::kPull:
      Pull(payload);
      break;
    case FuzzOp::kPush:
      Unary<ps::wire::PushRequest, ps::wire::PushResponse>(
          payload, [&](auto& q, auto* r) { return handler_->Push(q, r); });
      break;
    case FuzzOp::kJoin:
      Unary<ps::wire::JoinRequest, ps::wire::MembershipResponse>(
          payload, [&](auto& q, auto* r) { return handler_->Join(q, r); });
      break;
    case FuzzOp::kLeave:
      Unary<ps::wire::LeaveRequest, ps::wire::MembershipResponse>(
          payload, [&](auto& q, auto* r) { return handler_->Leave(q, r); });
      break;
    case FuzzOp::kStatus:
      Unary<ps::wire::StatusRequest, ps::wire::StatusResponse>(
          payload, [&](auto& q, auto* r) { return handler_->Status(q, r); });
      break;
    case FuzzOp::kShutdown:
      Unary<ps::wire::ShutdownRequest, ps::wire::ShutdownResponse>(
          payload, [&](auto& q, auto* r) { return handler_->Shutdown(q, r); });
      break;
    case FuzzOp::kExpireWorkers:
      ExpireWorkers(payload.empty() ? 0 : static_cast<uint8_t>(payload[0]));
      break;
    case FuzzOp::kCancelPull:
      CancelPull(payload.empty() ? 0 : static_cast<uint8_t>(payload[0]));
      break;
  }
  after_ = ShardPicture::Of(*shard_);
  ExpectConsistent(after_, options_);
  FUZZ_EXPECT(after_.status.step >= before_.status.step, "step ",
              before_.status.step, " -> ", after_.status.step);
  CheckWaitingPulls();
}

// Parses the request as gRPC would (a payload that is no valid message never
// reaches the handler) and calls the handler; a refusal must leave the
// shard as it was.
template <typename Request, typename Response, typename Call>
void Driver::Unary(absl::string_view payload, Call call) {
  constexpr bool kPush = std::is_same<Request, ps::wire::PushRequest>::value;
  constexpr bool kStatus =
      std::is_same<Request, ps::wire::StatusRequest>::value;
  constexpr bool kShutdown =
      std::is_same<Request, ps::wire::ShutdownRequest>::value;
  Request request;
  if (!request.ParseFromArray(payload.data(),
                              static_cast<int>(payload.size()))) {
    return;
  }
  Response response;
  const absl::Status status = call(request, &response);
  after_ = ShardPicture::Of(*shard_);
  const std::string what =
      absl::StrCat(request.GetTypeName(), " -> ", status.ToString());
  if (!status.ok()) {
    FUZZ_EXPECT(DocumentedRefusal(status), what);
    ExpectSameState(before_, after_, what);
    const ps::PushCounters& a = before_.status.counters;
    const ps::PushCounters& b = after_.status.counters;
    // A refused push counts once when it reached the shard's checks.
    FUZZ_EXPECT(
        b.refused - a.refused == 0 || (kPush && b.refused - a.refused == 1),
        what, ": refused ", a.refused, " -> ", b.refused);
    FUZZ_EXPECT(
        b.refused_too_stale - a.refused_too_stale <= b.refused - a.refused,
        what);
    return;
  }
  const bool shut = before_.status.shutting_down;
  FUZZ_EXPECT(!shut || kStatus || kShutdown, what, " after Shutdown");
  FUZZ_EXPECT(after_.status.counters.refused == before_.status.counters.refused,
              what);
  if constexpr (kPush) {
    CheckPush(request, response);
  } else if constexpr (std::is_same<Request,
                                    ps::wire::InitializeRequest>::value) {
    const bool was = before_.status.initialized;
    FUZZ_EXPECT(response.already_initialized() == was, what);
    FUZZ_EXPECT(response.step() == after_.status.step, what);
    if (was) {
      ExpectSameState(before_, after_, what);
    } else {
      // The weights are the request's values.
      FUZZ_EXPECT(after_.status.step == 0 && after_.snapshot != nullptr, what);
      for (const ps::wire::TensorData& t : request.variables()) {
        const int i = after_.snapshot->layout->Find(t.name());
        FUZZ_EXPECT(i >= 0, what, ": no variable '", t.name(), "'");
        const std::vector<float>& w = after_.weights[i];
        FUZZ_EXPECT(w.size() * sizeof(float) == t.data().size() &&
                        (w.empty() || std::memcmp(w.data(), t.data().data(),
                                                  t.data().size()) == 0),
                    what, ": variable '", t.name(), "' holds other values");
      }
    }
  } else if constexpr (std::is_same<Response,
                                    ps::wire::MembershipResponse>::value) {
    const int id = request.worker_id();
    const bool join = std::is_same<Request, ps::wire::JoinRequest>::value;
    const std::vector<int>& live = after_.status.live_workers;
    FUZZ_EXPECT(Contains(live, id) == join, what);
    FUZZ_EXPECT(std::vector<int>(response.live_workers().begin(),
                                 response.live_workers().end()) == live,
                what);
    FUZZ_EXPECT(response.step() == after_.status.step, what);
    std::vector<int> expected = before_.status.live_workers;
    expected.erase(std::remove(expected.begin(), expected.end(), id),
                   expected.end());
    if (join) {
      expected.push_back(id);
      std::sort(expected.begin(), expected.end());
    }
    FUZZ_EXPECT(expected == live, what, ": live [",
                absl::StrJoin(before_.status.live_workers, ","), "] -> [",
                absl::StrJoin(live, ","), "]");
    // Only a leave may complete the step (with what was gathered).
    const int64_t by_leave = after_.status.counters.completed_by_leave -
                             before_.status.counters.completed_by_leave;
    FUZZ_EXPECT(after_.status.step - before_.status.step == by_leave &&
                    (by_leave == 0 || (!join && by_leave == 1)),
                what, ": step ", before_.status.step, " -> ",
                after_.status.step);
    if (by_leave == 0) {
      FUZZ_EXPECT(
          after_.status.pending_gradients == before_.status.pending_gradients,
          what);
    }
  } else if constexpr (kStatus) {
    ExpectSameState(before_, after_, what);
    FUZZ_EXPECT(
        response.step() == after_.status.step &&
            response.initialized() == after_.status.initialized &&
            response.counters().applied() == after_.status.counters.applied,
        what);
  } else {  // Shutdown
    FUZZ_EXPECT(after_.status.shutting_down, what);
    FUZZ_EXPECT(after_.status.step == before_.status.step, what);
    for (const auto& r : pulls_) {
      FUZZ_EXPECT(!Waiting(*r), what, ": a pull still waits");
    }
  }
}

void Driver::CheckPush(const ps::wire::PushRequest& request,
                       const ps::wire::PushResponse& response) {
  const ps::ShardStatus& a = before_.status;
  const ps::ShardStatus& b = after_.status;
  const std::string what =
      absl::StrCat("push from worker ", request.worker_id(), " for step ",
                   request.step(), " at step ", a.step);
  if (response.staged()) {
    // A part that does not complete its push counts for nothing.
    FUZZ_EXPECT(request.partial(), what, ": a whole push was staged");
    ExpectSameState(before_, after_, what + ": a staged part");
    return;
  }
  FUZZ_EXPECT(Contains(a.live_workers, request.worker_id()), what,
              ": accepted from a worker that is not live");
  FUZZ_EXPECT(request.step() >= 0 && request.step() <= a.step, what,
              ": accepted a step from the future");
  FUZZ_EXPECT(response.step() == b.step, what);
  FUZZ_EXPECT(b.live_workers == a.live_workers, what);
  const ps::PushCounters& x = a.counters;
  const ps::PushCounters& y = b.counters;
  const int64_t moved = (y.aggregated - x.aggregated) +
                        (y.applied - x.applied) +
                        (y.dropped_stale - x.dropped_stale) +
                        (y.dropped_surplus - x.dropped_surplus);
  FUZZ_EXPECT(moved == 1 && y.completed_by_leave == x.completed_by_leave, what,
              ": ", moved, " outcome counters moved");
  switch (response.outcome()) {
    case ps::wire::APPLIED:
      FUZZ_EXPECT(y.applied == x.applied + 1 && b.step == a.step + 1, what);
      FUZZ_EXPECT(b.pending_gradients == 0, what);
      if (options_.mode == ps::Mode::kAsync) {
        const int64_t staleness = a.step - request.step();
        FUZZ_EXPECT(response.staleness() == staleness, what, ": staleness ",
                    response.staleness());
        FUZZ_EXPECT(options_.max_push_staleness < 0 ||
                        staleness <= options_.max_push_staleness,
                    what, ": beyond the bound");
      } else {
        FUZZ_EXPECT(request.step() == a.step, what);
      }
      break;
    case ps::wire::AGGREGATED:
      FUZZ_EXPECT(options_.mode == ps::Mode::kSync &&
                      y.aggregated == x.aggregated + 1 && b.step == a.step &&
                      request.step() == a.step,
                  what);
      FUZZ_EXPECT(b.pending_gradients == a.pending_gradients + 1, what);
      break;
    case ps::wire::DROPPED_STALE:
    case ps::wire::DROPPED_SURPLUS: {
      const bool surplus = response.outcome() == ps::wire::DROPPED_SURPLUS;
      FUZZ_EXPECT(options_.mode == ps::Mode::kSync, what);
      FUZZ_EXPECT(
          surplus ? request.step() == a.step - 1 : request.step() < a.step - 1,
          what, ": outcome ", static_cast<int>(response.outcome()));
      // Only its counter moved (checked above).
      ShardPicture same = after_;
      same.status.counters = before_.status.counters;
      ExpectSameState(before_, same, what);
      break;
    }
    default:
      Fail("known outcome",
           absl::StrCat(what, ": ", static_cast<int>(response.outcome())));
  }
}

void Driver::Pull(absl::string_view payload) {
  ps::wire::PullRequest request;
  if (!request.ParseFromArray(payload.data(),
                              static_cast<int>(payload.size()))) {
    return;
  }
  size_t waiting = 0;
  for (const auto& r : pulls_) waiting += Waiting(*r);
  if (waiting >= kMaxWaitingPulls) CancelPull(0);
  pulls_.push_back(std::make_unique<PullRecord>());
  PullRecord* r = pulls_.back().get();
  r->min_step = request.min_step();
  r->worker_id = request.worker_id();
  r->ticket = handler_->Pull(
      request, [this, r](absl::StatusOr<ParameterShard::Snapshot> s) {
        OnPullDone(r, std::move(s));
      });
  const ps::ShardStatus& a = before_.status;
  const std::string what =
      absl::StrCat("pull for step ", r->min_step, " by worker ", r->worker_id,
                   " at step ", a.step);
  const bool valid =
      request.cluster() == kCluster && r->min_step >= 0 && !a.shutting_down &&
      (request.generation() == 0 || request.generation() == a.generation) &&
      (r->worker_id == -1 ||
       (r->worker_id >= 0 && r->worker_id < options_.total_num_replicas));
  if (r->ticket == 0) {
    FUZZ_EXPECT(r->calls == 1, what, ": answered ", r->calls, " times");
    FUZZ_EXPECT(
        r->status.ok() == (valid && a.initialized && a.step >= r->min_step),
        what, ": ", r->status.ToString());
    if (r->status.ok()) {
      FUZZ_EXPECT(r->step == a.step, what, ": got step ", r->step);
    }
  } else {
    FUZZ_EXPECT(
        r->calls == 0 && valid && (!a.initialized || a.step < r->min_step),
        what, ": waits");
  }
  ExpectSameState(before_, ShardPicture::Of(*shard_), what);
}

void Driver::OnPullDone(PullRecord* r,
                        absl::StatusOr<ParameterShard::Snapshot> s) {
  ++r->calls;
  FUZZ_EXPECT(r->calls == 1, "a pull answered twice");
  FUZZ_EXPECT(!r->cancelled, "a withdrawn pull answered");
  r->status = s.status();
  if (s.ok()) {
    r->step = (*s)->step;
    FUZZ_EXPECT(r->step >= r->min_step, "a pull for step ", r->min_step,
                " got step ", r->step);
  } else {
    FUZZ_EXPECT(DocumentedRefusal(s.status()), s.status().ToString());
  }
}

void Driver::CancelPull(size_t index) {
  std::vector<PullRecord*> waiting;
  for (const auto& r : pulls_) {
    if (Waiting(*r)) waiting.push_back(r.get());
  }
  if (waiting.empty()) return;
  PullRecord* r = waiting[index % waiting.size()];
  FUZZ_EXPECT(shard_->CancelPull(r->ticket), "a waiting pull not withdrawn");
  r->cancelled = true;
  FUZZ_EXPECT(!shard_->CancelPull(r->ticket), "a pull withdrawn twice");
}

void Driver::ExpireWorkers(int sixteenths) {
  const std::vector<int> gone =
      shard_->ExpireWorkers(absl::Now() + kLease * sixteenths / 16);
  after_ = ShardPicture::Of(*shard_);
  const ps::ShardStatus& a = before_.status;
  const ps::ShardStatus& b = after_.status;
  const std::string what =
      absl::StrCat("ExpireWorkers took [", absl::StrJoin(gone, ","), "]");
  FUZZ_EXPECT(gone.empty() || (options_.worker_lease > absl::ZeroDuration() &&
                               !a.shutting_down),
              what);
  FUZZ_EXPECT(std::is_sorted(gone.begin(), gone.end()), what);
  FUZZ_EXPECT(b.workers_expired ==
                  a.workers_expired + static_cast<int64_t>(gone.size()),
              what);
  for (int id : gone) {
    FUZZ_EXPECT(Contains(a.live_workers, id) && !Contains(b.live_workers, id),
                what);
    for (const auto& r : pulls_) {
      FUZZ_EXPECT(!(Waiting(*r) && r->worker_id == id), what, ": worker ", id,
                  " waits in a pull");
    }
  }
  FUZZ_EXPECT(b.live_workers.size() + gone.size() == a.live_workers.size(),
              what);
  // Leaving may complete the sync step, once.
  const int64_t by_leave =
      b.counters.completed_by_leave - a.counters.completed_by_leave;
  FUZZ_EXPECT(b.step - a.step == by_leave && by_leave <= 1, what, ": step ",
              a.step, " -> ", b.step);
  if (gone.empty()) ExpectSameState(before_, after_, what);
}

// No pull waits for a step the shard has reached; after Shutdown none waits.
void Driver::CheckWaitingPulls() {
  const ps::ShardStatus& s = after_.status;
  for (const auto& r : pulls_) {
    if (!Waiting(*r)) continue;
    FUZZ_EXPECT(!s.shutting_down, "a pull waits after Shutdown");
    FUZZ_EXPECT(!s.initialized || s.step < r->min_step, "a pull for step ",
                r->min_step, " still waits at step ", s.step);
  }
}

void Driver::Finish() {
  handler_.reset();
  shard_.reset();
  for (const auto& r : pulls_) {
    FUZZ_EXPECT(r->cancelled || r->calls == 1, "a pull never answered");
    if (r->ticket != 0 && !r->cancelled && r->calls == 1 && !r->status.ok()) {
      FUZZ_EXPECT(absl::IsCancelled(r->status), r->status.ToString());
    }
  }
}

}  // namespace

void RunShardFuzzInput(const uint8_t* data, size_t size) {
  // Most mutated payloads are no valid message; protobuf would log each.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  FuzzReader reader(data, size);
  Driver driver(reader.config());
  FuzzOp op;
  absl::string_view payload;
  while (reader.Next(&op, &payload)) driver.Run(op, payload);
  driver.Finish();
}

}  // namespace fuzz
}  // namespace psgd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  psgd::fuzz::RunShardFuzzInput(data, size);
  return 0;
}
