#include "ps/shard/push_checks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace psgd {
namespace ps {

std::vector<absl::Status> CheckPushedTensors(
    absl::Span<const TensorBytes> tensors, absl::Span<float* const> copy_to,
    ThreadPool* pool, LayoutSource layout) {
  std::vector<absl::Status> out = CheckFloatTensors(
      tensors, "gradient", kMaxGradientMagnitude, copy_to, pool);
  std::shared_ptr<const VariableLayout> known;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorBytes& t = tensors[k];
    if (t.no_gradient) {
      out[k] = !t.data.empty()
                   ? absl::InvalidArgumentError(
                         absl::StrCat("'", t.name,
                                      "' is marked as without a gradient but "
                                      "carries ",
                                      t.data.size(), " bytes"))
                   : ValidateShape(Shape(t.shape.begin(), t.shape.end()));
      continue;
    }
    if (out[k].ok()) continue;
    // Only a refusal needs the tensor's kind, to name it in its message:
    // the layout is looked up then, not on every push.
    if (known == nullptr) known = layout();
    const int i = known == nullptr ? -1 : known->Find(t.name);
    if (i >= 0 && known->statistic[i]) {
      out[k] = CheckFloatTensor(t, "batch statistic", kMaxGradientMagnitude,
                                copy_to[k]);
    }
  }
  return out;
}

absl::Status CheckKnownShapes(absl::Span<const TensorBytes> tensors,
                              const VariableLayout* layout) {
  if (layout == nullptr) return absl::OkStatus();
  for (const TensorBytes& t : tensors) {
    const int i = layout->Find(t.name);
    if (i < 0) continue;
    const Shape& want = layout->shapes[i];
    if (!std::equal(t.shape.begin(), t.shape.end(), want.begin(), want.end())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", t.name, "' of shape ",
          ShapeToString(Shape(t.shape.begin(), t.shape.end())),
          ", but the shard's variable has shape ", ShapeToString(want)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNoLocalStatistics(BatchNormStatistics where,
                                    absl::Span<const TensorBytes> tensors,
                                    absl::string_view what) {
  if (where != BatchNormStatistics::kLocal) return absl::OkStatus();
  for (const TensorBytes& t : tensors) {
    if (t.kind != VariableKind::kRunningStatistic) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": '", t.name,
        "' is a batch-norm running statistic, but this cluster keeps them "
        "on the workers (model.batch_norm_statistics: LOCAL)"));
  }
  return absl::OkStatus();
}

std::vector<StagedGradient> StagingFor(absl::Span<const TensorBytes> gradients,
                                       const std::shared_ptr<const void>& keep,
                                       std::vector<float*>* copy_to) {
  std::vector<StagedGradient> out(gradients.size());
  copy_to->assign(gradients.size(), nullptr);
  for (size_t i = 0; i < gradients.size(); ++i) {
    const TensorBytes& g = gradients[i];
    StagedGradient& f = out[i];
    if (g.no_gradient) continue;
    f.bytes = static_cast<int64_t>(g.data.size());
    if (keep != nullptr) {
      f.borrowed = reinterpret_cast<const float*>(g.data.data());
      f.keep = keep;
    } else {
      f.copy = AlignedBuffer::Uninitialized(g.data.size() / sizeof(float));
      (*copy_to)[i] = f.copy.data();
    }
  }
  return out;
}

}  // namespace ps
}  // namespace psgd
