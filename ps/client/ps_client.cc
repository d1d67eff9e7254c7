#include "ps/client/ps_client.h"

#include <atomic>
#include <random>

namespace psgd {
namespace ps {

uint64_t NewPushId() {
  static std::atomic<uint64_t> next{[] {
    std::random_device device;
    // The top bit clear: a process makes far fewer than 2^63 pushes.
    return ((uint64_t{device()} << 32) ^ device()) >> 1 | 1;
  }()};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ps
}  // namespace psgd
