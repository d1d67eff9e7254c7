#include "ps/state/push_stage.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psgd {
namespace ps {

std::vector<const float*> StagedPush::Gradients() const {
  std::vector<const float*> out;
  out.reserve(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    out.push_back(no_gradient[i] ? nullptr : grads[i].data());
  }
  return out;
}

absl::StatusOr<std::optional<StagedPush>> PushStage::AddPart(
    int worker_id, int64_t step, int64_t generation, uint64_t push_id,
    int num_variables, absl::Span<const TensorBytes> gradients, Match match,
    std::vector<StagedGradient>* floats) {
  // What is staged for this worker stays only when the part belongs to the
  // same push; a part of a newer step, or of the generation the shard is in
  // now (after a rollback), starts a new push.
  auto it = parts_.find(worker_id);
  bool keep = false;
  if (it != parts_.end()) {
    const StagedPush& old = it->second;
    if (old.generation == generation && step < old.step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "parts of the push for step ", old.step,
          " are staged; a part for the older step ", step, " comes too late"));
    }
    keep = old.generation == generation && step == old.step &&
           push_id == old.push_id;
  }
  // Every check before anything changes: a refused part leaves the stage as
  // it was.
  std::vector<int> index(gradients.size());
  std::vector<bool> in_part(num_variables, false);
  for (size_t j = 0; j < gradients.size(); ++j) {
    const TensorBytes& g = gradients[j];
    ASSIGN_OR_RETURN(const int i, match(g));
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
    fresh.generation = generation;
    fresh.push_id = push_id;
    fresh.grads.resize(num_variables);
    fresh.has.assign(num_variables, false);
    fresh.no_gradient.assign(num_variables, false);
    it = parts_.insert_or_assign(worker_id, std::move(fresh)).first;
  }
  StagedPush& staged = it->second;
  for (size_t j = 0; j < gradients.size(); ++j) {
    staged.grads[index[j]] = std::move((*floats)[j]);
    staged.has[index[j]] = true;
    staged.no_gradient[index[j]] = gradients[j].no_gradient;
    ++staged.received;
  }
  if (staged.received < num_variables) return std::optional<StagedPush>();
  StagedPush complete = std::move(staged);
  parts_.erase(it);
  return std::optional<StagedPush>(std::move(complete));
}

int PushStage::PartsReceived(int worker_id) const {
  auto it = parts_.find(worker_id);
  return it == parts_.end() ? 0 : it->second.received;
}

bool PushStage::DropParts(int worker_id) { return parts_.erase(worker_id) > 0; }

void PushStage::ClearParts() { parts_.clear(); }

int64_t PushStage::PartBytes() const {
  int64_t bytes = 0;
  for (const auto& [worker, staged] : parts_) {
    for (const StagedGradient& g : staged.grads) bytes += g.bytes;
  }
  return bytes;
}

void PushStage::KeepComplete(int worker_id, StagedPush push) {
  push.arrival = next_arrival_++;
  const uint64_t push_id = push.push_id;
  complete_.insert_or_assign({worker_id, push_id}, std::move(push));
}

int PushStage::CompleteOf(int worker_id) const {
  int count = 0;
  for (auto c = complete_.lower_bound({worker_id, 0});
       c != complete_.end() && c->first.first == worker_id; ++c) {
    ++count;
  }
  return count;
}

const StagedPush* PushStage::FindComplete(int worker_id,
                                          uint64_t push_id) const {
  auto it = complete_.find({worker_id, push_id});
  return it == complete_.end() ? nullptr : &it->second;
}

std::optional<StagedPush> PushStage::TakeComplete(int worker_id,
                                                  uint64_t push_id) {
  auto it = complete_.find({worker_id, push_id});
  if (it == complete_.end()) return std::nullopt;
  StagedPush push = std::move(it->second);
  complete_.erase(it);
  // The worker's pushes completed before this one were never committed.
  if (push.arrival > 0) DropCompleteThrough(worker_id, push.arrival - 1);
  return push;
}

void PushStage::DropOneComplete(int worker_id, uint64_t push_id) {
  complete_.erase({worker_id, push_id});
}

void PushStage::DropCompleteThrough(int worker_id, uint64_t arrival) {
  for (auto c = complete_.lower_bound({worker_id, 0});
       c != complete_.end() && c->first.first == worker_id;) {
    if (c->second.arrival <= arrival) {
      c = complete_.erase(c);
    } else {
      ++c;
    }
  }
}

void PushStage::DropComplete(int worker_id) {
  DropCompleteThrough(worker_id, std::numeric_limits<uint64_t>::max());
}

void PushStage::ClearComplete() { complete_.clear(); }

}  // namespace ps
}  // namespace psgd
