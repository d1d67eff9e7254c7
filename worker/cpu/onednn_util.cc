#include "worker/cpu/onednn_util.h"

#include <cblas.h>
#include <omp.h>

#include "absl/strings/str_cat.h"

namespace psgd {

void SetLibraryThreads(int threads) {
#if defined(__SANITIZE_THREAD__)
  threads = 1;
#endif
  omp_set_num_threads(threads);
  if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
}

void OneDnnContext::PrepareThread() const { SetLibraryThreads(threads); }

LayoutBridge::LayoutBridge(const dnnl::memory::desc& user,
                           const dnnl::memory::desc& wanted,
                           const dnnl::engine& engine, bool input)
    : user_(user, engine, DNNL_MEMORY_NONE) {
  if (user == wanted) {
    inner_ = user_;
    return;
  }
  inner_ = dnnl::memory(wanted, engine);
  reorder_ =
      input ? dnnl::reorder(user_, inner_) : dnnl::reorder(inner_, user_);
}

const dnnl::memory& LayoutBridge::Input(const float* data,
                                        dnnl::stream& stream) {
  // oneDNN takes a non-const handle but does not write a source.
  user_.set_data_handle(const_cast<float*>(data));
  if (reorder_) reorder_->execute(stream, user_, inner_);
  return inner_;
}

const dnnl::memory& LayoutBridge::Output(float* data) {
  user_.set_data_handle(data);
  return inner_;
}

void LayoutBridge::FinishOutput(dnnl::stream& stream) {
  if (reorder_) reorder_->execute(stream, inner_, user_);
}

absl::Status OneDnnError(absl::string_view what, const dnnl::error& e) {
  return absl::InternalError(absl::StrCat(
      what, ": oneDNN error ", static_cast<int>(e.status), ": ", e.what()));
}

}  // namespace psgd
