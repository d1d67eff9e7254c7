// Helpers for the gpu-tagged tests: the GPU backend under each option set
// worth checking, and the comparison with the CPU backend.
//
// Tolerances (relative to the largest reference value, as
// testing::MaxRelativeDifference):
//   kFloat32Tolerance = 1e-4  float32 math on both sides; the backends sum
//                             in different orders (cuDNN's algorithms
//                             include FFT and Winograd transforms, whose
//                             float32 rounding is larger than a direct sum's
//                             but far below this)
//   kTf32Tolerance    = 1e-2  tf32=on: products of 10-bit mantissas (a
//                             relative error of 2^-11 per product) summed
//                             over up to 1600 terms in a convolution
//
// Thread-safety: test code, one thread.
#ifndef PSGD_WORKER_GPU_GPU_TESTING_H_
#define PSGD_WORKER_GPU_GPU_TESTING_H_

#include <memory>
#include <string>
#include <vector>

#include "worker/backend/backend.h"
#include "worker/testing/compare.h"

namespace psgd {
namespace testing {

constexpr double kFloat32Tolerance = 1e-4;
constexpr double kTf32Tolerance = 1e-2;

// The GPU backend option sets every op test runs: the defaults (timed
// algorithm choice, cuDNN LRN), heuristic algorithms with the LRN kernel,
// and deterministic algorithms. All with float32 math.
std::vector<std::string> GpuBackendNames();

// A backend by name (a GPU one, or "cpu"); REQUIREs success and prints the
// GPU's description.
std::unique_ptr<Backend> MakeGpuBackend(const std::string& name);

// max |got - want| / max(max |want|, 1e-30), +inf when a value is NaN or
// infinite (compare.h); REQUIREs equal sizes. `CHECK(RelativeError(a, b) <
// tol)` prints the index and values of the largest difference.
Comparison RelativeError(const std::vector<float>& got,
                         const std::vector<float>& want);

// The plan notes of a GPU backend joined one per line, for INFO.
std::string PlanNotes(const Backend& backend);

}  // namespace testing
}  // namespace psgd

#endif  // PSGD_WORKER_GPU_GPU_TESTING_H_
