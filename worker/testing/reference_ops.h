// Naive float64 versions of the backend's ops, for tests: the independent
// reference that backends' forward passes are compared with, and whose
// finite differences their backward passes are compared with. Written for
// clarity, not speed (plain loops over the definitions in op_shapes.h).
//
// Thread-safety: pure functions.
#ifndef PSGD_WORKER_TESTING_REFERENCE_OPS_H_
#define PSGD_WORKER_TESTING_REFERENCE_OPS_H_

#include <cstdint>
#include <vector>

#include "worker/backend/op_shapes.h"

namespace psgd {
namespace reference {

using Vec = std::vector<double>;

// x: (N, C, H, W); w: (O, C, KH, KW); b: (O), unread without a bias  ->
// (N, O, OH, OW)
Vec Conv2d(const Conv2dShape& s, const Vec& x, const Vec& w, const Vec& b);

// Batch norm (and the ReLU when s.relu) with the batch's statistics.
// x: (N, C, H, W); gamma, beta: (C)  ->  (N, C, H, W); `mean` and `var` (C),
// when not null, get the batch's mean and biased variance.
Vec BatchNormTraining(const BatchNormShape& s, const Vec& x, const Vec& gamma,
                      const Vec& beta, Vec* mean = nullptr, Vec* var = nullptr);

// The same with given statistics. x: (N, C, H, W); gamma, beta, mean, var:
// (C)  ->  (N, C, H, W)
Vec BatchNormInference(const BatchNormShape& s, const Vec& x, const Vec& gamma,
                       const Vec& beta, const Vec& mean, const Vec& var);

// x: (rows, inner)  ->  (rows), each row's mean
Vec GlobalAvgPool(int64_t rows, int64_t inner, const Vec& x);

// x: (N, C, H, W)  ->  (N, C, OH, OW)
Vec MaxPool(const PoolShape& s, const Vec& x);

// x: (N, C, H, W)  ->  (N, C, H, W)
Vec Lrn(const LrnShape& s, const Vec& x);

// x: (n)  ->  (n)
Vec Relu(const Vec& x);

// x: (N, K); w: (K, M); b: (M)  ->  (N, M)
Vec Dense(const DenseShape& s, const Vec& x, const Vec& w, const Vec& b);

// logits: (N, K); labels: (N)  ->  mean over N of -log softmax[label]
double SoftmaxCrossEntropy(int64_t batch, int64_t classes, const Vec& logits,
                           const std::vector<int32_t>& labels);

// sum(w^2) / 2
double L2Loss(const Vec& w);

}  // namespace reference
}  // namespace psgd

#endif  // PSGD_WORKER_TESTING_REFERENCE_OPS_H_
