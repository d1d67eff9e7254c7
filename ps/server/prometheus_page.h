// A shard's Prometheus page (GET /metrics of ps_server): pushes by outcome,
// the step, live workers, pending gradients, the staleness histogram, the
// generation and checkpoints, from a ShardStatus.
//
// Thread-safety: a pure function.
#ifndef PSGD_PS_SERVER_PROMETHEUS_PAGE_H_
#define PSGD_PS_SERVER_PROMETHEUS_PAGE_H_

#include <string>

#include "ps/state/types.h"

namespace psgd {
namespace ps {

std::string ShardMetricsText(const ShardStatus& status);

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_SERVER_PROMETHEUS_PAGE_H_
