// Test helpers for backends: random inputs, round trips through backend
// memory, and the comparison of an analytic gradient with central finite
// differences of a float64 function.
//
// Thread-safety: plain functions; a Backend passed in is used by the
// calling thread only.
#ifndef PSGD_WORKER_TESTING_GRADCHECK_H_
#define PSGD_WORKER_TESTING_GRADCHECK_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/testing/compare.h"

// Catch2 checks of absl::Status / StatusOr, printing the status on failure.
#define REQUIRE_OK(expr)                         \
  do {                                           \
    const ::absl::Status psgd_require_ = (expr); \
    INFO(psgd_require_.ToString());              \
    REQUIRE(psgd_require_.ok());                 \
  } while (0)

namespace psgd {
namespace testing {

// The backend names every backend test runs against: the CPU backend with
// each of its kernel choices.
std::vector<std::string> CpuBackendNames();

// A backend by name with two threads; REQUIREs success.
std::unique_ptr<Backend> MakeBackend(const std::string& name);

// Unwraps a StatusOr, REQUIRE-ing that it is OK.
template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(value).value();
}

// n values uniform in [lo, hi).
std::vector<float> RandomValues(int64_t n, uint64_t seed, float lo, float hi);
// n values uniform in [lo, hi) with |v| >= margin (away from ReLU's kink).
std::vector<float> RandomAwayFromZero(int64_t n, uint64_t seed, float lo,
                                      float hi, float margin);
// n distinct values in [lo, hi), at least (hi - lo) / (2 n) apart, in random
// order (no near-ties for max pooling).
std::vector<float> DistinctValues(int64_t n, uint64_t seed, float lo, float hi);

std::vector<double> ToDouble(const std::vector<float>& v);

// The values of an (N, C, H, W) activation `s` from NCHW into blocks of
// `block` channels (op_shapes.h, ValidateChannelBlock), or back: the
// layout's definition, independent of oneDNN.
std::vector<float> ToBlocks(const std::vector<float>& nchw, const Shape& s,
                            int64_t block);
std::vector<float> FromBlocks(const std::vector<float>& blocked, const Shape& s,
                              int64_t block);

// Backend memory holding `values` with `shape`.
DeviceTensor Upload(Backend* backend, const std::vector<float>& values,
                    const Shape& shape);
// A zero-filled backend tensor.
DeviceTensor Zeros(Backend* backend, const Shape& shape);
std::vector<float> Download(Backend* backend, ConstDeviceView view);

// sum_i weights[i] * values[i]: the scalar whose gradient with respect to
// values is `weights` (the upstream gradient fed to a backward pass).
double Dot(const std::vector<double>& values,
           const std::vector<float>& weights);

struct GradientError {
  // max |analytic - numeric|; +inf when either is NaN or infinite.
  double max_abs_error = 0.0;
  double max_abs_numeric = 0.0;  // max |numeric|
  int64_t worst_index = -1;
  int64_t checked = 0;
  // max_abs_error / max_abs_numeric (0 when both are 0).
  double relative() const;
  std::string ToString() const;
};

// Compares analytic[i] with the central difference (f(x + h e_i) -
// f(x - h e_i)) / 2h for every i, or for `max_checks` indices drawn with
// `seed` when x is larger.
GradientError CompareGradient(
    const std::function<double(const std::vector<double>&)>& f,
    const std::vector<double>& x, const std::vector<float>& analytic,
    double h = 1e-4, int64_t max_checks = 300, uint64_t seed = 1);

// max |a - b| / max(max |b|, 1e-30), +inf when a value is not finite
// (compare.h); REQUIREs equal sizes. `CHECK(MaxRelativeDifference(a, b) <
// tol)` prints where the largest difference is.
Comparison MaxRelativeDifference(const std::vector<float>& a,
                                 const std::vector<double>& b);

// A layer y = f(x, w, b) with a data gradient and a gradient for (w, b):
// convolution and dense.
struct WeightedLayer {
  Shape x, w, b, y;
  std::function<absl::Status(ConstDeviceView x, ConstDeviceView w,
                             ConstDeviceView b, DeviceView y)>
      forward;
  std::function<absl::Status(ConstDeviceView dy, ConstDeviceView w,
                             DeviceView dx)>
      backward_data;
  std::function<absl::Status(ConstDeviceView x, ConstDeviceView dy,
                             DeviceView dw, DeviceView db)>
      backward_params;
  // The float64 reference of forward.
  std::function<std::vector<double>(const std::vector<double>& x,
                                    const std::vector<double>& w,
                                    const std::vector<double>& b)>
      reference;
};

// Runs the layer on `backend` with random inputs and CHECKs its forward
// against the reference (relative difference below 1e-5) and the three
// gradients against the reference's central finite differences (relative
// error below `tolerance`).
void CheckWeightedLayer(Backend* backend, const WeightedLayer& layer,
                        double tolerance);

}  // namespace testing
}  // namespace psgd

#endif  // PSGD_WORKER_TESTING_GRADCHECK_H_
