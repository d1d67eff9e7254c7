// Pushes in parts (ParameterShard::PushPart; docs/PS.md, "Pushes in parts"):
// a worker's parts are staged until every variable of the shard has its
// gradient, and the complete push is then decided by the same rules as a
// whole one (DecideLocked in shard.cc).
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {

absl::StatusOr<PushReply> ParameterShard::PushPart(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    int64_t generation, const DataChunkRef* chunk) {
  const std::string context = absl::StrCat(name_, ": push part from worker ",
                                           worker_id, " for step ", step, ": ");
  // Checked and copied outside the lock: the scan and the copy read the
  // whole part, while other workers' parts are decided.
  absl::Status status;
  if (gradients.empty()) {
    status = absl::InvalidArgumentError("the part carries no gradient");
  }
  std::vector<std::vector<float>> copies(gradients.size());
  for (size_t i = 0; status.ok() && i < gradients.size(); ++i) {
    status = CheckPushedTensor(gradients[i]);
    if (!status.ok()) break;
    const absl::string_view data = gradients[i].data;
    copies[i].resize(data.size() / sizeof(float));
    if (!data.empty()) std::memcpy(copies[i].data(), data.data(), data.size());
  }
  PushReply reply;
  Ready ready;
  {
    MutexLock lock(&mu_);
    if (status.ok()) status = CheckGenerationLocked(generation);
    if (status.ok()) {
      status = StagePartLocked(worker_id, step, gradients, &copies, chunk,
                               &reply, &ready);
    }
    if (!status.ok()) ++counters_.refused;
  }
  RunReady(&ready);
  if (!status.ok()) return Annotate(status, context);
  return reply;
}

absl::Status ParameterShard::StagePartLocked(
    int worker_id, int64_t step, absl::Span<const TensorBytes> gradients,
    std::vector<std::vector<float>>* copies, const DataChunkRef* chunk,
    PushReply* reply, Ready* ready) {
  RETURN_IF_ERROR(CheckPushLocked(worker_id, step));
  const VariableLayout& layout = store_->layout();
  // What is staged for this worker stays only when the part belongs to the
  // same push; a part of a newer step, or of the generation the shard is in
  // now (after a rollback), starts a new push.
  auto it = staged_.find(worker_id);
  bool keep = false;
  if (it != staged_.end()) {
    const StagedPush& old = it->second;
    if (old.generation == generation_ && step < old.step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "parts of the push for step ", old.step,
          " are staged; a part for the older step ", step, " comes too late"));
    }
    keep = old.generation == generation_ && step == old.step;
  }
  // Every check before anything changes: a refused part leaves the stage as
  // it was.
  std::vector<int> index(gradients.size());
  std::vector<bool> in_part(layout.size(), false);
  for (size_t j = 0; j < gradients.size(); ++j) {
    const TensorBytes& g = gradients[j];
    ASSIGN_OR_RETURN(const int i, store_->MatchGradient(g));
    if (in_part[i] || (keep && it->second.has[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a second gradient for variable '", g.name, "' in one push"));
    }
    in_part[i] = true;
    index[j] = i;
  }
  if (!keep) {
    StagedPush fresh;
    fresh.step = step;
    fresh.generation = generation_;
    fresh.grads.resize(layout.size());
    fresh.has.assign(layout.size(), false);
    fresh.no_gradient.assign(layout.size(), false);
    it = staged_.insert_or_assign(worker_id, std::move(fresh)).first;
  }
  StagedPush& staged = it->second;
  for (size_t j = 0; j < gradients.size(); ++j) {
    staged.grads[index[j]] = std::move((*copies)[j]);
    staged.has[index[j]] = true;
    staged.no_gradient[index[j]] = gradients[j].no_gradient;
    ++staged.received;
  }
  if (staged.received < layout.size()) {
    reply->staged = true;
    reply->step = step_;
    reply->reason = absl::StrCat(staged.received, " of ", layout.size(),
                                 " gradients staged for step ", step);
    return absl::OkStatus();
  }
  // The last part: the push is decided as one, and the stage is emptied
  // whatever the decision.
  StagedPush complete = std::move(staged);
  staged_.erase(it);
  std::vector<const float*> grads;
  grads.reserve(complete.grads.size());
  for (size_t i = 0; i < complete.grads.size(); ++i) {
    grads.push_back(complete.no_gradient[i] ? nullptr
                                            : complete.grads[i].data());
  }
  return DecideLocked(worker_id, step, grads, chunk, reply, ready);
}

}  // namespace ps
}  // namespace psgd
