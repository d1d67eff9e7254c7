#include "ps/client/model_slices.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/wire/wire_dtype.h"

namespace psgd {
namespace ps {
namespace {

template <typename View, typename Pointer>
absl::Status OrderModelImpl(const Placement& placement,
                            absl::Span<const View> tensors,
                            std::vector<Pointer>* data, bool all) {
  data->assign(placement.variables.size(), nullptr);
  for (const View& t : tensors) {
    auto it = placement.variable_index.find(t.name);
    if (it == placement.variable_index.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", t.name, "' is not a variable of the model"));
    }
    const VariableSpec& spec = placement.variables[it->second];
    if ((*data)[it->second] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("variable '", t.name, "' is given twice"));
    }
    if (t.view.shape() != spec.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", t.name, "' has shape ", ShapeToString(t.view.shape()),
          " but the model's has shape ", ShapeToString(spec.shape)));
    }
    (*data)[it->second] = t.view.data();
  }
  if (!all && tensors.empty()) {
    return absl::InvalidArgumentError("a part of the model with no variable");
  }
  for (size_t v = 0; all && v < data->size(); ++v) {
    if ((*data)[v] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "variable '", placement.variables[v].name, "' is missing"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckVersion(const ModelVersion& version, int num_shards) {
  if (static_cast<int>(version.steps.size()) != num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("a model version of ", version.steps.size(), " steps for ",
                     num_shards, " shards"));
  }
  return absl::OkStatus();
}

absl::Status AgreeOnGeneration(int shard, int64_t generation,
                               ModelVersion* version) {
  if (shard == 0 || generation == version->generation) {
    version->generation = generation;
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat(
      "pull: shard ", shard, " answered from generation ", generation,
      " and an earlier shard from generation ", version->generation,
      " (a rollback is under way): pull again"));
}

absl::Status OrderModel(const Placement& placement,
                        absl::Span<const NamedConstTensorView> tensors,
                        std::vector<const float*>* data) {
  return OrderModelImpl(placement, tensors, data, /*all=*/true);
}

absl::Status OrderModel(const Placement& placement,
                        absl::Span<const NamedTensorView> tensors,
                        std::vector<float*>* data) {
  return OrderModelImpl(placement, tensors, data, /*all=*/true);
}

absl::Status OrderPart(const Placement& placement,
                       absl::Span<const NamedConstTensorView> tensors,
                       std::vector<const float*>* data) {
  return OrderModelImpl(placement, tensors, data, /*all=*/false);
}

absl::Status OrderPart(const Placement& placement,
                       absl::Span<const NamedTensorView> tensors,
                       std::vector<float*>* data) {
  return OrderModelImpl(placement, tensors, data, /*all=*/false);
}

std::vector<TensorBytes> ShardSlices(const Placement& placement, int shard,
                                     absl::Span<const float* const> model) {
  std::vector<TensorBytes> out;
  out.reserve(placement.shard_slices[shard].size());
  for (int s : placement.shard_slices[shard]) {
    const Slice& slice = placement.slices[s];
    const float* data = model[slice.variable];
    if (data == nullptr) continue;  // not in the part
    if (data == NoGradient()) {
      TensorBytes marker{
          slice.name, slice.shape, DType::kFloat32, {}, std::nullopt};
      marker.no_gradient = true;
      out.push_back(marker);
      continue;
    }
    out.push_back(
        FloatTensorBytes(slice.name, slice.shape, data + slice.offset));
  }
  return out;
}

std::vector<TensorBytes> ShardInitialValues(
    const Placement& placement, int shard,
    absl::Span<const float* const> model) {
  std::vector<TensorBytes> out = ShardSlices(placement, shard, model);
  for (TensorBytes& t : out) {
    const Slice& slice = placement.slices[placement.slice_index.at(t.name)];
    const VariableSpec& variable = placement.variables[slice.variable];
    t.kind = variable.kind;
    if (placement.variable_slices[slice.variable].size() > 1) {
      t.slice_variable = variable.name;
      t.slice_part = slice.part;
      t.slice_row_begin = slice.row_begin;
    }
  }
  return out;
}

absl::StatusOr<char*> ShardAssembler::Destination(const TensorBytes& t,
                                                  size_t bytes) {
  auto it = placement_.slice_index.find(t.name);
  if (it == placement_.slice_index.end() ||
      placement_.slices[it->second].shard != shard_) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", shard_, " returned '", t.name,
                     "', which the placement does not put on it"));
  }
  const Slice& slice = placement_.slices[it->second];
  if (model_[slice.variable] == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard ", shard_, " returned '", t.name, "', which was not asked for"));
  }
  if (seen_[it->second]) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", shard_, " returned '", t.name, "' twice"));
  }
  seen_[it->second] = true;
  const Shape shape(t.shape.begin(), t.shape.end());
  const size_t want = slice.num_elements * DTypeSize(wire_dtype_);
  if (t.dtype != wire_dtype_ || shape != slice.shape || bytes != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", shard_, " returned '", t.name, "' as ",
                     DTypeName(t.dtype), " ", ShapeToString(shape), " in ",
                     bytes, " bytes; expected ", DTypeName(wire_dtype_), " ",
                     ShapeToString(slice.shape), " in ", want, " bytes"));
  }
  float* dest = model_[slice.variable] + slice.offset;
  if (wire_dtype_ == DType::kFloat32) return reinterpret_cast<char*>(dest);
  if (scratch_->size() < static_cast<size_t>(slice.num_elements)) {
    scratch_->resize(slice.num_elements);
  }
  pending_ = dest;
  return reinterpret_cast<char*>(scratch_->data());
}

absl::Status ShardAssembler::Done(const TensorBytes& t) {
  if (wire_dtype_ == DType::kFloat32) return absl::OkStatus();
  float* dest = pending_;
  pending_ = nullptr;
  if (dest == nullptr) {
    return absl::InternalError(absl::StrCat("shard ", shard_, ": '", t.name,
                                            "' ended without its data"));
  }
  RETURN_IF_ERROR(Annotate(CheckWireTensor(t, wire_dtype_, "weight"),
                           absl::StrCat("shard ", shard_, " returned ")));
  DecodeWireTensor(t, dest);
  return absl::OkStatus();
}

absl::Status ShardAssembler::Add(const TensorBytes& t) {
  ASSIGN_OR_RETURN(char* dest, Destination(t, t.data.size()));
  std::memcpy(dest, t.data.data(), t.data.size());
  TensorBytes arrived = t;
  arrived.data = absl::string_view(dest, t.data.size());
  return Done(arrived);
}

absl::Status ShardAssembler::Finish() const {
  for (int s : placement_.shard_slices[shard_]) {
    if (!seen_[s] && model_[placement_.slices[s].variable] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard ", shard_, " did not return '",
                       placement_.slices[s].name, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status AssembleShard(const Placement& placement, int shard,
                           absl::Span<const TensorBytes> pulled,
                           absl::Span<float* const> model) {
  ShardAssembler assembler(placement, shard, model);
  for (const TensorBytes& t : pulled) RETURN_IF_ERROR(assembler.Add(t));
  return assembler.Finish();
}

}  // namespace ps
}  // namespace psgd
