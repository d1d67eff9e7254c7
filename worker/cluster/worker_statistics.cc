#include "worker/cluster/worker_statistics.h"

#include <optional>
#include <utility>

#include "common/status_macros.h"
#include "spdlog/spdlog.h"
#include "worker/cluster/local_statistics.h"
#include "worker/models/initialize.h"

namespace psgd {

WorkerStatistics::WorkerStatistics(Model* model,
                                   WorkerStatisticsOptions options)
    : model_(model),
      options_(std::move(options)),
      on_servers_(options_.on_servers && !model->state().empty()) {}

int WorkerStatistics::session_variables() const {
  return on_servers_ ? static_cast<int>(model_->state().size()) : 0;
}

absl::Status WorkerStatistics::Prepare(
    std::vector<VariableSpec>* variables,
    std::vector<ps::NamedTensorView>* buffers) {
  if (on_servers_) {
    pulled_ = InitialValues(model_->state(), options_.seed);
    for (const VariableSpec& s : model_->state()) {
      variables->push_back(s);
      buffers->push_back({s.name, pulled_.at(s.name).view()});
    }
    return absl::OkStatus();
  }
  if (model_->state().empty() || options_.local_file.empty()) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::optional<NamedTensors> saved,
                   LoadLocalStatistics(options_.local_file, model_->state()));
  if (!saved.has_value()) return absl::OkStatus();
  RETURN_IF_ERROR(model_->SetState(ViewsOf(*saved)));
  spdlog::info("worker {}: batch norm statistics of the previous run from {}",
               options_.worker_id, options_.local_file);
  return absl::OkStatus();
}

void WorkerStatistics::AppendInitial(
    std::vector<ps::NamedConstTensorView>* initial) const {
  for (const VariableSpec& s : model_->state()) {
    auto it = pulled_.find(s.name);
    if (it != pulled_.end()) initial->push_back({s.name, it->second.view()});
  }
}

absl::Status WorkerStatistics::TakeBatch() {
  if (!on_servers_) return absl::OkStatus();
  return model_->GetBatchStatistics(&batch_);
}

void WorkerStatistics::AppendPush(
    std::vector<ps::NamedConstTensorView>* push) const {
  if (!on_servers_) return;
  for (const VariableSpec& s : model_->state()) {
    push->push_back({s.name, batch_.at(s.name).view()});
  }
}

absl::Status WorkerStatistics::BeforeEvaluation() {
  if (!on_servers_) return absl::OkStatus();
  return model_->SetState(ViewsOf(pulled_));
}

absl::Status WorkerStatistics::AfterStep(int64_t local_step) {
  if (options_.save_every <= 0 || local_step % options_.save_every != 0) {
    return absl::OkStatus();
  }
  return Save();
}

absl::Status WorkerStatistics::Save() {
  if (on_servers_ || model_->state().empty() || options_.local_file.empty()) {
    return absl::OkStatus();
  }
  NamedTensors state;
  RETURN_IF_ERROR(model_->GetState(&state));
  return SaveLocalStatistics(options_.local_file, model_->state(), state);
}

}  // namespace psgd
