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

int64_t OneDnnChannelBlock() {
  // The ISA values are sets of bits, each a superset of the ones below it.
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  auto has = [isa](dnnl_cpu_isa_t want) {
    return (isa & static_cast<unsigned>(want)) == static_cast<unsigned>(want);
  };
  if (has(dnnl_cpu_isa_avx512_core)) return 16;
  if (has(dnnl_cpu_isa_avx2)) return 8;
  return 0;
}

bool OneDnnHasBf16() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned want = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & want) == want;
}

dnnl::memory::format_tag ActivationTag(int64_t channel_block) {
  using Tag = dnnl::memory::format_tag;
  switch (channel_block) {
    case 8:
      return Tag::nChw8c;
    case 16:
      return Tag::nChw16c;
    default:
      return Tag::nchw;
  }
}

size_t OneDnnWorkspace::CallBytes(std::initializer_list<size_t> pieces) {
  size_t total = 0;
  for (size_t p : pieces) total += Aligned(p);
  return total;
}

char* OneDnnWorkspace::Acquire() {
  if (allocated_ < reserved_) {
    data_.reset();  // the old one first: not both at once
    data_.reset(
        static_cast<char*>(std::aligned_alloc(kAlignment, Aligned(reserved_))));
    if (data_ == nullptr) {
      throw dnnl::error(dnnl_out_of_memory,
                        "the ops' shared workspace could not be allocated");
    }
    allocated_ = reserved_;
  }
  return data_.get();
}

char* CallSpace::Take(size_t bytes) {
  const size_t aligned = OneDnnWorkspace::Aligned(bytes);
  if (used_ + aligned > size_) {
    throw dnnl::error(dnnl_runtime_error,
                      "an op took more of the shared workspace than it "
                      "reserved");
  }
  char* piece = base_ + used_;
  used_ += aligned;
  return piece;
}

LayoutBridge::LayoutBridge(const dnnl::memory::desc& user,
                           const dnnl::memory::desc& wanted,
                           const dnnl::engine& engine, bool input)
    : user_(user, engine, DNNL_MEMORY_NONE) {
  if (user == wanted) {
    inner_ = user_;
    return;
  }
  inner_ = dnnl::memory(wanted, engine, DNNL_MEMORY_NONE);
  inner_bytes_ = wanted.get_size();
  reorder_ =
      input ? dnnl::reorder(user_, inner_) : dnnl::reorder(inner_, user_);
}

const dnnl::memory& LayoutBridge::Input(const float* data, dnnl::stream& stream,
                                        CallSpace* space) {
  // oneDNN takes a non-const handle but does not write a source.
  user_.set_data_handle(const_cast<float*>(data));
  if (reorder_) {
    inner_.set_data_handle(space->Take(inner_bytes_));
    reorder_->execute(stream, user_, inner_);
  }
  return inner_;
}

const dnnl::memory& LayoutBridge::Output(float* data, CallSpace* space) {
  user_.set_data_handle(data);
  if (reorder_) inner_.set_data_handle(space->Take(inner_bytes_));
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
