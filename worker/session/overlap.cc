#include "worker/session/overlap.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ps/client/parts.h"

namespace psgd {

PartSender::PartSender(ps::PsClient* client)
    : client_(client), thread_([this] { Loop(); }) {}

PartSender::~PartSender() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    queue_.clear();
    changed_.SignalAll();
  }
  thread_.join();
}

void PartSender::Begin(const ps::ModelVersion& version) {
  MutexLock lock(&mu_);
  version_ = version;
  // Every part of the push carries its id (several shards stage it under
  // that id until shard 0 decides it: Finish commits).
  if (version_.push_id == 0) version_.push_id = ps::NewPushId();
  error_ = absl::OkStatus();
  result_ = ps::NoReplies(static_cast<int>(version.steps.size()));
}

void PartSender::Add(ps::NamedConstTensorView gradient) {
  MutexLock lock(&mu_);
  queue_.push_back(std::move(gradient));
  changed_.SignalAll();
}

absl::StatusOr<ps::PushResult> PartSender::Finish() {
  ps::ModelVersion version;
  {
    MutexLock lock(&mu_);
    changed_.Wait(&mu_, [this]() {
      mu_.AssertHeld();
      return queue_.empty() && !sending_;
    });
    if (!error_.ok()) return error_;
    if (client_->num_shards() < 2) return result_;
    version = version_;
  }
  // With several shards the parts were only staged: shard 0 decides the
  // push now, once for every shard.
  return client_->CommitPush(version);
}

void PartSender::Loop() {
  for (;;) {
    std::vector<ps::NamedConstTensorView> part;
    ps::ModelVersion version;
    {
      MutexLock lock(&mu_);
      changed_.Wait(&mu_, [this]() {
        mu_.AssertHeld();
        return stop_ || !queue_.empty();
      });
      if (stop_) return;
      // After an error the push has failed: the rest is not sent.
      if (!error_.ok()) {
        queue_.clear();
        changed_.SignalAll();
        continue;
      }
      part.assign(queue_.begin(), queue_.end());
      queue_.clear();
      version = version_;
      sending_ = true;
    }
    absl::StatusOr<ps::PushResult> r = client_->PushPart(version, part);
    MutexLock lock(&mu_);
    sending_ = false;
    if (!r.ok()) {
      error_ = r.status();
    } else {
      ps::MergePartReplies(*r, &result_);
    }
    changed_.SignalAll();
  }
}

std::vector<std::vector<int>> PullGroups(
    const std::vector<VariableSpec>& variables, int64_t small_bytes) {
  std::vector<std::vector<int>> groups;
  for (size_t v = 0; v < variables.size(); ++v) {
    const int64_t bytes =
        NumElements(variables[v].shape) * static_cast<int64_t>(sizeof(float));
    if (groups.empty() || bytes >= small_bytes) groups.emplace_back();
    groups.back().push_back(static_cast<int>(v));
  }
  return groups;
}

GroupPuller::GroupPuller(ps::PsClient* client,
                         std::vector<std::vector<int>> groups)
    : client_(client), groups_(std::move(groups)) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (int v : groups_[g]) {
      if (static_cast<int>(group_of_.size()) <= v) group_of_.resize(v + 1, -1);
      group_of_[v] = static_cast<int>(g);
    }
  }
}

GroupPuller::~GroupPuller() {
  for (std::thread& t : threads_) t.join();
}

void GroupPuller::Start(const ps::ModelVersion& wanted, absl::Time deadline,
                        std::vector<ps::NamedTensorView> out) {
  wanted_ = wanted;
  {
    MutexLock lock(&mu_);
    done_.assign(groups_.size(), false);
    results_.assign(groups_.size(), absl::UnknownError("not pulled"));
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::vector<ps::NamedTensorView> views;
    for (int v : groups_[g]) views.push_back(out[v]);
    threads_.emplace_back([this, g, deadline, views = std::move(views)] {
      absl::StatusOr<ps::ModelVersion> r =
          client_->PullPart(wanted_, deadline, views);
      MutexLock lock(&mu_);
      results_[g] = std::move(r);
      done_[g] = true;
      arrived_.SignalAll();
    });
  }
}

absl::Status GroupPuller::Await(int v) {
  if (v < 0 || v >= static_cast<int>(group_of_.size()) || group_of_[v] < 0) {
    return absl::InternalError(absl::StrCat("variable ", v, " is in no group"));
  }
  const int g = group_of_[v];
  MutexLock lock(&mu_);
  arrived_.Wait(&mu_, [this, g]() {
    mu_.AssertHeld();
    return done_[g];
  });
  return results_[g].status();
}

absl::StatusOr<ps::ModelVersion> GroupPuller::Join() {
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  MutexLock lock(&mu_);
  std::vector<ps::ModelVersion> parts;
  for (const absl::StatusOr<ps::ModelVersion>& r : results_) {
    if (!r.ok()) return r.status();
    parts.push_back(*r);
  }
  return ps::MergePartVersions(parts, static_cast<int>(wanted_.steps.size()));
}

}  // namespace psgd
