// dump_step: one training step of a registry model on the CPU backend, written
// out for torch_check.py to redo in PyTorch.
//
//   dump_step --model=resnet20 --batch=8 --out_dir=DIR [--seed=1]
//             [--backend=cpu]
//
// Writes DIR/step.bin (float32 values, one tensor after another) and
// DIR/manifest.tsv, one line per tensor: KIND NAME SHAPE OFFSET, with KIND
// one of weight (the step's weights), grad (their gradients), state (the
// non-trainable state after the step: batch norm's running statistics),
// images, labels; and one line "loss - - VALUE" (cross-entropy + weight
// decay) and "weight_decay - - VALUE". SHAPE is comma-separated; OFFSET
// counts floats into step.bin.
//
// The weights are the model's initial values with every one-dimensional
// variable (batch norm's gamma and beta, biases) moved by U(-0.5, 0.5), so
// that each affects the loss; images are U(-2, 2) and labels uniform.
//
// Exits 0 on success, 1 on an error (printed), 2 for bad flags.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/backend_factory/factory.h"
#include "worker/models/initialize.h"
#include "worker/models/registry.h"
#include "worker/random.h"

ABSL_FLAG(std::string, model, "resnet20", "Model, by registry name.");
ABSL_FLAG(int, batch, 8, "Batch size.");
ABSL_FLAG(std::string, out_dir, "", "Directory for step.bin and manifest.tsv.");
ABSL_FLAG(int, seed, 1, "Seed of the weights and the batch.");
ABSL_FLAG(std::string, backend, "cpu",
          "CPU backend: cpu or cpu:OPTIONS (worker/cpu/cpu_backend.h).");

namespace psgd {
namespace {

// Appends tensors to step.bin and their lines to the manifest.
class Writer {
 public:
  explicit Writer(const std::string& dir)
      : data_(dir + "/step.bin", std::ios::binary),
        manifest_(dir + "/manifest.tsv") {}

  bool ok() const { return data_.good() && manifest_.good(); }

  void Add(const std::string& kind, const std::string& name,
           ConstTensorView t) {
    manifest_ << kind << '\t' << name << '\t' << absl::StrJoin(t.shape(), ",")
              << '\t' << offset_ << '\n';
    data_.write(reinterpret_cast<const char*>(t.data()),
                t.size() * sizeof(float));
    offset_ += t.size();
  }
  void AddScalar(const std::string& name, double value) {
    manifest_ << name << "\t-\t-\t" << absl::StrCat(value) << '\n';
  }

 private:
  std::ofstream data_;
  std::ofstream manifest_;
  int64_t offset_ = 0;
};

absl::Status Run(const std::string& model_name, int64_t batch,
                 const std::string& dir, uint64_t seed,
                 const std::string& backend_name) {
  if (!absl::StartsWith(backend_name, "cpu")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--backend=", backend_name, ": dump_step runs a CPU backend"));
  }
  BackendOptions options;
  options.threads = 2;
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                   CreateBackend(backend_name, options));
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   CreateModel(model_name, backend.get()));
  Rng rng(seed);
  NamedTensors weights = InitialValues(model->variables(), seed);
  for (const VariableSpec& v : model->variables()) {
    if (v.shape.size() != 1) continue;
    Tensor& t = weights.at(v.name);
    for (int64_t i = 0; i < t.size(); ++i) {
      t.data()[i] += static_cast<float>(rng.Uniform(-0.5, 0.5));
    }
  }
  Shape shape = model->image_shape();
  shape.insert(shape.begin(), batch);
  Tensor images(shape);
  for (int64_t i = 0; i < images.size(); ++i) {
    images.data()[i] = static_cast<float>(rng.Uniform(-2.0, 2.0));
  }
  std::vector<int32_t> labels(batch);
  Tensor label_values({batch});
  for (int64_t i = 0; i < batch; ++i) {
    labels[i] = static_cast<int32_t>(rng.UniformInt(model->num_classes()));
    label_values.data()[i] = static_cast<float>(labels[i]);
  }

  NamedTensors grads, state;
  ASSIGN_OR_RETURN(
      StepResult r,
      model->ComputeGradients(ViewsOf(weights), images.view(), labels, &grads));
  RETURN_IF_ERROR(model->GetState(&state));

  Writer out(dir);
  if (!out.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out_dir: cannot write in '", dir, "'"));
  }
  out.Add("images", "-", images.view());
  out.Add("labels", "-", label_values.view());
  for (const VariableSpec& v : model->variables()) {
    out.Add("weight", v.name, weights.at(v.name).view());
    out.Add("grad", v.name, grads.at(v.name).view());
  }
  for (const VariableSpec& v : model->state()) {
    out.Add("state", v.name, state.at(v.name).view());
  }
  out.AddScalar("loss", r.loss);
  out.AddScalar("weight_decay", r.weight_decay);
  if (!out.ok()) return absl::InternalError("writing the step's files failed");
  return absl::OkStatus();
}

}  // namespace
}  // namespace psgd

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_out_dir);
  if (dir.empty() || absl::GetFlag(FLAGS_batch) <= 0) {
    std::fprintf(stderr,
                 "dump_step: --out_dir and a positive --batch are "
                 "required\n");
    return 2;
  }
  absl::Status s =
      psgd::Run(absl::GetFlag(FLAGS_model), absl::GetFlag(FLAGS_batch), dir,
                static_cast<uint64_t>(absl::GetFlag(FLAGS_seed)),
                absl::GetFlag(FLAGS_backend));
  if (!s.ok()) {
    std::fprintf(stderr, "dump_step: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
