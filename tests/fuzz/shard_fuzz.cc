#include "tests/fuzz/shard_fuzz.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/file_io.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/ps.pb.h"
#include "ps/checkpoint/checkpoint.h"
#include "ps/client/model_slices.h"
#include "ps/server/request_handler.h"
#include "ps/shard/shard.h"
#include "ps/state/placement.h"
#include "ps/wire/wire_zero_copy.h"
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

// DocumentedRefusal, plus each op's own codes (ps/shard/shard.h): LeaseData's
// OUT_OF_RANGE (the data ended), UNAVAILABLE (nothing to hand out while the
// last epoch's chunks are out with other workers: lease again) and the data
// queue's refusals of a chunk given back (ps/state/data_queue.h: NOT_FOUND
// for a lease it never gave, PERMISSION_DENIED for another worker's);
// Rollback's NOT_FOUND / DATA_LOSS for a checkpoint missing or not complete.
bool DocumentedRefusal(FuzzOp op, const absl::Status& s) {
  if (DocumentedRefusal(s)) return true;
  switch (op) {
    case FuzzOp::kLeaseData:
      return absl::IsOutOfRange(s) || absl::IsUnavailable(s) ||
             absl::IsNotFound(s) || absl::IsPermissionDenied(s);
    case FuzzOp::kRollback:
      return absl::IsNotFound(s) || absl::IsDataLoss(s);
    default:
      return false;
  }
}

// PSGD_FUZZ_TRACE=1 (replaying a finding): every request's outcome on
// stderr.
void Trace(absl::string_view what) {
  static const bool trace = getenv("PSGD_FUZZ_TRACE") != nullptr;
  if (trace) {
    std::fprintf(stderr, "shard fuzz: %.*s\n", static_cast<int>(what.size()),
                 what.data());
  }
}

// A fresh directory for one input's checkpoints, under the test's
// temporary directory (Bazel's TEST_TMPDIR) or /tmp.
std::string MakeInputDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(
      base != nullptr && *base != '\0' ? base : "/tmp", "/psgd-fuzz-XXXXXX");
  FUZZ_EXPECT(mkdtemp(dir.data()) != nullptr, "mkdtemp ", dir);
  return dir;
}

// The seeds' model (tests/fuzz/seeds.cc) as the client places it on one
// shard: what kDecodePull decodes into.
const ps::Placement& FuzzPlacement() {
  static const ps::Placement* placement = [] {
    absl::StatusOr<ps::Placement> p =
        ps::PlaceVariables({VariableSpec("w", {2, 3}), VariableSpec("b", {2})},
                           1, int64_t{1} << 20);
    FUZZ_EXPECT(p.ok(), p.status().ToString());
    return new ps::Placement(*std::move(p));
  }();
  return *placement;
}

class Driver {
 public:
  Driver(const FuzzConfig& config, const std::string& checkpoint_dir)
      : options_(config.ToShardOptions(checkpoint_dir)), wire_(config.wire) {
    absl::StatusOr<std::unique_ptr<ParameterShard>> shard =
        ParameterShard::Create(options_);
    FUZZ_EXPECT(shard.ok(), shard.status().ToString());
    shard_ = *std::move(shard);
    handler_ = std::make_unique<ps::ShardRequestHandler>(shard_.get(), wire_);
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
    int64_t step = -1;         // of the weights it got
    bool rolled_back = false;  // ended (ABORTED) by a rollback
  };

  template <typename Request, typename Response, typename Call>
  void Unary(FuzzOp op, absl::string_view payload, Call call);
  void CheckLease(const ps::wire::LeaseDataRequest& request,
                  const ps::wire::LeaseDataResponse& response);
  void CheckRollback(const ps::wire::RollbackRequest& request,
                     const ps::wire::RollbackResponse& response,
                     const std::vector<PullRecord*>& waiting);
  void CheckListCheckpoints(const ps::wire::ListCheckpointsResponse& response);
  // The checkpoints the shard saves as this request changed it.
  void ModelSaves();
  void Saved(int64_t label, const ShardPicture& p) {
    saved_[label] = p;
    last_saved_step_ = p.status.step;
  }
  void SharedPush(absl::string_view payload);
  void DecodePull(absl::string_view payload);
  void DecodeCheckpoint(absl::string_view payload);
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

  const ps::ShardOptions options_;
  // What the server's request handler takes and answers in.
  const ps::WireDTypes wire_;
  // Before the shard, which answers them when it is destroyed.
  std::vector<std::unique_ptr<PullRecord>> pulls_;
  std::unique_ptr<ParameterShard> shard_;
  std::unique_ptr<ps::ShardRequestHandler> handler_;
  ShardPicture before_, after_;
  // Checkpoints (with a directory): what each label the shard saved holds,
  // by the rules of ps/shard/shard.h (step 0 at Initialize, every
  // every_steps, a requested label when the step reaches it or now, the
  // state at Shutdown unless saved; a rollback deletes the later ones),
  // the labels requested for later, and the step last saved.
  std::map<int64_t, ShardPicture> saved_;
  std::set<int64_t> pending_labels_;
  int64_t last_saved_step_ = -1;
  bool rolled_back_ = false;  // by the current request
};

void Driver::Run(FuzzOp op, absl::string_view payload) {
  before_ = ShardPicture::Of(*shard_);
  rolled_back_ = false;
  switch (op) {
    case FuzzOp::kInitialize:
      Unary<ps::wire::InitializeRequest, ps::wire::InitializeResponse>(
          op, payload,
          [&](auto& q, auto* r) { return handler_->Initialize(q, r); });
      break;
    case FuzzOp::kPull:
      Pull(payload);
      break;
    case FuzzOp::kPush:
      Unary<ps::wire::PushRequest, ps::wire::PushResponse>(
          op, payload, [&](auto& q, auto* r) { return handler_->Push(q, r); });
      break;
    case FuzzOp::kJoin:
      Unary<ps::wire::JoinRequest, ps::wire::MembershipResponse>(
          op, payload, [&](auto& q, auto* r) { return handler_->Join(q, r); });
      break;
    case FuzzOp::kLeave:
      Unary<ps::wire::LeaveRequest, ps::wire::MembershipResponse>(
          op, payload, [&](auto& q, auto* r) { return handler_->Leave(q, r); });
      break;
    case FuzzOp::kStatus:
      Unary<ps::wire::StatusRequest, ps::wire::StatusResponse>(
          op, payload,
          [&](auto& q, auto* r) { return handler_->Status(q, r); });
      break;
    case FuzzOp::kShutdown:
      Unary<ps::wire::ShutdownRequest, ps::wire::ShutdownResponse>(
          op, payload,
          [&](auto& q, auto* r) { return handler_->Shutdown(q, r); });
      break;
    case FuzzOp::kLeaseData:
      Unary<ps::wire::LeaseDataRequest, ps::wire::LeaseDataResponse>(
          op, payload,
          [&](auto& q, auto* r) { return handler_->LeaseData(q, r); });
      break;
    case FuzzOp::kRollback:
      // What the writer thread has queued is on disk first, so that the
      // outcome does not depend on its timing.
      shard_->FlushCheckpoints();
      Unary<ps::wire::RollbackRequest, ps::wire::RollbackResponse>(
          op, payload,
          [&](auto& q, auto* r) { return handler_->Rollback(q, r); });
      break;
    case FuzzOp::kCheckpoint:
      Unary<ps::wire::CheckpointRequest, ps::wire::CheckpointResponse>(
          op, payload,
          [&](auto& q, auto* r) { return handler_->Checkpoint(q, r); });
      break;
    case FuzzOp::kListCheckpoints:
      shard_->FlushCheckpoints();
      Unary<ps::wire::ListCheckpointsRequest,
            ps::wire::ListCheckpointsResponse>(
          op, payload,
          [&](auto& q, auto* r) { return handler_->ListCheckpoints(q, r); });
      break;
    case FuzzOp::kSharedPush:
      SharedPush(payload);
      break;
    case FuzzOp::kDecodePull:
      DecodePull(payload);
      break;
    case FuzzOp::kDecodeCheckpoint:
      DecodeCheckpoint(payload);
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
  // Only a rollback takes the step back (to its checkpoint's).
  FUZZ_EXPECT(after_.status.step >= before_.status.step || rolled_back_,
              "step ", before_.status.step, " -> ", after_.status.step);
  if (!options_.checkpoint.dir.empty()) ModelSaves();
  CheckWaitingPulls();
}

void Driver::ModelSaves() {
  const ps::ShardStatus& a = before_.status;
  const ps::ShardStatus& b = after_.status;
  if (rolled_back_) return;  // CheckRollback did
  if (!a.initialized && b.initialized) {
    Saved(0, after_);
    return;
  }
  if (b.shutting_down && !a.shutting_down) {
    if (a.initialized && last_saved_step_ != a.step) Saved(a.step, before_);
    return;
  }
  if (b.step != a.step + 1) return;
  const int64_t every = options_.checkpoint.every_steps;
  if (every > 0 && b.step % every == 0) Saved(b.step, after_);
  while (!pending_labels_.empty() && *pending_labels_.begin() <= b.step) {
    Saved(*pending_labels_.begin(), after_);
    pending_labels_.erase(pending_labels_.begin());
  }
}

// Parses the request as gRPC would (a payload that is no valid message never
// reaches the handler) and calls the handler; a refusal must leave the
// shard as it was.
template <typename Request, typename Response, typename Call>
void Driver::Unary(FuzzOp op, absl::string_view payload, Call call) {
  constexpr bool kPush = std::is_same<Request, ps::wire::PushRequest>::value;
  constexpr bool kStatus =
      std::is_same<Request, ps::wire::StatusRequest>::value;
  constexpr bool kShutdown =
      std::is_same<Request, ps::wire::ShutdownRequest>::value;
  constexpr bool kRollback =
      std::is_same<Request, ps::wire::RollbackRequest>::value;
  constexpr bool kList =
      std::is_same<Request, ps::wire::ListCheckpointsRequest>::value;
  Request request;
  if (!request.ParseFromArray(payload.data(),
                              static_cast<int>(payload.size()))) {
    return;
  }
  // A rollback ends the pulls that wait.
  std::vector<PullRecord*> waiting;
  if constexpr (kRollback) {
    for (const auto& r : pulls_) {
      if (Waiting(*r)) waiting.push_back(r.get());
    }
  }
  Response response;
  const absl::Status status = call(request, &response);
  after_ = ShardPicture::Of(*shard_);
  const std::string what =
      absl::StrCat(request.GetTypeName(), " -> ", status.ToString());
  Trace(what);
  if (!status.ok()) {
    FUZZ_EXPECT(DocumentedRefusal(op, status), what);
    const ps::PushCounters& a = before_.status.counters;
    const ps::PushCounters& b = after_.status.counters;
    // A push refused as too stale gives its data chunk back to the queue
    // (ps/shard/shard.h, LeaseData); any other refusal moves nothing.
    ExpectSameState(before_, after_, what,
                    /*data=*/b.refused_too_stale == a.refused_too_stale);
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
  FUZZ_EXPECT(!shut || kStatus || kShutdown || kList, what, " after Shutdown");
  if constexpr (kRollback) {
    CheckRollback(request, response, waiting);
    return;
  }
  FUZZ_EXPECT(after_.status.counters.refused == before_.status.counters.refused,
              what);
  if constexpr (std::is_same<Request, ps::wire::LeaseDataRequest>::value) {
    CheckLease(request, response);
  } else if constexpr (std::is_same<Request,
                                    ps::wire::CheckpointRequest>::value) {
    // Saving changes nothing the shard shows.
    ExpectSameState(before_, after_, what);
    FUZZ_EXPECT(!options_.checkpoint.dir.empty() && request.label() >= 0 &&
                    before_.status.initialized,
                what);
    if (request.now() || before_.status.step >= request.label()) {
      Saved(request.label(), after_);
    } else {
      pending_labels_.insert(request.label());
    }
  } else if constexpr (kList) {
    ExpectSameState(before_, after_, what);
    CheckListCheckpoints(response);
  } else if constexpr (kPush) {
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
        const int i = after_.snapshot->layout->Find(t.spec().name());
        FUZZ_EXPECT(i >= 0, what, ": no variable '", t.spec().name(), "'");
        const std::vector<float>& w = after_.weights[i];
        FUZZ_EXPECT(
            w.size() * sizeof(float) == t.data().size() &&
                (w.empty() ||
                 std::memcmp(w.data(), t.data().data(), t.data().size()) == 0),
            what, ": variable '", t.spec().name(), "' holds other values");
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
      // A push computed from a data chunk its worker no longer holds (given
      // back, its lease expired, the queue rolled back) is dropped as
      // stale whatever its step (ps/shard/shard.h, Push): its samples are
      // back in the queue.
      const bool chunk_gone =
          !surplus && options_.data_queue_on && request.has_chunk();
      FUZZ_EXPECT(options_.mode == ps::Mode::kSync || chunk_gone, what);
      FUZZ_EXPECT(chunk_gone || (surplus ? request.step() == a.step - 1
                                         : request.step() < a.step - 1),
                  what, ": outcome ", static_cast<int>(response.outcome()));
      // Only its counter moved (checked above), and its data chunk (if
      // any) went back to the queue.
      ShardPicture same = after_;
      same.status.counters = before_.status.counters;
      ExpectSameState(before_, same, what, /*data=*/false);
      break;
    }
    default:
      Fail("known outcome",
           absl::StrCat(what, ": ", static_cast<int>(response.outcome())));
  }
}

void Driver::CheckLease(const ps::wire::LeaseDataRequest& request,
                        const ps::wire::LeaseDataResponse& response) {
  const ps::ShardStatus& a = before_.status;
  const ps::ShardStatus& b = after_.status;
  const bool gave = request.has_give_back();
  const std::string what = absl::StrCat(
      "LeaseData of worker ", request.worker_id(),
      gave ? " giving a chunk back" : "", " -> chunk ", response.epoch(), "/",
      response.index(), " lease ", response.lease());
  Trace(what);
  FUZZ_EXPECT(options_.data_queue_on && !a.shutting_down &&
                  Contains(a.live_workers, request.worker_id()),
              what);
  FUZZ_EXPECT(b.data_counters.leased == a.data_counters.leased + 1 &&
                  b.data_counters.returned ==
                      a.data_counters.returned + (gave ? 1 : 0) &&
                  b.data_chunks_out == a.data_chunks_out + 1 - (gave ? 1 : 0),
              what, ": leased ", a.data_counters.leased, " -> ",
              b.data_counters.leased, ", returned ", a.data_counters.returned,
              " -> ", b.data_counters.returned, ", out ", a.data_chunks_out,
              " -> ", b.data_chunks_out);
  FUZZ_EXPECT(response.epoch() >= 0 && response.index() >= 0 &&
                  (options_.data_epochs == 0 ||
                   response.epoch() < options_.data_epochs),
              what);
  FUZZ_EXPECT(response.samples_size() >= 1 &&
                  response.samples_size() <= options_.data_queue.chunk_size,
              what, ": ", response.samples_size(), " samples");
  for (int64_t sample : response.samples()) {
    FUZZ_EXPECT(sample >= 0 && sample < kDataSamples, what, ": sample ",
                sample);
  }
  // Nothing else moves.
  ExpectSameState(before_, after_, what, /*data=*/false);
}

void Driver::CheckRollback(const ps::wire::RollbackRequest& request,
                           const ps::wire::RollbackResponse& response,
                           const std::vector<PullRecord*>& waiting) {
  const ps::ShardStatus& a = before_.status;
  const ps::ShardStatus& b = after_.status;
  const std::string what = absl::StrCat(
      "rollback to step-", request.label(), " in generation ",
      request.generation(), " at step ", a.step, " generation ", a.generation);
  FUZZ_EXPECT(!options_.checkpoint.dir.empty() && request.label() >= 0 &&
                  request.generation() >= 1,
              what);
  if (!response.rolled_back()) {
    // A duplicate or late request: nothing happens.
    FUZZ_EXPECT(request.generation() <= a.generation &&
                    response.generation() == a.generation &&
                    response.step() == a.step,
                what);
    ExpectSameState(before_, after_, what);
    return;
  }
  rolled_back_ = true;
  FUZZ_EXPECT(request.generation() > a.generation &&
                  b.generation == request.generation() &&
                  response.generation() == b.generation &&
                  response.step() == b.step && !b.awaiting_rollback,
              what, ": now step ", b.step, " generation ", b.generation);
  // The live set stays; the pending aggregate is not saved.
  FUZZ_EXPECT(b.live_workers == a.live_workers && b.pending_gradients == 0,
              what);
  const ps::RollbackRecord record{request.generation(), request.label(), a.step,
                                  b.step};
  FUZZ_EXPECT(b.rollbacks.size() == a.rollbacks.size() + 1 &&
                  b.rollbacks.back() == record,
              what, ": the rollback not recorded as it was");
  // The state is what the shard saved under that label.
  const auto it = saved_.find(request.label());
  FUZZ_EXPECT(it != saved_.end(), what, ": a checkpoint never saved");
  FUZZ_EXPECT(it->second.status.step == b.step, what, ": step ", b.step,
              ", saved at step ", it->second.status.step);
  ExpectSameWeights(it->second, after_, what);
  for (PullRecord* r : waiting) {
    FUZZ_EXPECT(
        r->calls == 1 && absl::IsAborted(r->status), what,
        ": a waiting pull not ended with ABORTED: ", r->status.ToString());
    r->rolled_back = true;
  }
  // Later checkpoints are deleted; the labels requested are forgotten.
  saved_.erase(saved_.upper_bound(request.label()), saved_.end());
  pending_labels_.clear();
  last_saved_step_ = b.step;
}

void Driver::CheckListCheckpoints(
    const ps::wire::ListCheckpointsResponse& response) {
  const std::string what =
      absl::StrCat("ListCheckpoints -> ", response.checkpoints_size());
  FUZZ_EXPECT(response.shard_index() == 0, what);
  if (options_.checkpoint.dir.empty()) {
    FUZZ_EXPECT(response.checkpoints_size() == 0, what);
    return;
  }
  FUZZ_EXPECT(response.checkpoints_size() <= kCheckpointKeep, what);
  bool first = true;
  int64_t previous = 0;
  for (const ps::wire::CompleteCheckpointInfo& c : response.checkpoints()) {
    // (A label may be as large as INT64_MAX.)
    FUZZ_EXPECT(first || c.label() < previous, what, ": step-", c.label(),
                " after step-", previous, ": not newest first");
    first = false;
    previous = c.label();
    const auto it = saved_.find(c.label());
    FUZZ_EXPECT(it != saved_.end(), what, ": step-", c.label(),
                " was never saved");
    FUZZ_EXPECT(it->second.status.step == c.step() &&
                    it->second.status.generation == c.generation(),
                what, ": step-", c.label(), " of step ", c.step(),
                " generation ", c.generation(), ", saved at step ",
                it->second.status.step, " generation ",
                it->second.status.generation);
  }
}

void Driver::SharedPush(absl::string_view payload) {
  const absl::string_view segment = TakeLengthPrefixed(&payload);
  Unary<ps::wire::PushRequest, ps::wire::PushResponse>(
      FuzzOp::kSharedPush, payload,
      [&](auto& q, auto* r) { return handler_->Push(q, r, segment); });
}

// The client's side: must end with the model filled or an error, never
// outside its buffers (ASan), whatever the bytes.
void Driver::DecodePull(absl::string_view payload) {
  const uint8_t flags = payload.empty() ? 0 : payload[0];
  payload.remove_prefix(std::min<size_t>(1, payload.size()));
  const int pieces =
      1 + (payload.empty() ? 0 : static_cast<uint8_t>(payload[0])) % 8;
  payload.remove_prefix(std::min<size_t>(1, payload.size()));
  const absl::string_view segment = TakeLengthPrefixed(&payload);
  const bool shared = (flags & 1) != 0;
  // gRPC hands the decoder the message in slices: the tensors' fields may
  // straddle them.
  std::vector<grpc::Slice> slices;
  for (int i = 0; i < pieces; ++i) {
    const size_t begin = payload.size() * i / pieces;
    const size_t end = payload.size() * (i + 1) / pieces;
    slices.emplace_back(payload.data() + begin, end - begin);
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  const ps::Placement& placement = FuzzPlacement();
  std::vector<std::vector<float>> model(placement.variables.size());
  std::vector<float*> pointers;
  for (size_t v = 0; v < model.size(); ++v) {
    int64_t n = 1;
    for (int64_t d : placement.variables[v].shape) n *= d;
    model[v].assign(n, -7.0f);
    pointers.push_back(model[v].data());
  }
  ps::ShardAssembler assembler(placement, 0, absl::MakeSpan(pointers),
                               wire_.weights);
  int64_t step = 0, wait_micros = 0, generation = 0;
  double learning_rate = 0;
  ps::SharedPullReply reply;
  absl::Status s = ps::DecodePullResponse(
      &buffer, &step, &wait_micros,
      [&](const ps::TensorBytes& t, size_t bytes) {
        return assembler.Destination(t, bytes);
      },
      &generation, [&](const ps::TensorBytes& t) { return assembler.Done(t); },
      &learning_rate, shared ? segment : absl::string_view(), &reply);
  if (s.ok()) s = assembler.Finish();
  Trace(absl::StrCat("DecodePullResponse -> ", s.ToString()));
  FUZZ_EXPECT(s.ok() || absl::IsDataLoss(s) || absl::IsInvalidArgument(s),
              "DecodePullResponse -> ", s.ToString());
  if (!s.ok() || shared) return;
  // What the generated parser reads from the same bytes (when it takes
  // them: it is stricter, about UTF-8 for one) must be what was decoded.
  ps::wire::PullResponse parsed;
  if (!parsed.ParseFromArray(payload.data(), static_cast<int>(payload.size())))
    return;
  FUZZ_EXPECT(parsed.step() == step && parsed.generation() == generation &&
                  parsed.wait_micros() == wait_micros,
              "DecodePullResponse: step ", step, " generation ", generation,
              ", the parser's ", parsed.step(), " ", parsed.generation());
  if (wire_.weights != ps::DType::kFloat32) return;
  for (const ps::wire::TensorData& t : parsed.variables()) {
    const auto it = placement.variable_index.find(t.spec().name());
    FUZZ_EXPECT(it != placement.variable_index.end(), "decoded '",
                t.spec().name(), "'");
    const std::vector<float>& got = model[it->second];
    FUZZ_EXPECT(
        t.data().size() == got.size() * sizeof(float) &&
            std::memcmp(t.data().data(), got.data(), t.data().size()) == 0,
        "DecodePullResponse: '", t.spec().name(), "' decoded other values");
  }
}

// Checkpoint files as a restarted server reads them: DATA_LOSS or a
// checkpoint that encodes and decodes back to itself.
void Driver::DecodeCheckpoint(absl::string_view payload) {
  const uint8_t flags = payload.empty() ? 0 : payload[0];
  payload.remove_prefix(std::min<size_t>(1, payload.size()));
  const bool manifest = (flags & 1) != 0;
  const std::string bytes =
      (flags & 2) != 0
          ? FrameChecksummed(manifest ? "PSGDMANI" : "PSGDCKPT", payload)
          : std::string(payload);
  if (manifest) {
    absl::StatusOr<ps::CheckpointManifest> m =
        ps::DecodeCheckpointManifest(bytes, "fuzz");
    Trace(absl::StrCat("DecodeCheckpointManifest -> ", m.status().ToString()));
    FUZZ_EXPECT(m.ok() || absl::IsDataLoss(m.status()), m.status().ToString());
    if (!m.ok()) return;
    const std::string again = ps::EncodeCheckpointManifest(*m);
    absl::StatusOr<ps::CheckpointManifest> back =
        ps::DecodeCheckpointManifest(again, "fuzz");
    FUZZ_EXPECT(back.ok(), "a decoded manifest does not decode again: ",
                back.status().ToString());
    FUZZ_EXPECT(ps::EncodeCheckpointManifest(*back) == again &&
                    back->label == m->label &&
                    back->shards.size() == m->shards.size(),
                "a manifest changed in a round trip");
    return;
  }
  absl::StatusOr<ps::ShardCheckpoint> c =
      ps::DecodeShardCheckpoint(bytes, "fuzz");
  Trace(absl::StrCat("DecodeShardCheckpoint -> ", c.status().ToString()));
  FUZZ_EXPECT(c.ok() || absl::IsDataLoss(c.status()), c.status().ToString());
  if (!c.ok()) return;
  const std::string again = ps::EncodeShardCheckpoint(*c);
  absl::StatusOr<ps::ShardCheckpoint> back =
      ps::DecodeShardCheckpoint(again, "fuzz");
  FUZZ_EXPECT(back.ok(), "a decoded checkpoint does not decode again: ",
              back.status().ToString());
  FUZZ_EXPECT(back->label == c->label && back->step == c->step &&
                  back->generation == c->generation &&
                  ps::StateDigest(*back->weights, back->optimizer) ==
                      ps::StateDigest(*c->weights, c->optimizer) &&
                  ps::EncodeShardCheckpoint(*back) == again,
              "a checkpoint changed in a round trip");
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
      !a.awaiting_rollback &&
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
      FUZZ_EXPECT(absl::IsCancelled(r->status) ||
                      (r->rolled_back && absl::IsAborted(r->status)),
                  r->status.ToString());
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
  const std::string dir =
      reader.config().checkpoints ? MakeInputDir() : std::string();
  {
    Driver driver(reader.config(), dir.empty() ? dir : dir + "/ckpt");
    FuzzOp op;
    absl::string_view payload;
    while (reader.Next(&op, &payload)) driver.Run(op, payload);
    driver.Finish();
  }
  if (!dir.empty()) {
    std::error_code error;
    std::filesystem::remove_all(dir, error);
  }
}

}  // namespace fuzz
}  // namespace psgd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  psgd::fuzz::RunShardFuzzInput(data, size);
  return 0;
}
