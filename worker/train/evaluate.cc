#include "worker/train/evaluate.h"

#include <algorithm>
#include <memory>

#include "common/status_macros.h"
#include "worker/data/batcher.h"

namespace psgd {

absl::StatusOr<StepResult> EvaluateTestSet(Model* model, const ImageSet& test,
                                           const NamedConstViews& weights,
                                           int64_t batch_size,
                                           int64_t max_examples) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<Batcher> batches,
      Batcher::Create(&test, BatcherOptions::ForEvaluation(
                                 batch_size, BatcherOptions::PipelineFor(
                                                 model->image_shape()))));
  StepResult total;
  double loss_sum = 0.0;
  while (max_examples == 0 || total.examples < max_examples) {
    absl::StatusOr<Batch> b = batches->Next();
    if (absl::IsOutOfRange(b.status())) break;
    RETURN_IF_ERROR(b.status());
    ASSIGN_OR_RETURN(StepResult r,
                     model->Evaluate(weights, b->images.view(), b->labels));
    loss_sum += r.loss * r.examples;
    total.correct += r.correct;
    total.examples += r.examples;
  }
  total.loss = total.cross_entropy =
      loss_sum / std::max<int64_t>(total.examples, 1);
  return total;
}

}  // namespace psgd
