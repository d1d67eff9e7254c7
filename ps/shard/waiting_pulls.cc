#include "ps/shard/waiting_pulls.h"

#include <iterator>
#include <utility>

namespace psgd {
namespace ps {

WaitingPulls::WaitingPulls(int64_t staleness_bound, int num_workers)
    : clock_(staleness_bound, num_workers) {}

bool WaitingPulls::BoundHolds(int worker_id, const Membership& members) const {
  return clock_.enabled() && clock_.MustWait(worker_id, members.LiveWorkers());
}

uint64_t WaitingPulls::Hold(int64_t min_step, int worker_id, PullDone done,
                            bool bound_held, absl::Time now) {
  Held held{min_step, worker_id, std::move(done)};
  if (bound_held) {
    ++bound_held_pulls_;
    held.bound_held_since = now;
  }
  const uint64_t ticket = next_ticket_++;
  held_.emplace(ticket, std::move(held));
  return ticket;
}

bool WaitingPulls::Cancel(uint64_t ticket) { return held_.erase(ticket) > 0; }

void WaitingPulls::Release(absl::FunctionRef<bool(int64_t, int)> ready,
                           absl::FunctionRef<Snapshot(int)> answer,
                           absl::Time now, Ready* out) {
  for (auto it = held_.begin(); it != held_.end();) {
    auto next = std::next(it);
    Held& held = it->second;
    if (ready(held.min_step, held.worker_id)) {
      if (held.bound_held_since != absl::InfinitePast()) {
        bound_held_time_ += now - held.bound_held_since;
      }
      out->emplace_back(std::move(held.done), answer(held.worker_id));
      held_.erase(it);
    }
    it = next;
  }
}

void WaitingPulls::EndAll(const absl::Status& status, Ready* out) {
  for (auto& [ticket, held] : held_) {
    out->emplace_back(std::move(held.done), status);
  }
  held_.clear();
}

std::set<int> WaitingPulls::Workers() const {
  std::set<int> workers;
  for (const auto& [ticket, held] : held_) {
    if (held.worker_id >= 0) workers.insert(held.worker_id);
  }
  return workers;
}

void WaitingPulls::AddStatus(ShardStatus* s) const {
  s->pulls_waiting = size();
  s->ssp_blocked_pulls = bound_held_pulls_;
  s->ssp_blocked_seconds = absl::ToDoubleSeconds(bound_held_time_);
}

}  // namespace ps
}  // namespace psgd
