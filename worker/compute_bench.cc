// compute_bench: throughput of full training steps (forward, backward, Adam)
// of a model on a backend, compared in the same run with the PyTorch peer
// (with and without its LRN layers) and with the machine's FMA peak.
//
//   bazel run -c opt //worker:compute_bench -- --batch=128 --threads=2
//
// The last line is exactly `images_per_s=X`.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/backend/factory.h"
#include "worker/bench/flops.h"
#include "worker/bench/op_profile.h"
#include "worker/bench/peer.h"
#include "worker/models/initialize.h"
#include "worker/models/registry.h"
#include "worker/paths.h"
#include "worker/random.h"
#include "worker/train/adam.h"

ABSL_FLAG(int64_t, batch, 128, "Images per step.");
ABSL_FLAG(int, threads, 2, "Compute threads (and the peer's).");
ABSL_FLAG(int, steps, 20, "Timed steps.");
ABSL_FLAG(int, warmup, 3, "Untimed steps first.");
ABSL_FLAG(std::string, backend, "cpu", "Backend: cpu or cpu:OPTIONS.");
ABSL_FLAG(std::string, model, "cifar10_tutorial", "Model, by registry name.");
ABSL_FLAG(bool, breakdown, false, "Also time each op on its own.");
ABSL_FLAG(bool, peak, true, "Measure the FMA peak and compare.");
ABSL_FLAG(bool, peer, true, "Run the PyTorch peer and print the ratios.");
ABSL_FLAG(std::string, peer_script, "../shared/peers/torch_cifar10_step.py",
          "The peer script; relative to the workspace under bazel run.");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "Python with PyTorch for the peer.");
ABSL_FLAG(int, peer_steps, 30, "The peer's timed steps.");

namespace psgd {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct OwnResult {
  double images_per_s = 0.0;
  double compute_ms = 0.0;
  double adam_ms = 0.0;
};

absl::StatusOr<OwnResult> RunOwn(Backend* backend, int64_t batch, int warmup,
                                 int steps) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   CreateModel(absl::GetFlag(FLAGS_model), backend));
  Shape shape = model->image_shape();
  shape.insert(shape.begin(), batch);
  Tensor images(shape);
  std::vector<int32_t> labels(batch);
  Rng rng(1);
  for (float& v : images.span()) v = static_cast<float>(rng.Normal());
  for (int32_t& l : labels) {
    l = static_cast<int32_t>(rng.UniformInt(model->num_classes()));
  }
  NamedTensors weights = InitialValues(model->variables(), 1), grads;
  LocalAdam adam{AdamOptions()};
  OwnResult r;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) r.compute_ms = r.adam_ms = 0.0;
    const auto t0 = Clock::now();
    ASSIGN_OR_RETURN(StepResult step,
                     model->ComputeGradients(ViewsOf(weights), images.view(),
                                             labels, &grads));
    (void)step;
    const auto t1 = Clock::now();
    RETURN_IF_ERROR(adam.Apply(grads, &weights));
    r.compute_ms += 1e3 * std::chrono::duration<double>(t1 - t0).count();
    r.adam_ms += 1e3 * Since(t1);
  }
  r.compute_ms /= steps;
  r.adam_ms /= steps;
  r.images_per_s = batch * 1e3 / (r.compute_ms + r.adam_ms);
  return r;
}

absl::Status Run() {
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int threads = absl::GetFlag(FLAGS_threads);
  const int steps = absl::GetFlag(FLAGS_steps);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  if (batch < 1 || threads < 1 || steps < 1 || warmup < 0) {
    return absl::InvalidArgumentError(
        "--batch, --threads and --steps must be >= 1, --warmup >= 0");
  }
  BackendOptions backend_options;
  backend_options.threads = threads;
  const std::string backend_name = absl::GetFlag(FLAGS_backend);
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                   CreateBackend(backend_name, backend_options));

  ASSIGN_OR_RETURN(OwnResult own, RunOwn(backend.get(), batch, warmup, steps));
  std::printf(
      "psgd %s on %s, %d threads, batch %lld: %d steps, step %.1f ms "
      "(forward+backward %.1f ms, Adam %.1f ms), images_per_s %.0f\n",
      absl::GetFlag(FLAGS_model).c_str(), backend_name.c_str(), threads,
      static_cast<long long>(batch), steps, own.compute_ms + own.adam_ms,
      own.compute_ms, own.adam_ms, own.images_per_s);

  if (absl::GetFlag(FLAGS_breakdown)) {
    ASSIGN_OR_RETURN(std::vector<OpTime> ops,
                     ProfileTutorialOps(backend.get(), batch, 5));
    double total = 0.0;
    for (const OpTime& op : ops) {
      std::printf("  %-32s %8.2f ms\n", op.name.c_str(), op.ms);
      total += op.ms;
    }
    std::printf("  %-32s %8.2f ms (lrn counted once)\n", "sum", total);
  }

  if (absl::GetFlag(FLAGS_peak)) {
    const PeakResult peak = MeasurePeakGflops(threads, 1.0);
    const double flops = TutorialTrainingFlopsPerImage();
    const double achieved = own.images_per_s * flops / 1e9;
    std::printf(
        "arithmetic: %.1f MFLOP per image per step (%.1f with conv1's input "
        "gradient); achieved %.1f GFLOP/s = %.0f%% of the measured %s FMA "
        "peak of %.0f GFLOP/s on %d threads\n",
        flops / 1e6, TutorialTrainingFlopsPerImageWithInputGradient() / 1e6,
        achieved, 100.0 * achieved / peak.gflops, peak.isa.c_str(), peak.gflops,
        threads);
  }

  if (absl::GetFlag(FLAGS_peer)) {
    PeerOptions peer;
    peer.python = absl::GetFlag(FLAGS_python);
    peer.script = ResolveWorkspacePath(absl::GetFlag(FLAGS_peer_script));
    peer.threads = threads;
    peer.batch = batch;
    peer.steps = absl::GetFlag(FLAGS_peer_steps);
    for (bool lrn : {true, false}) {
      peer.lrn = lrn;
      absl::StatusOr<PeerResult> r = RunTorchPeer(peer);
      const char* label = lrn ? "with LRN" : "without LRN (--no-lrn)";
      if (!r.ok()) {
        std::printf("peer %s: not run: %s\n", label,
                    std::string(r.status().message()).c_str());
        continue;
      }
      std::printf("peer %s: %s\n", label, r->line.c_str());
      std::printf("ratio vs torch %s: %.2fx\n", label,
                  own.images_per_s / r->images_per_s);
    }
  }
  std::printf("images_per_s=%.0f\n", own.images_per_s);
  return absl::OkStatus();
}

}  // namespace
}  // namespace psgd

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Training-step throughput against the PyTorch peer; see --helpfull.");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "compute_bench: unexpected argument '%s'\n", rest[1]);
    return 2;
  }
  if (absl::Status s = psgd::InitLoggingFromFlags("compute_bench"); !s.ok()) {
    std::fprintf(stderr, "compute_bench: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  if (absl::Status s = psgd::Run(); !s.ok()) {
    std::fprintf(stderr, "compute_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
