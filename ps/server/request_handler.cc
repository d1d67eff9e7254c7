#include "ps/server/request_handler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "ps/wire/wire.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {
namespace {

void MembershipToProto(const ParameterShard::MembershipReply& reply,
                       wire::MembershipResponse* out) {
  out->set_step(reply.step);
  out->mutable_live_workers()->Assign(reply.live_workers.begin(),
                                      reply.live_workers.end());
}

// Read once: the worker can write its shared region while the shard works,
// so the gradients' bytes in it are copied into this thread's own buffer
// before anything decodes or applies them (what is checked is what is
// applied); each tensor's view then points into the copy. The region is at
// most the shard's tensor bytes (SharedSegments), and so is the copy.
// Float32 gradients are checked in the copy's pass, on the shard's bulk
// threads, and marked so (TensorBytes::checked); other wire dtypes are
// checked once decoded.
void CopyOutOfSharedRegion(absl::string_view shared, ParameterShard* shard,
                           bool float32, std::vector<TensorBytes>* gradients) {
  std::vector<TensorBytes>& g = *gradients;
  thread_local std::string copy;
  size_t total = 0;
  auto in_region = [&](absl::string_view data) {
    return !data.empty() && data.data() >= shared.data() &&
           data.data() < shared.data() + shared.size();
  };
  for (const TensorBytes& t : g) {
    // Each at an offset aligned for floats (the region's are).
    if (in_region(t.data)) total += (t.data.size() + 63) & ~size_t{63};
  }
  copy.resize(total);
  // Where each tensor in the region goes; float32 ones are checked in the
  // copy's one pass over all of them (CheckPushedTensors).
  std::vector<char*> to(g.size(), nullptr);
  std::vector<TensorBytes> checking;  // those checked in the copy's pass
  std::vector<float*> check_into;
  std::vector<size_t> checked_index;
  size_t at = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    const TensorBytes& t = g[k];
    if (!in_region(t.data)) continue;
    to[k] = copy.data() + at;
    at += (t.data.size() + 63) & ~size_t{63};
    if (float32 && !t.no_gradient) {
      checking.push_back(t);
      check_into.push_back(reinterpret_cast<float*>(to[k]));
      checked_index.push_back(k);
    }
  }
  const std::vector<absl::Status> checked =
      shard->CheckPushedTensors(checking, check_into);
  for (size_t j = 0; j < checked.size(); ++j) {
    // A tensor the check refuses is copied again below, unmarked: the
    // shard refuses it as its own (and counts the refusal).
    g[checked_index[j]].checked = checked[j].ok();
  }
  for (size_t k = 0; k < g.size(); ++k) {
    TensorBytes& t = g[k];
    if (to[k] == nullptr) continue;
    if (!t.checked) std::memcpy(to[k], t.data.data(), t.data.size());
    t.data = absl::string_view(to[k], t.data.size());
  }
}

}  // namespace

absl::Status AcceptableRunDir(absl::string_view requested,
                              absl::string_view run_root,
                              absl::string_view cluster) {
  auto refuse = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat("run directory '", requested, "': ", why));
  };
  if (run_root.empty()) {
    return refuse(
        "this server has no run root (start it with --run_dir or "
        "--config)");
  }
  std::string root(run_root);
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  absl::string_view leaf = requested;
  if (!absl::ConsumePrefix(&leaf, root) || !absl::ConsumePrefix(&leaf, "/")) {
    return refuse(absl::StrCat("not in the server's run root '", root, "'"));
  }
  if (!absl::StartsWith(leaf, absl::StrCat(cluster, "-")) ||
      leaf.size() > 200) {
    return refuse(absl::StrCat("not named ", cluster, "-..."));
  }
  for (char c : leaf) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
          c == '_' || c == '.')) {
      return refuse(
          "its name has characters other than letters, digits, "
          "'-', '_' and '.'");
    }
  }
  struct stat st;
  const std::string path(requested);
  if (lstat(path.c_str(), &st) != 0) return refuse("it does not exist");
  if (!S_ISDIR(st.st_mode)) return refuse("not a directory");
  if (st.st_uid != geteuid()) {
    return refuse("it belongs to another user");
  }
  return absl::OkStatus();
}

void ShardRequestHandler::SetRunDirIfUnset(absl::string_view run_dir) {
  MutexLock lock(&run_dir_mu_);
  if (run_dir_.empty()) run_dir_ = std::string(run_dir);
}

void ShardRequestHandler::SetRunRoot(absl::string_view run_root) {
  MutexLock lock(&run_dir_mu_);
  run_root_ = std::string(run_root);
}

std::string ShardRequestHandler::run_dir() const {
  MutexLock lock(&run_dir_mu_);
  return run_dir_;
}

absl::Status ShardRequestHandler::Initialize(
    const wire::InitializeRequest& request,
    wire::InitializeResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  ASSIGN_OR_RETURN(std::vector<TensorBytes> variables,
                   TensorBytesFromProto(request.variables()));
  ASSIGN_OR_RETURN(ParameterShard::InitializeReply reply,
                   shard_->Initialize(variables));
  if (!request.run_dir().empty()) {
    MutexLock lock(&run_dir_mu_);
    if (run_dir_.empty()) {
      absl::Status ok = AcceptableRunDir(request.run_dir(), run_root_,
                                         shard_->options().cluster_name);
      if (ok.ok()) {
        run_dir_ = request.run_dir();
      } else {
        spdlog::warn("not writing into the chief's {}",
                     std::string(ok.message()));
      }
    }
  }
  response->set_step(reply.step);
  response->set_already_initialized(reply.already_initialized);
  return absl::OkStatus();
}

uint64_t ShardRequestHandler::Pull(const wire::PullRequest& request,
                                   ParameterShard::PullDone done) {
  if (absl::Status s = shard_->CheckCluster(request.cluster()); !s.ok()) {
    done(std::move(s));
    return 0;
  }
  return shard_->PullAsync(request.min_step(), request.worker_id(),
                           std::move(done), request.generation());
}

absl::Status ShardRequestHandler::Push(const wire::PushRequest& request,
                                       wire::PushResponse* response,
                                       absl::string_view shared,
                                       bool shared_is_private,
                                       std::shared_ptr<const void> keep,
                                       PushMethod method) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  if (method == PushMethod::kDecidePush && request.partial()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", shard_->options().shard_index, ": push from worker ",
        request.worker_id(), " for step ", request.step(),
        ": a push to decide comes whole, not as a part (parts are committed "
        "with Commit)"));
  }
  ASSIGN_OR_RETURN(std::vector<TensorBytes> wire_gradients,
                   TensorBytesFromProto(request.gradients(), shared));
  if (!shared.empty() && !shared_is_private) {
    CopyOutOfSharedRegion(shared, shard_, wire_.gradients == DType::kFloat32,
                          &wire_gradients);
  }
  // The shapes first: nothing is decoded for a shape the shard does not
  // hold.
  // What a refusal of the gradients' bytes says first.
  auto refused = [&](const absl::Status& s) {
    return Annotate(s, absl::StrCat("shard ", shard_->options().shard_index,
                                    ": push from worker ", request.worker_id(),
                                    " for step ", request.step(), ": "));
  };
  if (absl::Status shapes = shard_->CheckKnownShapes(wire_gradients);
      !shapes.ok()) {
    return refused(shapes);
  }
  // In the cluster's wire dtype; float32 for the shard. Each gRPC thread
  // keeps its decoder's buffers from call to call.
  thread_local WireDecoder decoder;
  absl::StatusOr<absl::Span<const TensorBytes>> gradients =
      decoder.ToFloat(wire_gradients, wire_.gradients, "gradient");
  if (!gradients.ok()) return refused(gradients.status());
  DataChunkRef chunk;
  if (request.has_chunk()) chunk = DataChunkRefFromProto(request.chunk());
  const DataChunkRef* computed_from = request.has_chunk() ? &chunk : nullptr;
  // The floats lie in the request only when nothing came through shared
  // memory (copied into this thread's buffer above) and nothing was
  // decoded from a 16-bit wire (this thread's decoder's buffers).
  if (!shared.empty() || wire_.gradients != DType::kFloat32) {
    keep = nullptr;
  }
  ASSIGN_OR_RETURN(
      PushReply reply,
      method == PushMethod::kDecidePush
          ? shard_->DecidePush(request.worker_id(), request.step(), *gradients,
                               request.generation(), request.push_id(),
                               computed_from)
      : request.partial()
          ? shard_->PushPart(request.worker_id(), request.step(), *gradients,
                             request.generation(), computed_from,
                             request.push_id(), std::move(keep))
          : shard_->Push(request.worker_id(), request.step(), *gradients,
                         request.generation(), computed_from, request.push_id(),
                         std::move(keep)));
  PushReplyToProto(reply, response);
  return absl::OkStatus();
}

absl::Status ShardRequestHandler::Join(const wire::JoinRequest& request,
                                       wire::MembershipResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  ASSIGN_OR_RETURN(auto reply,
                   shard_->Join(request.worker_id(), request.incarnation()));
  MembershipToProto(reply, response);
  return absl::OkStatus();
}

absl::Status ShardRequestHandler::Leave(const wire::LeaveRequest& request,
                                        wire::MembershipResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  ASSIGN_OR_RETURN(auto reply,
                   shard_->Leave(request.worker_id(), request.failure()));
  // The server's own record of a leave (a lease that runs out logs another
  // line, server_lifecycle.cc): what the tests of a leave on SIGTERM read.
  spdlog::info("worker {} left the live set (its Leave{}{}); live: [{}]",
               request.worker_id(), request.failure().empty() ? "" : ": ",
               request.failure(), absl::StrJoin(reply.live_workers, ","));
  MembershipToProto(reply, response);
  return absl::OkStatus();
}

absl::Status ShardRequestHandler::Status(const wire::StatusRequest& request,
                                         wire::StatusResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  ShardStatus status = shard_->Status();
  status.run_dir = run_dir();
  if (request.variables()) status.variables = shard_->Variables();
  ShardStatusToProto(status, response);
  return absl::OkStatus();
}

absl::Status ShardRequestHandler::Shutdown(const wire::ShutdownRequest& request,
                                           wire::ShutdownResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  shard_->Shutdown(request.reason().empty() ? "Shutdown RPC"
                                            : request.reason());
  return absl::OkStatus();
}

absl::Status ShardRequestHandler::Rollback(const wire::RollbackRequest& request,
                                           wire::RollbackResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  ASSIGN_OR_RETURN(ParameterShard::RollbackReply reply,
                   shard_->Rollback(request.label(), request.generation()));
  response->set_step(reply.step);
  response->set_generation(reply.generation);
  response->set_rolled_back(reply.rolled_back);
  return absl::OkStatus();
}

absl::Status ShardRequestHandler::Checkpoint(
    const wire::CheckpointRequest& request,
    wire::CheckpointResponse* /*response*/) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  return shard_->RequestCheckpoint(request.label(), request.now());
}

absl::Status ShardRequestHandler::Commit(const wire::CommitRequest& request,
                                         wire::PushResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  DataChunkRef chunk;
  if (request.has_chunk()) chunk = DataChunkRefFromProto(request.chunk());
  ASSIGN_OR_RETURN(PushReply reply,
                   shard_->Commit(request.worker_id(), request.step(),
                                  request.generation(), request.push_id(),
                                  request.has_chunk() ? &chunk : nullptr));
  PushReplyToProto(reply, response);
  return absl::OkStatus();
}

absl::Status ShardRequestHandler::LeaseData(
    const wire::LeaseDataRequest& request, wire::LeaseDataResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  DataChunkRef give_back;
  if (request.has_give_back()) {
    give_back = DataChunkRefFromProto(request.give_back());
  }
  ASSIGN_OR_RETURN(
      DataChunk chunk,
      shard_->LeaseData(request.worker_id(), request.generation(),
                        request.has_give_back() ? &give_back : nullptr));
  DataChunkToProto(chunk, response);
  return absl::OkStatus();
}

absl::Status ShardRequestHandler::ApplyDecisions(
    const wire::ApplyDecisionsRequest& request,
    wire::ApplyDecisionsResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  std::vector<Decision> decisions;
  decisions.reserve(request.decisions_size());
  for (const wire::Decision& d : request.decisions()) {
    absl::StatusOr<Decision> decision = DecisionFromProto(d);
    if (!decision.ok()) {
      // Nothing of the request is applied.
      return Annotate(decision.status(),
                      absl::StrCat("shard ", shard_->options().shard_index,
                                   " (at step ", shard_->Status().step, "): "));
    }
    decisions.push_back(*std::move(decision));
  }
  ASSIGN_OR_RETURN(const int64_t applied,
                   shard_->ApplyDecisions(request.generation(), decisions));
  response->set_applied_seq(applied);
  return absl::OkStatus();
}

absl::Status ShardRequestHandler::ListCheckpoints(
    const wire::ListCheckpointsRequest& request,
    wire::ListCheckpointsResponse* response) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  response->set_shard_index(shard_->options().shard_index);
  for (const CompleteCheckpointInfo& c : shard_->CompleteCheckpoints()) {
    wire::CompleteCheckpointInfo* out = response->add_checkpoints();
    out->set_label(c.label);
    out->set_generation(c.generation);
    out->set_step(c.step);
  }
  return absl::OkStatus();
}

}  // namespace ps
}  // namespace psgd
