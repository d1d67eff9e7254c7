// Training-step throughput of the cifar10 tutorial model with everything on
// the device, the counterpart of ../shared/peers/torch_cifar10_step.py
// --device cuda: a fixed random batch (on the device, as the peer's), then
// per step forward, softmax cross-entropy, backward, weight decay and Adam
// (lr 1e-3, torch's defaults) over all 1,068,298 parameters. The last line
// is `images_per_s=X`; the lines before it name the device and the
// algorithms cuDNN chose.
//
//   bazel run -c opt //worker/gpu:gpu_bench -- --batch=128
//   gpu_bench --backend=gpu:0:tf32=on --batch=512 --steps=100
//   gpu_bench --backend=cpu --batch=16 --steps=2    (a smoke run; Adam on
//                                                    the host)
//
// --model=NAME (a layer-graph network: resnet20, cnn10, ...) runs that
// network through the Model API instead, as a worker runs it: the weights
// go to the device and the gradients come back each step, Adam applied on
// the host (the servers' optimizer, worker/train/local_optimizer.h); its
// peer is worker/bench/torch_network_step.py --device cuda --model NAME,
// which keeps everything on the device.
//
//   gpu_bench --model=resnet20 --batch=128
//
// Differences from the tutorial's peer, both in its favour or neutral: the peer
// has no weight decay term and its pooling is padded symmetrically (PyTorch's
// padding=1); the loss here comes back to the host every step (the peer's
// never does), which costs one synchronisation per step.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "common/model_variables.h"
#include "common/status_macros.h"
#include "worker/backend_factory/factory.h"
#include "worker/bench/model_steps.h"
#include "worker/gpu/adam.h"
#include "worker/gpu/gpu_backend.h"
#include "worker/models/initialize.h"
#include "worker/random.h"
#include "worker/train/tutorial_trainer.h"

ABSL_FLAG(std::string, backend, "gpu:0",
          "backend name: gpu:K, gpu:K:OPTIONS (worker/gpu/gpu_options.h) or "
          "cpu");
ABSL_FLAG(int, batch, 128, "images per step");
ABSL_FLAG(int, steps, 50, "timed steps");
ABSL_FLAG(int, warmup, 10, "untimed steps first (plans, algorithm search)");
ABSL_FLAG(bool, upload_images, false,
          "copy the batch from host memory every step, as training on host "
          "data does (the peer keeps it on the device)");
ABSL_FLAG(int, seed, 1, "seed of the weights and the batch");
ABSL_FLAG(std::string, model, "cifar10_tutorial",
          "cifar10_tutorial (device-resident trainer), or a layer-graph "
          "network by registry name (Model API, host Adam)");

namespace psgd {
namespace {

// A layer-graph network's steps through the Model API (see the top).
absl::Status RunNetwork(Backend* backend, const std::string& model_name,
                        int64_t batch, int steps, int warmup, uint64_t seed) {
  ASSIGN_OR_RETURN(
      ModelStepsResult r,
      TimeModelSteps(backend, model_name, batch, warmup, steps, seed));
  const std::string device =
      IsGpuBackend(*backend) ? GpuDescription(*backend) : std::string("host");
  std::printf(
      "gpu_bench model=%s backend=%s device=\"%s\" batch=%lld "
      "steps=%d warmup=%d\n",
      model_name.c_str(), backend->name().c_str(), device.c_str(),
      static_cast<long long>(batch), steps, warmup);
  for (const std::string& note : GpuPlanNotes(*backend)) {
    std::printf("plan: %s\n", note.c_str());
  }
  std::printf("loss first=%.4f last=%.4f step_ms=%.3f\n", r.first_loss,
              r.last_loss, r.compute_ms + r.adam_ms);
  std::printf("images_per_s=%.0f\n", r.images_per_s);
  return absl::OkStatus();
}

absl::Status Run() {
  const std::string name = absl::GetFlag(FLAGS_backend);
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int steps = absl::GetFlag(FLAGS_steps);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const bool upload = absl::GetFlag(FLAGS_upload_images);
  const uint64_t seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_seed));
  if (batch < 1 || steps < 1 || warmup < 0) {
    return absl::InvalidArgumentError(
        "--batch and --steps must be positive, --warmup not negative");
  }

  BackendOptions options;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                   CreateBackend(name, options));
  const std::string model_name = absl::GetFlag(FLAGS_model);
  if (model_name != "cifar10_tutorial") {
    return RunNetwork(backend.get(), model_name, batch, steps, warmup, seed);
  }
  const bool on_gpu = IsGpuBackend(*backend);
  ASSIGN_OR_RETURN(std::unique_ptr<TutorialTrainer> trainer,
                   TutorialTrainer::Create(backend.get(), batch));
  RETURN_IF_ERROR(trainer->SetWeights(
      ViewsOf(InitialValues(Cifar10TutorialVariables(), seed))));
  const int64_t size = trainer->flat_size();
  ASSIGN_OR_RETURN(DeviceTensor m, backend->Allocate({size}));
  ASSIGN_OR_RETURN(DeviceTensor v, backend->Allocate({size}));

  // A fixed batch: standard normal pixels (as torch.randn), random labels.
  Tensor images({batch, 3, 24, 24});
  std::vector<int32_t> labels(batch);
  Rng rng(DeriveSeed({seed, 2}));
  for (float& x : images.span()) x = static_cast<float>(rng.Normal());
  for (int32_t& l : labels) l = static_cast<int32_t>(rng.UniformInt(10));
  ASSIGN_OR_RETURN(DeviceTensor device_images,
                   backend->Allocate(images.shape()));
  RETURN_IF_ERROR(backend->CopyToDevice(images.view(), device_images.view()));

  const gpu::AdamParams adam;
  std::vector<float> hw, hg, hm, hv;  // the host Adam of non-GPU backends
  if (!on_gpu) {
    hw.resize(size);
    hg.resize(size);
    hm.assign(size, 0.0f);
    hv.assign(size, 0.0f);
  }
  int64_t step = 0;
  auto train_step = [&]() -> absl::StatusOr<StepResult> {
    ++step;
    absl::StatusOr<StepResult> r =
        upload
            ? trainer->ComputeGradients(ConstTensorView(images.view()), labels)
            : trainer->ComputeGradients(ConstDeviceView(device_images.view()),
                                        labels);
    if (!r.ok()) return r;
    if (on_gpu) {
      RETURN_IF_ERROR(GpuAdamUpdate(backend.get(), adam, step,
                                    trainer->weights(), trainer->gradients(),
                                    m.view(), v.view()));
      return r;
    }
    RETURN_IF_ERROR(
        backend->CopyToHost(trainer->weights(), TensorView(hw.data(), {size})));
    RETURN_IF_ERROR(backend->CopyToHost(trainer->gradients(),
                                        TensorView(hg.data(), {size})));
    gpu::AdamUpdateReference(adam, step, absl::MakeSpan(hw), hg,
                             absl::MakeSpan(hm), absl::MakeSpan(hv));
    RETURN_IF_ERROR(backend->CopyToDevice(ConstTensorView(hw.data(), {size}),
                                          trainer->weights()));
    return r;
  };

  double first_loss = 0.0;
  for (int i = 0; i < warmup; ++i) {
    ASSIGN_OR_RETURN(StepResult r, train_step());
    if (i == 0) first_loss = r.loss;
  }
  RETURN_IF_ERROR(backend->Synchronize());
  // What the timed steps allocate and copy back (GPU only: the host Adam of
  // the other backends copies the weights each step).
  const int64_t allocations_before = on_gpu ? GpuAllocations() : 0;
  const int64_t to_host_before = GpuBytesToHost(*backend);
  const auto start = std::chrono::steady_clock::now();
  StepResult last;
  for (int i = 0; i < steps; ++i) {
    ASSIGN_OR_RETURN(last, train_step());
    if (warmup == 0 && i == 0) first_loss = last.loss;
  }
  RETURN_IF_ERROR(backend->Synchronize());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  const std::string device =
      on_gpu ? GpuDescription(*backend) : std::string("host");
  std::printf(
      "gpu_bench backend=%s device=\"%s\" batch=%lld steps=%d "
      "warmup=%d upload_images=%d\n",
      backend->name().c_str(), device.c_str(), static_cast<long long>(batch),
      steps, warmup, upload ? 1 : 0);
  for (const std::string& note : GpuPlanNotes(*backend)) {
    std::printf("plan: %s\n", note.c_str());
  }
  std::printf("loss first=%.4f last=%.4f step_ms=%.3f\n", first_loss, last.loss,
              1000.0 * seconds / steps);
  if (on_gpu) {
    // The weights, gradients and Adam's slots stay on the device: per step
    // only the loss and the weight-decay terms come back, and nothing is
    // allocated after the warm-up.
    std::printf(
        "allocations_in_steps=%lld host_bytes_per_step=%.1f\n",
        static_cast<long long>(GpuAllocations() - allocations_before),
        static_cast<double>(GpuBytesToHost(*backend) - to_host_before) / steps);
  }
  std::printf("images_per_s=%.0f\n", batch * steps / seconds);
  return absl::OkStatus();
}

}  // namespace
}  // namespace psgd

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = psgd::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "gpu_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
