#include "worker/cpu/softmax_xent.h"

#include <algorithm>
#include <cmath>

namespace psgd {

CrossEntropyResult SoftmaxCrossEntropyKernel(int64_t batch, int64_t classes,
                                             const float* logits,
                                             absl::Span<const int32_t> labels,
                                             float* dlogits) {
  CrossEntropyResult result;
  double loss_sum = 0.0;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (int64_t i = 0; i < batch; ++i) {
    const float* row = logits + i * classes;
    float* grad = dlogits + i * classes;
    const float max = *std::max_element(row, row + classes);
    double sum = 0.0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(double{row[j]} - max);
    const double log_sum = std::log(sum);
    const int32_t label = labels[i];
    loss_sum += log_sum + max - row[label];
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(double{row[j]} - max - log_sum);
      grad[j] = static_cast<float>(p - (j == label ? 1.0 : 0.0)) * inv_batch;
    }
    // Correct unless another class scores strictly higher (or the label's
    // logit is not a number).
    bool correct = !std::isnan(row[label]);
    for (int64_t j = 0; j < classes && correct; ++j) {
      correct = !(row[j] > row[label]);
    }
    result.correct += correct ? 1 : 0;
  }
  result.loss = loss_sum / static_cast<double>(batch);
  return result;
}

}  // namespace psgd
