// Arithmetic counts and the machine's peak, for compute_bench's "how far
// from peak" line.
//
// Thread-safety: pure functions; MeasurePeakGflops starts and joins its own
// threads.
#ifndef PSGD_WORKER_BENCH_FLOPS_H_
#define PSGD_WORKER_BENCH_FLOPS_H_

#include <string>

#include "worker/models/network.h"

namespace psgd {

// Floating-point operations (a multiply-add is 2) of one training step of
// the cifar10 tutorial model, per image: the forward pass plus the backward
// pass as computed (no gradient for the input images).
double TutorialTrainingFlopsPerImage();
// The same counting conv1's input gradient too (the issue's "about 111
// MFLOP"), which neither this project nor PyTorch computes.
double TutorialTrainingFlopsPerImageWithInputGradient();

// The same for a layer-graph network (worker/models/network.h): each conv
// and dense layer's multiply-adds forward, for the input gradient (not for
// the layer that reads the images) and for the weight gradient. Batch
// norm, ReLU, pooling and the adds are not counted (a few percent).
double NetworkTrainingFlopsPerImage(const NetworkSpec& spec);

// Layer `layer`'s share of that: its forward, and its backward (the input
// gradient unless it reads the images, and the weight gradient); zero for
// the layers that are not counted.
struct LayerFlops {
  double forward = 0.0;
  double backward = 0.0;
};
LayerFlops NetworkLayerFlopsPerImage(const NetworkSpec& spec, int layer);

struct PeakResult {
  double gflops = 0.0;
  std::string isa;  // "avx512f", "avx2+fma" or "sse2"
};

// Runs independent FMA chains on `threads` threads for about `seconds` and
// returns the rate: the practical single-precision peak of this machine.
PeakResult MeasurePeakGflops(int threads, double seconds);

}  // namespace psgd

#endif  // PSGD_WORKER_BENCH_FLOPS_H_
