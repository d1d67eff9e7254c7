// compute_bench: throughput of full training steps (forward, backward, Adam)
// of a model on a backend, compared in the same run with the same network
// in PyTorch and with the machine's FMA peak.
//
//   bazel run -c opt //worker/bench:compute_bench -- --batch=128 --threads=2
//   bazel run -c opt //worker/bench:compute_bench -- --model=resnet20
//   --batch=128
//       --threads=2                                           (one line)
//
// The peers: for the tutorial model ../shared/peers/torch_cifar10_step.py
// with and without its LRN layers (--peer_script); for a layer-graph network
// worker/bench/torch_network_step.py --model NAME (--network_peer_script).
// --rounds=N alternates our steps and the peer runs N times (each round
// under the same background load) and reports medians; --breakdown times
// the tutorial's ops each on its own; --backend picks the CPU kernels
// (cpu:conv=im2col, ...). Without python3-torch or the peer script it says
// so and still reports its own figure. `ratio_vs_torch=X` is our rate over
// the like-for-like peer's (the tutorial's with LRN; a network's in NCHW
// float32), median of the rounds; a network's peer also runs in
// channels-last (`ratio_vs_torch_channels_last=X`) and, against bf16
// convolutions, with bfloat16 autocast
// (`ratio_vs_torch_channels_last_bf16=X`);
// --eval also times a layer-graph network's inference with batch norm
// folded into its convolutions and without (`eval_fold_ratio=X`); the last
// line is exactly `images_per_s=X`.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/backend_factory/factory.h"
#include "worker/bench/cpu_info.h"
#include "worker/bench/flops.h"
#include "worker/bench/model_steps.h"
#include "worker/bench/op_profile.h"
#include "worker/bench/peer.h"
#include "worker/cli.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/cpu/onednn_util.h"
#include "worker/models/registry.h"
#include "worker/paths.h"

ABSL_FLAG(int64_t, batch, 128, "Images per step.");
ABSL_FLAG(int, threads, 2, "Compute threads (and the peer's).");
ABSL_FLAG(int, steps, 20, "Timed steps.");
ABSL_FLAG(int, warmup, 3, "Untimed steps first.");
ABSL_FLAG(std::string, backend, "cpu", "Backend: cpu or cpu:OPTIONS.");
ABSL_FLAG(std::string, model, "cifar10_tutorial", "Model, by registry name.");
ABSL_FLAG(bool, breakdown, false,
          "Also time where a step goes: for a layer-graph network each "
          "layer of real training steps (forward and backward, its share of "
          "the step and, for conv and dense layers, of the FMA peak); for "
          "the tutorial model each op on its own.");
ABSL_FLAG(bool, peak, true, "Measure the FMA peak and compare.");
ABSL_FLAG(bool, peer, true, "Run the PyTorch peer and print the ratios.");
ABSL_FLAG(std::string, peer_script, "../shared/peers/torch_cifar10_step.py",
          "The peer script; relative to the workspace under bazel run.");
ABSL_FLAG(std::string, network_peer_script,
          "worker/bench/torch_network_step.py",
          "The layer-graph networks' peer script; relative to the workspace "
          "under bazel run.");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "Python with PyTorch for the peer.");
ABSL_FLAG(int, peer_steps, 30, "The peer's timed steps.");
ABSL_FLAG(bool, eval, false,
          "Also time inference (Evaluate, batch norm's running statistics) "
          "of a layer-graph network with the convolution + batch norm fold "
          "and without it, alternating in each round; prints "
          "eval_fold_ratio.");
ABSL_FLAG(
    bool, channels_last_peer, true,
    "For a layer-graph network, also run PyTorch in channels-last "
    "(ratio_vs_torch_channels_last) and, with --backend=cpu:compute=bf16, "
    "in channels-last with bfloat16 autocast "
    "(ratio_vs_torch_channels_last_bf16).");
ABSL_FLAG(int, rounds, 1,
          "Rounds of (ours, the peer runs); the figures are the medians.");

namespace psgd {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One line per kind of layer, the largest first: "by kind: KIND X ms
// (S%)", its layers' forward and backward per step (beside PyTorch's
// torch_network_step.py --profile, whose lines are "profile: KIND X ms").
void PrintKindTotals(const LayerProfile& profile) {
  std::map<std::string, double> seconds;
  double total = 0.0;
  for (size_t i = 1; i < profile.layers.size(); ++i) {
    const LayerTiming& t = profile.layers[i];
    seconds[t.kind] += t.forward_s + t.backward_s;
    total += t.forward_s + t.backward_s;
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [kind, s] : seconds) order.push_back({s, kind});
  std::sort(order.rbegin(), order.rend());
  const double per_step = 1e3 / std::max<int64_t>(1, profile.steps);
  for (const auto& [s, kind] : order) {
    std::printf("by kind: %s %.3f ms (%.1f%%)\n", kind.c_str(), s * per_step,
                total > 0 ? 100.0 * s / total : 0.0);
  }
}

// The 1-minute load average (the other work on the machine), or -1.
double LoadAverage() {
  double load[1];
  return getloadavg(load, 1) == 1 ? load[0] : -1.0;
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
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (rounds < 1) return absl::InvalidArgumentError("--rounds must be >= 1");
  BackendOptions backend_options;
  backend_options.threads = threads;
  const std::string backend_name = absl::GetFlag(FLAGS_backend);
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                   CreateBackend(backend_name, backend_options));
  // The CPU and the kernels the backend chose on it, beside every figure.
  absl::StatusOr<CpuInfo> cpu_info = ReadCpuInfo();
  std::printf("cpu: %s\n",
              cpu_info.ok() ? cpu_info->Describe().c_str()
                            : std::string(cpu_info.status().message()).c_str());
  // The CPU backend's options, parsed once (none for another backend).
  std::optional<CpuBackendOptions> cpu_options;
  if (absl::StartsWith(backend_name, "cpu")) {
    ASSIGN_OR_RETURN(cpu_options, ParseCpuBackendName(backend_name, threads));
    const CpuBackendOptions& chosen = *cpu_options;
    std::printf(
        "kernels: %s: 3x3 stride-1 convolutions %s, oneDNN's activation "
        "channel block %lld, compute %s\n",
        backend_name.c_str(),
        RunsWinograd(chosen) && chosen.conv == ConvAlgorithm::kAuto
            ? "Winograd F(2x2, 3x3) or oneDNN direct, per shape as "
              "measured (below)"
        : RunsWinograd(chosen)                  ? "Winograd F(2x2, 3x3)"
        : chosen.conv == ConvAlgorithm::kIm2col ? "im2col + GEMM"
                                                : "oneDNN direct",
        static_cast<long long>(OneDnnChannelBlock()),
        !chosen.bf16_compute ? "float32"
        : RunsWinograd(chosen)
            ? "bf16 in oneDNN's direct convolutions (Winograd in float32)"
            : "bf16 convolutions");
  }
  const bool bf16_compute =
      cpu_options.has_value() && cpu_options->bf16_compute;
  const std::string model_name = absl::GetFlag(FLAGS_model);
  // A layer-graph network's spec (its FLOPs, its peer); none for the
  // hand-written models.
  absl::StatusOr<NetworkSpec> spec = ModelNetworkSpec(model_name);
  if (!spec.ok() && !absl::IsNotFound(spec.status())) return spec.status();
  PeerOptions peer;
  peer.python = absl::GetFlag(FLAGS_python);
  peer.threads = threads;
  peer.batch = batch;
  peer.steps = absl::GetFlag(FLAGS_peer_steps);
  // The peer runs of each round: the tutorial's with and without LRN (the
  // first is like for like), a network's once.
  struct PeerRun {
    std::string label;
    std::string key;  // its `key=ratio` line; empty: none
    PeerOptions options;
    std::vector<double> ratios;
    bool missing = false;
  };
  std::vector<PeerRun> peers;
  auto add_peer = [&](std::string label, const PeerOptions& options,
                      std::string key = "") {
    PeerRun r;
    r.label = std::move(label);
    r.key = std::move(key);
    r.options = options;
    peers.push_back(std::move(r));
  };
  if (absl::GetFlag(FLAGS_peer)) {
    if (spec.ok()) {
      peer.script =
          ResolveWorkspacePath(absl::GetFlag(FLAGS_network_peer_script));
      peer.model = model_name;
      add_peer("PyTorch " + model_name, peer, "ratio_vs_torch");
      if (absl::GetFlag(FLAGS_channels_last_peer)) {
        // PyTorch as its CPU guides advise: channels-last, and bfloat16
        // autocast against our bfloat16 convolutions.
        peer.channels_last = true;
        add_peer("PyTorch " + model_name + " channels_last", peer,
                 "ratio_vs_torch_channels_last");
        if (bf16_compute) {
          peer.bf16_autocast = true;
          add_peer("PyTorch " + model_name + " channels_last bf16 autocast",
                   peer, "ratio_vs_torch_channels_last_bf16");
        }
      }
    } else if (model_name == "cifar10_tutorial") {
      peer.script = ResolveWorkspacePath(absl::GetFlag(FLAGS_peer_script));
      peer.lrn = true;
      add_peer("with LRN", peer, "ratio_vs_torch");
      peer.lrn = false;
      add_peer("without LRN (--no-lrn)", peer);
    } else {
      std::printf("peer: none for %s\n", model_name.c_str());
    }
  }

  // Rounds alternate ours and the peer's runs, so that each round's ratio
  // compares runs under the same background load.
  std::vector<double> own_rates;
  for (int round = 1; round <= rounds; ++round) {
    ASSIGN_OR_RETURN(ModelStepsResult own,
                     TimeModelSteps(backend.get(), model_name, batch, warmup,
                                    steps, /*seed=*/1));
    own_rates.push_back(own.images_per_s);
    std::printf(
        "round %d: psgd %s on %s, %d threads, batch %lld: %d steps, step "
        "%.1f ms (forward+backward %.1f ms, Adam %.1f ms), images_per_s %.1f "
        "[load %.2f]\n",
        round, model_name.c_str(), backend_name.c_str(), threads,
        static_cast<long long>(batch), steps, own.compute_ms + own.adam_ms,
        own.compute_ms, own.adam_ms, own.images_per_s, LoadAverage());
    std::fflush(stdout);
    for (PeerRun& p : peers) {
      if (p.missing) continue;
      absl::StatusOr<PeerResult> r = RunTorchPeer(p.options);
      if (!r.ok()) {
        std::printf("peer %s: not run: %s\n", p.label.c_str(),
                    std::string(r.status().message()).c_str());
        p.missing = true;
        continue;
      }
      p.ratios.push_back(own.images_per_s / r->images_per_s);
      std::printf("round %d: peer %s: %s; ratio %.3fx [load %.2f]\n", round,
                  p.label.c_str(), r->line.c_str(), p.ratios.back(),
                  LoadAverage());
      std::fflush(stdout);
    }
  }
  const double own_median = Median(own_rates);

  if (absl::GetFlag(FLAGS_eval)) {
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--eval: ", model_name, " is not a layer graph"));
    }
    std::vector<double> folded, plain;
    for (int round = 1; round <= rounds; ++round) {
      for (bool fold : {true, false}) {
        ASSIGN_OR_RETURN(const double rate,
                         TimeEvaluation(backend.get(), model_name, batch,
                                        warmup, steps, /*seed=*/1, fold));
        (fold ? folded : plain).push_back(rate);
      }
      std::printf(
          "round %d: eval %s, batch %lld: folded %.1f images/s, unfolded "
          "%.1f, ratio %.3fx [load %.2f]\n",
          round, model_name.c_str(), static_cast<long long>(batch),
          folded.back(), plain.back(), folded.back() / plain.back(),
          LoadAverage());
      std::fflush(stdout);
    }
    std::printf("eval_images_per_s=%.1f eval_fold_ratio=%.3f\n", Median(folded),
                Median(folded) / Median(plain));
  }

  // The machine's FMA peak, for the arithmetic line and a network's
  // breakdown.
  PeakResult peak;
  if (absl::GetFlag(FLAGS_peak)) peak = MeasurePeakGflops(threads, 1.0);

  if (absl::GetFlag(FLAGS_breakdown) && spec.ok()) {
    // Each layer of real training steps, the backend synchronised around
    // each (ProfileLayers): its share of the step and, for the conv and
    // dense layers, of the FMA peak.
    LayerProfile profile;
    RETURN_IF_ERROR(TimeModelSteps(backend.get(), model_name, batch,
                                   /*warmup=*/1, steps, /*seed=*/7, &profile)
                        .status());
    double total = 0.0;
    for (const LayerTiming& t : profile.layers) {
      total += t.forward_s + t.backward_s;
    }
    const double per_step = 1e3 / std::max<int64_t>(1, profile.steps);
    std::printf("  %-26s %-15s %8s %8s %6s %9s %6s\n", "layer (per step)",
                "kind", "fwd ms", "bwd ms", "share", "GFLOP/s", "%peak");
    double counted_s = 0.0, counted_flops = 0.0;
    for (size_t i = 1; i < profile.layers.size(); ++i) {
      const LayerTiming& t = profile.layers[i];
      const double s = t.forward_s + t.backward_s;
      const LayerFlops f =
          NetworkLayerFlopsPerImage(*spec, static_cast<int>(i));
      const double flops = (f.forward + f.backward) * batch * profile.steps;
      std::string rate = "-", of_peak = "-";
      if (flops > 0 && s > 0) {
        rate = absl::StrFormat("%.1f", flops / s / 1e9);
        if (peak.gflops > 0) {
          of_peak =
              absl::StrFormat("%.0f%%", 100.0 * flops / s / 1e9 / peak.gflops);
        }
        counted_s += s;
        counted_flops += flops;
      }
      std::printf("  %-26s %-15s %8.3f %8.3f %5.1f%% %9s %6s\n", t.name.c_str(),
                  t.kind.c_str(), t.forward_s * per_step,
                  t.backward_s * per_step, 100.0 * s / total, rate.c_str(),
                  of_peak.c_str());
    }
    std::printf(
        "  %-26s %-15s %17.3f %5.1f%% %9.1f %6s (conv and dense: %.0f%% of "
        "the layers' time)\n",
        "all layers", "", total * per_step, 100.0,
        counted_s > 0 ? counted_flops / counted_s / 1e9 : 0.0,
        peak.gflops > 0 && counted_s > 0
            ? absl::StrFormat("%.0f%%", 100.0 * counted_flops / counted_s /
                                            1e9 / peak.gflops)
                  .c_str()
            : "-",
        total > 0 ? 100.0 * counted_s / total : 0.0);
    PrintKindTotals(profile);
  } else if (absl::GetFlag(FLAGS_breakdown)) {
    ASSIGN_OR_RETURN(std::vector<OpTime> ops,
                     ProfileTutorialOps(backend.get(), batch, 5));
    double total = 0.0, total_cpu = 0.0;
    std::printf("  %-32s %9s %9s\n", "op (one run each)", "wall ms", "cpu ms");
    for (const OpTime& op : ops) {
      std::printf("  %-32s %9.2f %9.2f\n", op.name.c_str(), op.ms, op.cpu_ms);
      total += op.ms;
      total_cpu += op.cpu_ms;
    }
    std::printf("  %-32s %9.2f %9.2f (lrn counted once)\n", "sum", total,
                total_cpu);
  }

  if (absl::GetFlag(FLAGS_peak)) {
    const double flops = spec.ok() ? NetworkTrainingFlopsPerImage(*spec)
                                   : TutorialTrainingFlopsPerImage();
    const double achieved = own_median * flops / 1e9;
    std::printf(
        "arithmetic: %.1f MFLOP per image per step (conv and dense layers); "
        "achieved %.1f GFLOP/s = %.0f%% of the measured %s FMA peak of %.0f "
        "GFLOP/s on %d threads\n",
        flops / 1e6, achieved, 100.0 * achieved / peak.gflops, peak.isa.c_str(),
        peak.gflops, threads);
    if (bf16_compute) {
      // The peak measured is float32's; AVX-512 BF16's dot product does
      // two multiply-adds per float32 lane.
      std::printf(
          "arithmetic: the direct convolutions in bfloat16, whose peak is "
          "twice that: %.0f%% of %.0f GFLOP/s\n",
          50.0 * achieved / peak.gflops, 2 * peak.gflops);
    }
    if (cpu_options.has_value() && RunsWinograd(*cpu_options) && spec.ok()) {
      // The count is a direct convolution's (PyTorch's too): Winograd does
      // the same convolution in fewer multiply-adds.
      std::printf(
          "arithmetic: counted as direct convolutions; the 3x3 stride-1 "
          "convolutions on 16-channel blocks run as Winograd's F(2x2, 3x3) "
          "in 4/9 of their multiply-adds, so the share can pass 100%%\n");
    }
  }
  // What conv=auto measured and chose, per shape.
  for (const std::string& choice : CpuConvChoices()) {
    std::printf("kernel chosen: %s\n", choice.c_str());
  }
  for (const PeerRun& p : peers) {
    if (p.ratios.empty()) continue;
    std::printf("ratio vs torch %s: %.3fx (median of %zu rounds)\n",
                p.label.c_str(), Median(p.ratios), p.ratios.size());
  }
  for (const PeerRun& p : peers) {
    if (p.key.empty() || p.ratios.empty()) continue;
    std::printf("%s=%.3f\n", p.key.c_str(), Median(p.ratios));
  }
  std::printf("images_per_s=%.1f\n", own_median);
  return absl::OkStatus();
}

}  // namespace
}  // namespace psgd

int main(int argc, char** argv) {
  return psgd::RunProgram(
      argc, argv, "compute_bench",
      "Training-step throughput against the PyTorch peer; see --helpfull.",
      psgd::Run);
}
