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
// The process's chooser also keeps its choices in a cache file (see
// ProcessConvChooser), a line per CPU and shape, so that the next process
// on the same CPU (the other workers of a machine, the next run) takes them
// without timing again.
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
  std::optional<bool> Cached(const std::string& key);
  // Whether Winograd (true) or the direct kernel runs shapes of `key`:
  // measured the first time (both ops of the same shape), cached after.
  // The measurement's error, if any.
  absl::StatusOr<bool> Choose(const std::string& key, Conv2dOp* winograd,
                              Conv2dOp* direct);
  // One line per choice: "KEY: Winograd 9.10 ms, direct 12.31 ms: Winograd"
  // (with "(measured before, FILE)" before the last colon for a choice the
  // cache file held).
  std::vector<std::string> Notes() const;

  // Keeps choices in `path` as well: takes the choices its lines hold for
  // `cpu` (CpuIdentity()) now, and appends a line for each choice measured
  // from now on. The file is read and written only through no link and in
  // a directory only this user (or root) can change (made, mode 0700, when
  // missing); a line it cannot parse, or a file it may not use, is logged
  // once and passed over, the file left as it is: a choice is then
  // measured, as without a file. Returns how many choices it took.
  int UseCacheFile(const std::string& path, const std::string& cpu);

 private:
  struct Choice {
    bool winograd = false;
    double winograd_ms = 0, direct_ms = 0;
    bool from_file = false;
    bool noted = false;
  };
  void NoteLocked(const std::string& key, Choice* c)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AppendToFile(const std::string& key, const Choice& c);

  const Measure measure_;
  mutable Mutex mu_;
  std::map<std::string, Choice> chosen_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> notes_ ABSL_GUARDED_BY(mu_);
  std::string cache_path_ ABSL_GUARDED_BY(mu_);
  std::string cpu_ ABSL_GUARDED_BY(mu_);
};

// The CPU as a cache file of choices tells CPUs apart: its model name,
// family and model, and the instruction sets the kernels use, from
// /proc/cpuinfo ("AMD EPYC; family 26 model 2; avx2 avx512f avx512_bf16").
std::string CpuIdentity();

// The process's chooser (TimeConvPasses), shared by every CPU backend, with
// the cache file $PSGD_CONV_CACHE (none when it is empty or "none"), or else
// $XDG_CACHE_HOME/psgd/conv_choices.tsv, or else
// $HOME/.cache/psgd/conv_choices.tsv.
ConvChooser* ProcessConvChooser();
// That path ("" for none), from those variables.
std::string DefaultConvCachePath();

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_CONV_CHOICE_H_
