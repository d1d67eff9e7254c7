// Which kernel runs a convolution where Winograd applies (conv_winograd.h),
// chosen per shape by measurement, not by a rule: Winograd's F(2x2, 3x3)
// does 4/9 of the direct kernel's multiply-adds but adds transforms whose
// cost does not shrink with the channels, so on narrow layers oneDNN's
// direct kernel is faster (on an AVX2 EPYC, resnet20's 16-channel layers
// took 1.3x the direct kernel's time as Winograd, its 64-channel ones 0.7x).
// The CPU backend's default, `conv=auto`, makes both ops for such a shape,
// times one forward, backward data and backward filter of each (the best of
// two, after one untimed), and keeps the faster; the choice is cached for
// the process per shape (its bias and fused ReLU aside) and thread count,
// so every op of that shape, an inference op with a batch norm folded into
// it among them, and every backend of the process, runs the same kernel.
//
//   ConvChooser chooser(&TimeConvPasses);
//   ASSIGN_OR_RETURN(bool winograd, chooser.Choose(key, w.get(), d.get()));
//
// Thread-safety: thread-safe.
#ifndef PSGD_WORKER_CPU_CONV_CHOICE_H_
#define PSGD_WORKER_CPU_CONV_CHOICE_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "worker/backend/backend.h"

namespace psgd {

// Milliseconds of one forward, backward data and backward filter of `op` on
// buffers of its shape (host memory), the best of two after one untimed.
absl::StatusOr<double> TimeConvPasses(Conv2dOp* op);

class ConvChooser {
 public:
  // How long the passes of an op take (TimeConvPasses, or a test's).
  using Measure = std::function<absl::StatusOr<double>(Conv2dOp*)>;
  explicit ConvChooser(Measure measure) : measure_(std::move(measure)) {}

  // The choice made for `key` before, if any.
  std::optional<bool> Cached(const std::string& key) const;
  // Whether Winograd (true) or the direct kernel runs shapes of `key`:
  // measured the first time (both ops of the same shape), cached after.
  // The measurement's error, if any.
  absl::StatusOr<bool> Choose(const std::string& key, Conv2dOp* winograd,
                              Conv2dOp* direct);
  // One line per choice: "KEY: Winograd 9.10 ms, direct 12.31 ms: Winograd".
  std::vector<std::string> Notes() const;

 private:
  const Measure measure_;
  mutable Mutex mu_;
  std::map<std::string, bool> chosen_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> notes_ ABSL_GUARDED_BY(mu_);
};

// The process's chooser (TimeConvPasses), shared by every CPU backend.
ConvChooser* ProcessConvChooser();

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_CONV_CHOICE_H_
