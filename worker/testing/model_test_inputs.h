// Inputs for the tests of the tutorial model on a backend (gpu_model_test,
// model_ties_test, tutorial_trainer_test), and the tolerances of the GPU
// tests, which gpu_testing.h (GPU builds only) re-exports.
//
// Tolerances, relative to the largest reference value (compare.h):
//   kFloat32Tolerance = 1e-4  float32 math on both sides; the backends sum
//                             in different orders (cuDNN's algorithms
//                             include FFT and Winograd transforms, whose
//                             float32 rounding is larger than a direct sum's
//                             but far below this)
//   kTf32Tolerance    = 1e-2  tf32=on: products of 10-bit mantissas (a
//                             relative error of 2^-11 per product) summed
//                             over up to 1600 terms in a convolution
//   kTieTolerance     = 1e-1  every gradient at a large batch (128): max
//                             pooling passes each window's gradient to its
//                             largest input, and where two inputs are equal
//                             to rounding the GPU and the CPU may pick
//                             different winners; a ReLU whose input is
//                             within rounding of zero may open on one and
//                             stay shut on the other. Either moves a whole
//                             channel's or unit's weight gradient.
//                             model_ties_test measures it on the CPU with the
//                             inputs perturbed by a relative 1e-5 (cuDNN's
//                             FFT/Winograd rounding): up to 4.5e-3 for the
//                             convolutions and, in one run, 2.4e-2 for
//                             local3 (a ReLU gate); 1e-4 gave up to 4.4e-2.
//                             Logits and loss stay within kFloat32Tolerance,
//                             batch 1 and 3 keep the strict tolerance for
//                             everything, and a wrong gradient (order 1) is
//                             still far outside kTieTolerance.
//
// Thread-safety: plain functions.
#ifndef PSGD_WORKER_TESTING_MODEL_TEST_INPUTS_H_
#define PSGD_WORKER_TESTING_MODEL_TEST_INPUTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "worker/models/model.h"

namespace psgd {
namespace testing {

constexpr double kFloat32Tolerance = 1e-4;
constexpr double kTf32Tolerance = 1e-2;
constexpr double kTieTolerance = 1e-1;

// The tutorial model's initial values (seeded) with biases uniform in
// [-0.2, 0.2] rather than constant, so that bias errors show.
NamedTensors TutorialWeights(uint64_t seed);

// n images of 3x24x24 uniform in [-scale, scale] (40 is the scale the
// tutorial's LRN matters at).
Tensor RandomImages(int64_t n, uint64_t seed, double scale);

// n labels uniform in 0..9.
std::vector<int32_t> RandomLabels(int64_t n, uint64_t seed);

std::vector<float> Values(const Tensor& t);

}  // namespace testing
}  // namespace psgd

#endif  // PSGD_WORKER_TESTING_MODEL_TEST_INPUTS_H_
