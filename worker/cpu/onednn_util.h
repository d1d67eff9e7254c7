// Shared pieces of the oneDNN-based CPU ops: the engine and stream of one
// CPU backend, the workspace its ops share, the activation layouts (NCHW or
// channel blocks, op_shapes.h), the bridge between the caller's layouts and
// the ones oneDNN's kernels want, and error conversion.
//
// Memory: an op's blocked-layout copies and oneDNN's scratchpads live only
// for one call of the op (the copy in, the primitive, the copy out), so they
// are not the op's own: every call takes them from the context's workspace,
// which is as large as the largest call of any op of the backend. (Each
// convolution used to keep nine such buffers, six of an activation's size,
// for the whole run.)
//
// Thread-safety: an OneDnnContext, its workspace and the bridges are used by
// one thread at a time (the backend's contract: its ops run one after the
// other).
#ifndef PSGD_WORKER_CPU_ONEDNN_UTIL_H_
#define PSGD_WORKER_CPU_ONEDNN_UTIL_H_

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dnnl.hpp"

namespace psgd {

// Threads for the libraries with thread pools of their own (oneDNN's OpenMP
// team for the calling thread; OpenBLAS, process-wide). Under
// ThreadSanitizer both get one thread: their workers synchronise through
// libgomp barriers and spin-waits that tsan cannot see, so it would report
// false races. Our own ThreadPool keeps its threads there and is checked.
void SetLibraryThreads(int threads);

// The channel block of oneDNN's preferred activation layout on this CPU (as
// oneDNN sees it, ONEDNN_MAX_CPU_ISA included): 16 with AVX-512, 8 with
// AVX2, else 0 (NCHW).
int64_t OneDnnChannelBlock();

// The memory tag of an (N, C, H, W) activation in the layout of
// `channel_block` (0, 8 or 16; op_shapes.h).
dnnl::memory::format_tag ActivationTag(int64_t channel_block);

// Whether oneDNN runs bfloat16 convolutions on this CPU with its own
// instructions (AVX-512 BF16; ONEDNN_MAX_CPU_ISA included), not emulated.
bool OneDnnHasBf16();

// Memory an op needs during one call only, shared by every op of a context.
// Plan time: Reserve the most one call takes (CallBytes of its pieces). Call
// time: a CallSpace hands out the pieces.
class OneDnnWorkspace {
 public:
  // Pieces are aligned to this (oneDNN's and AVX-512's).
  static constexpr size_t kAlignment = 64;
  static size_t Aligned(size_t bytes) {
    return (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  // The bytes of one call that takes pieces of these sizes.
  static size_t CallBytes(std::initializer_list<size_t> pieces);

  void Reserve(size_t bytes) { reserved_ = std::max(reserved_, bytes); }
  size_t reserved() const { return reserved_; }
  // The workspace, allocated (or grown) to reserved() bytes on first use.
  char* Acquire();

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  size_t reserved_ = 0;
  size_t allocated_ = 0;
  std::unique_ptr<char, Free> data_;
};

// The pieces of one call, in the order the op takes them.
class CallSpace {
 public:
  explicit CallSpace(OneDnnWorkspace* workspace)
      : base_(workspace->Acquire()), size_(workspace->reserved()) {}
  // `bytes` (aligned) of the workspace after the pieces taken so far. An op
  // that takes more than it reserved is a bug: a dnnl::error, which
  // CatchOneDnn turns into INTERNAL.
  char* Take(size_t bytes);

 private:
  char* const base_;
  const size_t size_;
  size_t used_ = 0;
};

// The oneDNN engine and stream of one CpuBackend, its thread count and the
// workspace its ops share.
struct OneDnnContext {
  dnnl::engine engine;
  dnnl::stream stream;
  int threads = 1;
  OneDnnWorkspace workspace;

  // oneDNN's CPU runtime here is OpenMP, whose thread count is a setting of
  // the calling thread: every op sets it before it runs.
  void PrepareThread() const;
};

// One argument of a primitive: the caller's memory in the plain layout and,
// when the primitive wants another layout, a buffer of the call's workspace
// and the reorder between the two.
class LayoutBridge {
 public:
  LayoutBridge() = default;
  // `input`: the primitive reads this argument (reorder user -> inner before
  // it runs); otherwise it writes it (reorder inner -> user after).
  LayoutBridge(const dnnl::memory::desc& user, const dnnl::memory::desc& wanted,
               const dnnl::engine& engine, bool input);

  // The workspace bytes a call takes for it: 0 when the layouts agree.
  size_t bytes() const { return inner_bytes_; }
  // Points the user memory at `data` and, for an input, reorders it into the
  // inner layout, in a piece of `space`. Returns the memory the primitive
  // should use.
  const dnnl::memory& Input(const float* data, dnnl::stream& stream,
                            CallSpace* space);
  // Points the user memory at `data`; returns the memory the primitive
  // should write (a piece of `space`). Call FinishOutput after the
  // primitive.
  const dnnl::memory& Output(float* data, CallSpace* space);
  void FinishOutput(dnnl::stream& stream);

 private:
  dnnl::memory user_;
  dnnl::memory inner_;      // the same object as user_ when the layouts agree
  size_t inner_bytes_ = 0;  // 0 when the layouts agree
  std::optional<dnnl::reorder> reorder_;
};

// Runs `fn`, turning a dnnl::error into INTERNAL "<what>: <message>".
template <typename Fn>
absl::Status CatchOneDnn(absl::string_view what, Fn&& fn);

absl::Status OneDnnError(absl::string_view what, const dnnl::error& e);

template <typename Fn>
absl::Status CatchOneDnn(absl::string_view what, Fn&& fn) {
  try {
    fn();
  } catch (const dnnl::error& e) {
    return OneDnnError(what, e);
  }
  return absl::OkStatus();
}

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_ONEDNN_UTIL_H_
