// Helpers for the gpu-tagged tests: the GPU backend under each option set
// worth checking, and the comparison with the CPU backend.
//
// Tolerances: model_test_inputs.h (kFloat32Tolerance, kTf32Tolerance,
// kTieTolerance), included here.
//
// Thread-safety: test code, one thread.
#ifndef PSGD_WORKER_GPU_TESTS_GPU_TESTING_H_
#define PSGD_WORKER_GPU_TESTS_GPU_TESTING_H_

#include <memory>
#include <string>
#include <vector>

#include "worker/backend/backend.h"
#include "worker/testing/compare.h"
#include "worker/testing/model_test_inputs.h"

namespace psgd {
namespace testing {

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

#endif  // PSGD_WORKER_GPU_TESTS_GPU_TESTING_H_
