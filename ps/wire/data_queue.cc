#include "ps/wire/data_queue.h"

#include <utility>

#include "ps/wire/counters.h"

namespace psgd {
namespace ps {

void DataQueueStateToProto(const DataQueueState& s, ckpt::DataQueueState* out) {
  out->Clear();
  out->set_num_samples(s.num_samples);
  out->set_chunk_size(s.chunk_size);
  out->set_seed(s.seed);
  out->set_generation(s.generation);
  out->set_next_lease_sequence(s.next_lease_sequence);
  for (const DataQueueEpochState& e : s.epochs) {
    ckpt::DataQueueEpoch* p = out->add_epochs();
    p->set_epoch(e.epoch);
    p->set_next_index(e.next_index);
    p->mutable_outstanding()->Add(e.outstanding.begin(), e.outstanding.end());
  }
  DataQueueCountersToProto(s.counters, out->mutable_counters());
}

DataQueueState DataQueueStateFromProto(const ckpt::DataQueueState& s) {
  DataQueueState out;
  out.num_samples = s.num_samples();
  out.chunk_size = s.chunk_size();
  out.seed = s.seed();
  out.generation = s.generation();
  out.next_lease_sequence = s.next_lease_sequence();
  out.epochs.reserve(s.epochs_size());
  for (const ckpt::DataQueueEpoch& p : s.epochs()) {
    DataQueueEpochState e;
    e.epoch = p.epoch();
    e.next_index = p.next_index();
    e.outstanding.assign(p.outstanding().begin(), p.outstanding().end());
    out.epochs.push_back(std::move(e));
  }
  out.counters = DataQueueCountersFromProto(s.counters());
  return out;
}

}  // namespace ps
}  // namespace psgd
