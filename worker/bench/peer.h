// Runs a PyTorch peer benchmark in a child process and reads its
// throughput: the tutorial model's (../shared/peers/torch_cifar10_step.py,
// with and without its LRN layers) or a layer-graph network's
// (worker/bench/torch_network_step.py --model NAME).
//
// Thread-safety: a plain function (it forks a process).
#ifndef PSGD_WORKER_BENCH_PEER_H_
#define PSGD_WORKER_BENCH_PEER_H_

#include <string>

#include "absl/status/statusor.h"

namespace psgd {

struct PeerOptions {
  std::string python = "/usr/bin/python3";
  std::string script;
  int threads = 2;
  int64_t batch = 128;
  int steps = 30;
  bool lrn = true;  // the tutorial's peer: with its LRN layers
  // Non-empty: the network's peer, given --model `model` (lrn unused).
  std::string model;
  // The network's peer only: --channels_last, --bf16_autocast.
  bool channels_last = false;
  bool bf16_autocast = false;
};

struct PeerResult {
  double images_per_s = 0.0;
  std::string line;  // the peer's own output line
};

// NOT_FOUND when the interpreter or the script is missing; UNAVAILABLE (with
// the tail of its output) when the peer fails, e.g. without PyTorch.
absl::StatusOr<PeerResult> RunTorchPeer(const PeerOptions& options);

}  // namespace psgd

#endif  // PSGD_WORKER_BENCH_PEER_H_
