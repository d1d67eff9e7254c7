#include "ps/state/types.h"

#include <utility>

#include "common/status_reason.h"

namespace psgd {
namespace ps {

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
  }
  return "unknown";
}

int64_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kBFloat16:
    case DType::kFloat16:
      return 2;
  }
  return 0;
}

TensorBytes FloatTensorBytes(absl::string_view name,
                             absl::Span<const int64_t> shape,
                             const float* data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return TensorBytes{name, shape, DType::kFloat32,
                     absl::string_view(reinterpret_cast<const char*>(data),
                                       static_cast<size_t>(n) * sizeof(float)),
                     std::nullopt};
}

TensorBytes ParameterBytes(absl::string_view name,
                           absl::Span<const int64_t> shape, const float* data) {
  TensorBytes t = FloatTensorBytes(name, shape, data);
  t.kind = VariableKind::kParameter;
  return t;
}

absl::string_view PushOutcomeName(PushOutcome outcome) {
  switch (outcome) {
    case PushOutcome::kAggregated:
      return "aggregated";
    case PushOutcome::kApplied:
      return "applied";
    case PushOutcome::kDroppedStale:
      return "dropped_stale";
    case PushOutcome::kDroppedSurplus:
      return "dropped_surplus";
  }
  return "unknown";
}

namespace {

// The payload's key; its value is PushRefusalName(reason).
constexpr absl::string_view kPushRefusalUrl = "type.psgd/psgd.ps.PushRefusal";

constexpr PushRefusal kRefusals[] = {
    PushRefusal::kNotLive, PushRefusal::kAlreadyPushed, PushRefusal::kTooStale,
    PushRefusal::kFromFuture, PushRefusal::kNotStaged};

}  // namespace

absl::string_view PushRefusalName(PushRefusal reason) {
  switch (reason) {
    case PushRefusal::kNone:
      return "none";
    case PushRefusal::kNotLive:
      return "not_live";
    case PushRefusal::kAlreadyPushed:
      return "already_pushed";
    case PushRefusal::kTooStale:
      return "too_stale";
    case PushRefusal::kFromFuture:
      return "from_future";
    case PushRefusal::kNotStaged:
      return "not_staged";
  }
  return "none";
}

absl::Status PushRefused(PushRefusal reason, absl::string_view message) {
  absl::Status s = absl::FailedPreconditionError(message);
  if (reason == PushRefusal::kNone) return s;
  return WithReason(std::move(s), kPushRefusalUrl, PushRefusalName(reason));
}

PushRefusal PushRefusalOf(const absl::Status& status) {
  if (!absl::IsFailedPrecondition(status)) return PushRefusal::kNone;
  return ReasonOf(status, kPushRefusalUrl, kRefusals, &PushRefusalName,
                  PushRefusal::kNone);
}

constexpr absl::string_view kLeaseRefusalUrl = "type.psgd/psgd.ps.LeaseRefusal";
constexpr LeaseRefusal kLeaseRefusals[] = {
    LeaseRefusal::kNotEnded, LeaseRefusal::kNotYours, LeaseRefusal::kNotLive};

absl::string_view LeaseRefusalName(LeaseRefusal reason) {
  switch (reason) {
    case LeaseRefusal::kNone:
      return "none";
    case LeaseRefusal::kNotEnded:
      return "not_ended";
    case LeaseRefusal::kNotYours:
      return "not_yours";
    case LeaseRefusal::kNotLive:
      return "not_live";
  }
  return "none";
}

absl::Status LeaseRefused(LeaseRefusal reason, absl::Status status) {
  if (reason == LeaseRefusal::kNone) return status;
  return WithReason(std::move(status), kLeaseRefusalUrl,
                    LeaseRefusalName(reason));
}

LeaseRefusal LeaseRefusalOf(const absl::Status& status) {
  return ReasonOf(status, kLeaseRefusalUrl, kLeaseRefusals, &LeaseRefusalName,
                  LeaseRefusal::kNone);
}

absl::string_view DecisionKindName(Decision::Kind kind) {
  switch (kind) {
    case Decision::Kind::kSyncStep:
      return "sync step";
    case Decision::Kind::kAsyncPush:
      return "async push";
    case Decision::Kind::kLeft:
      return "left";
    case Decision::Kind::kDropped:
      return "dropped push";
  }
  return "unknown";
}

}  // namespace ps
}  // namespace psgd
