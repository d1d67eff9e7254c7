#include "ps/server/request_handler.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

}  // namespace

void ShardRequestHandler::SetRunDirIfUnset(absl::string_view run_dir) {
  MutexLock lock(&run_dir_mu_);
  if (run_dir_.empty()) run_dir_ = std::string(run_dir);
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
  if (!request.run_dir().empty()) SetRunDirIfUnset(request.run_dir());
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
                                       absl::string_view shared) {
  RETURN_IF_ERROR(shard_->CheckCluster(request.cluster()));
  ASSIGN_OR_RETURN(std::vector<TensorBytes> wire_gradients,
                   TensorBytesFromProto(request.gradients(), shared));
  // In the cluster's wire dtype; float32 for the shard. Each gRPC thread
  // keeps its decoder's buffers from call to call.
  thread_local WireDecoder decoder;
  absl::StatusOr<absl::Span<const TensorBytes>> gradients = decoder.ToFloat(
      wire_gradients, shard_->options().wire_gradients, "gradient");
  if (!gradients.ok()) {
    return Annotate(gradients.status(),
                    absl::StrCat("shard ", shard_->options().shard_index,
                                 ": push from worker ", request.worker_id(),
                                 " for step ", request.step(), ": "));
  }
  DataChunkRef chunk;
  if (request.has_chunk()) chunk = DataChunkRefFromProto(request.chunk());
  const DataChunkRef* computed_from = request.has_chunk() ? &chunk : nullptr;
  ASSIGN_OR_RETURN(
      PushReply reply,
      request.partial()
          ? shard_->PushPart(request.worker_id(), request.step(), *gradients,
                             request.generation(), computed_from)
          : shard_->Push(request.worker_id(), request.step(), *gradients,
                         request.generation(), computed_from));
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
