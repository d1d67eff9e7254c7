// Shared pieces of the oneDNN-based CPU ops: the engine and stream of one
// CPU backend, the bridge between the backend's plain layouts (NCHW, OIHW)
// and the blocked layouts oneDNN's kernels prefer, and error conversion.
//
// Thread-safety: an OneDnnContext and the bridges are used by one thread at a
// time (the backend's contract).
#ifndef PSGD_WORKER_CPU_ONEDNN_UTIL_H_
#define PSGD_WORKER_CPU_ONEDNN_UTIL_H_

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

// The oneDNN engine and stream of one CpuBackend, and its thread count.
struct OneDnnContext {
  dnnl::engine engine;
  dnnl::stream stream;
  int threads = 1;

  // oneDNN's CPU runtime here is OpenMP, whose thread count is a setting of
  // the calling thread: every op sets it before it runs.
  void PrepareThread() const;
};

// One argument of a primitive: the caller's memory in the plain layout and,
// when the primitive wants another layout, an internal buffer and the
// reorder between the two.
class LayoutBridge {
 public:
  LayoutBridge() = default;
  // `input`: the primitive reads this argument (reorder user -> inner before
  // it runs); otherwise it writes it (reorder inner -> user after).
  LayoutBridge(const dnnl::memory::desc& user, const dnnl::memory::desc& wanted,
               const dnnl::engine& engine, bool input);

  // Points the user memory at `data` and, for an input, reorders it into the
  // inner layout. Returns the memory the primitive should use.
  const dnnl::memory& Input(const float* data, dnnl::stream& stream);
  // Points the user memory at `data`; returns the memory the primitive
  // should write. Call FinishOutput after the primitive.
  const dnnl::memory& Output(float* data);
  void FinishOutput(dnnl::stream& stream);

 private:
  dnnl::memory user_;
  dnnl::memory inner_;  // the same object as user_ when the layouts agree
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
