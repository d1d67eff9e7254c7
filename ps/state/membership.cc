#include "ps/state/membership.h"

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {

Membership::Membership(int total_num_replicas)
    : workers_(static_cast<size_t>(total_num_replicas)) {}

absl::Status Membership::CheckWorkerId(int id) const {
  if (id < 0 || id >= total_num_replicas()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_id ", id,
        " is not in [0, total_num_replicas=", total_num_replicas(), ")"));
  }
  return absl::OkStatus();
}

bool Membership::Join(int id, absl::Time now) {
  Worker& w = workers_[id];
  w.last_seen = now;
  if (w.live) return false;
  w.live = true;
  ++num_live_;
  return true;
}

bool Membership::Leave(int id) {
  Worker& w = workers_[id];
  if (!w.live) return false;
  w.live = false;
  --num_live_;
  return true;
}

std::vector<int> Membership::LiveWorkers() const {
  std::vector<int> out;
  for (int i = 0; i < total_num_replicas(); ++i) {
    if (workers_[i].live) out.push_back(i);
  }
  return out;
}

void Membership::Touch(int id, absl::Time now) { workers_[id].last_seen = now; }

std::vector<int> Membership::LiveNotSeenSince(absl::Time t) const {
  std::vector<int> out;
  for (int i = 0; i < total_num_replicas(); ++i) {
    if (workers_[i].live && workers_[i].last_seen < t) out.push_back(i);
  }
  return out;
}

std::vector<int64_t> Membership::LastPushSteps() const {
  std::vector<int64_t> out;
  for (const Worker& w : workers_) out.push_back(w.last_push_step);
  return out;
}

void Membership::RestoreLastPushSteps(const std::vector<int64_t>& steps) {
  for (size_t i = 0; i < workers_.size() && i < steps.size(); ++i) {
    workers_[i].last_push_step = steps[i];
  }
}

bool Membership::NewIncarnation(int id, uint64_t incarnation) {
  if (incarnation == 0) return false;
  uint64_t& last = workers_[id].incarnation;
  const bool changed = last != incarnation;
  last = incarnation;
  return changed;
}

std::vector<std::pair<int, std::string>> Membership::Failures() const {
  std::vector<std::pair<int, std::string>> out;
  for (int i = 0; i < total_num_replicas(); ++i) {
    if (!workers_[i].failure.empty()) out.emplace_back(i, workers_[i].failure);
  }
  return out;
}

}  // namespace ps
}  // namespace psgd
