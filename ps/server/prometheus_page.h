// A shard's Prometheus page (GET /metrics of ps_server): pushes by outcome,
// the step, live workers, pending gradients, the staleness histogram, the
// generation and checkpoints, from a ShardStatus.
//
// Thread-safety: a pure function.
#ifndef PSGD_PS_SERVER_PROMETHEUS_PAGE_H_
#define PSGD_PS_SERVER_PROMETHEUS_PAGE_H_

#include <cstdint>
#include <string>

#include "ps/state/types.h"

namespace psgd {
namespace ps {

// sent_bytes, received_bytes: the server's payload so far (pulls' replies,
// pushes).
std::string ShardMetricsText(const ShardStatus& status, int64_t sent_bytes,
                             int64_t received_bytes);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_PROMETHEUS_PAGE_H_
