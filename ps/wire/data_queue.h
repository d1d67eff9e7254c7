// The data queue's state (ps/state/data_queue.h) to and from its message
// (proto/data_queue.proto), converted once here for the checkpoints and,
// should the wire report it, the wire. The conversion copies; whether a
// state is consistent is DataQueue::Restore's to check.
//
// Thread-safety: pure functions.
#ifndef PSGD_PS_WIRE_DATA_QUEUE_H_
#define PSGD_PS_WIRE_DATA_QUEUE_H_

#include "proto/data_queue.pb.h"
#include "ps/state/data_queue.h"

namespace psgd {
namespace ps {

void DataQueueStateToProto(const DataQueueState& s, ckpt::DataQueueState* out);
DataQueueState DataQueueStateFromProto(const ckpt::DataQueueState& s);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_WIRE_DATA_QUEUE_H_
