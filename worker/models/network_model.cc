#include "worker/models/network_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "worker/models/device_variables.h"
#include "worker/models/initialize.h"
#include "worker/models/network_plan.h"

namespace psgd {
namespace {

// One layer's part of a plan.
struct Node {
  DeviceView out;   // (N, ...) the layer's output
  DeviceView grad;  // (N, ...) d loss / d out
  // Its layout, fusions, gradient aliases, fold and buffers (PlanStep).
  LayerStep step;
  std::unique_ptr<Conv2dOp> conv;
  std::unique_ptr<BatchNormOp> bn;
  std::unique_ptr<MaxPoolOp> pool;
  std::unique_ptr<DenseOp> dense;
  DeviceTensor batch_mean, batch_var;  // batch norm: (C), for the backward
  bool grad_written = false;           // during a backward
  // Inference: the op that runs the convolution with step.folds folded
  // into it, made at the first inference (Fold).
  std::unique_ptr<Conv2dOp> folded;
};

struct Plan {
  int64_t batch = 0;
  std::vector<Node> nodes;
  std::unique_ptr<SoftmaxCrossEntropyOp> xent;
  // Gradient sums: as large as the largest gradient with more than one
  // contribution (none in a chain of layers).
  DeviceTensor scratch;
  // The layers' outputs and gradients live in this, those whose lives do
  // not meet in the same memory (PackLives).
  DeviceTensor arena;
};

// (N) + one example's shape.
Shape Batched(int64_t n, const Shape& s) {
  Shape b = {n};
  b.insert(b.end(), s.begin(), s.end());
  return b;
}

class NetworkModel : public Model {
 public:
  NetworkModel(NetworkSpec spec, Backend* backend, NetworkOptions options,
               std::unique_ptr<DeviceVariables> vars,
               std::unique_ptr<DeviceVariables> state)
      : spec_(std::move(spec)),
        backend_(backend),
        options_(options),
        vars_(std::move(vars)),
        state_(std::move(state)) {}

  bool ProfileLayers(LayerProfile* profile) override {
    profile_ = profile;
    if (profile_ != nullptr && profile_->layers.size() != spec_.layers.size()) {
      profile_->layers.assign(spec_.layers.size(), LayerTiming());
      for (size_t i = 0; i < spec_.layers.size(); ++i) {
        const Layer& l = spec_.layers[i];
        profile_->layers[i].kind = LayerKindName(l.kind);
        profile_->layers[i].name =
            l.name.empty() ? absl::StrCat(LayerKindName(l.kind), " ", i)
                           : l.name;
      }
    }
    return true;
  }
  std::string name() const override { return spec_.name; }
  const std::vector<VariableSpec>& variables() const override {
    return vars_->specs();
  }
  Shape image_shape() const override { return spec_.image; }
  int64_t num_classes() const override { return spec_.classes; }
  const std::vector<VariableSpec>& state() const override {
    return state_->specs();
  }
  absl::Status GetState(NamedTensors* out) override {
    return state_->DownloadWeights(out);
  }
  absl::Status SetState(const NamedConstViews& state) override {
    return state_->Upload(state);
  }
  absl::Status GetBatchStatistics(NamedTensors* out) override;
  absl::StatusOr<int64_t> StepBytes(int64_t batch) override;

  absl::StatusOr<StepResult> ComputeGradients(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels, NamedTensors* gradients) override {
    ASSIGN_OR_RETURN(Plan * p, Prepare(weights, images, &labels));
    last_trained_ = p;
    RETURN_IF_ERROR(Forward(p, /*training=*/true));
    ASSIGN_OR_RETURN(StepResult r, Loss(p, labels));
    RETURN_IF_ERROR(Backward(p));
    if (profile_ != nullptr) ++profile_->steps;
    for (int v : spec_.decayed) {
      ASSIGN_OR_RETURN(const double d, backend_->L2WeightDecay(
                                           vars_->weight(v), spec_.weight_decay,
                                           vars_->gradient(v)));
      r.weight_decay += d;
    }
    r.loss = r.cross_entropy + r.weight_decay;
    RETURN_IF_ERROR(vars_->DownloadGradients(gradients));
    return r;
  }

  absl::StatusOr<StepResult> Evaluate(
      const NamedConstViews& weights, ConstTensorView images,
      absl::Span<const int32_t> labels) override {
    ASSIGN_OR_RETURN(Plan * p, Prepare(weights, images, &labels));
    RETURN_IF_ERROR(Forward(p, /*training=*/false));
    ASSIGN_OR_RETURN(StepResult r, Loss(p, labels));
    r.loss = r.cross_entropy;
    return r;
  }

  absl::Status Logits(const NamedConstViews& weights, ConstTensorView images,
                      TensorView logits) override {
    ASSIGN_OR_RETURN(Plan * p, Prepare(weights, images, nullptr));
    const DeviceView out = p->nodes.back().out;
    RETURN_IF_ERROR(
        CheckShape(spec_.name, "logits", logits.shape(), out.shape()));
    RETURN_IF_ERROR(Forward(p, /*training=*/false));
    return backend_->CopyToHost(out, logits);
  }

 private:
  // Validates the inputs (labels may be null), uploads the weights and the
  // images and returns the plan for the batch size.
  absl::StatusOr<Plan*> Prepare(const NamedConstViews& weights,
                                ConstTensorView images,
                                const absl::Span<const int32_t>* labels);
  absl::StatusOr<std::unique_ptr<Plan>> MakePlan(int64_t batch);
  // The plan of `batch` images, made on first use.
  absl::StatusOr<Plan*> PlanOf(int64_t batch);
  absl::Status Forward(Plan* p, bool training);
  // Inference: the weights and biases of the plan's folded convolutions
  // from the current weights and running statistics (Node::folds), and
  // their ops on first use.
  absl::Status Fold(Plan* p);
  absl::StatusOr<StepResult> Loss(Plan* p, absl::Span<const int32_t> labels);
  absl::Status Backward(Plan* p);
  // With a profile: the backend synchronised and the time now, to be
  // charged to the layer that runs next (Charge).
  absl::StatusOr<absl::Time> Mark() const {
    if (profile_ == nullptr) return absl::InfinitePast();
    RETURN_IF_ERROR(backend_->Synchronize());
    return absl::Now();
  }
  absl::Status Charge(int layer, absl::Time since, bool forward) {
    if (profile_ == nullptr) return absl::OkStatus();
    RETURN_IF_ERROR(backend_->Synchronize());
    const double s = absl::ToDoubleSeconds(absl::Now() - since);
    (forward ? profile_->layers[layer].forward_s
             : profile_->layers[layer].backward_s) += s;
    return absl::OkStatus();
  }

  // Where layer `to`'s gradient contribution goes: its gradient buffer the
  // first time, else the scratch buffer, which Accumulate then adds in.
  DeviceView Target(Plan* p, int to) {
    Node& n = p->nodes[to];
    if (!n.grad_written) return n.grad;
    return Scratch(p, n.grad.shape());
  }
  // The first NumElements(shape) floats of the scratch buffer.
  static DeviceView Scratch(Plan* p, const Shape& shape) {
    return DeviceView(p->scratch.view().data(), shape);
  }
  absl::Status Accumulate(Plan* p, int to) {
    Node& n = p->nodes[to];
    if (!n.grad_written) {
      n.grad_written = true;
      return absl::OkStatus();
    }
    return backend_->Add(n.grad, Scratch(p, n.grad.shape()), n.grad);
  }
  ConstDeviceView Weight(const Layer& l, int offset) const {
    return vars_->weight(l.variable + offset);
  }

  const NetworkSpec spec_;
  Backend* const backend_;  // Not owned.
  const NetworkOptions options_;
  std::unique_ptr<DeviceVariables> vars_;
  std::unique_ptr<DeviceVariables> state_;          // running statistics
  std::map<int64_t, std::unique_ptr<Plan>> plans_;  // by batch size
  // A folded convolution's weight and bias (by layer; Fold), and the host
  // copies it computes them from.
  struct FoldedWeights {
    DeviceTensor weight, bias;
  };
  std::map<int, FoldedWeights> folded_;
  Tensor fold_w_, fold_b_, fold_gamma_, fold_beta_, fold_mean_, fold_var_;
  // The plan of the last training step (its batch statistics); null before.
  LayerProfile* profile_ = nullptr;  // ProfileLayers; not owned
  Plan* last_trained_ = nullptr;
};

absl::StatusOr<std::unique_ptr<Plan>> NetworkModel::MakePlan(int64_t batch) {
  const std::vector<Layer>& layers = spec_.layers;
  const StepPlan step = PlanStep(layers, batch, backend_->ChannelBlock(),
                                 options_.fold_batch_norm);
  auto p = std::make_unique<Plan>();
  p->batch = batch;
  p->nodes.resize(layers.size());
  // The ops first, the arena after them: conv=auto times both kernels of a
  // shape on buffers of its own (conv_choice.h), a whole batch's activations
  // at a time, and those are freed before the arena is taken, not held
  // beside it.
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    Node& n = p->nodes[i];
    n.step = step.layers[i];
    if (i == 0) continue;
    const Shape& x = layers[l.inputs[0]].shape;  // one example's input
    switch (l.kind) {
      case LayerKind::kConv: {
        Conv2dShape s = ConvShapeOf(l, batch, x);
        s.in_block = step.layers[l.inputs[0]].block;
        s.out_block = n.step.block;
        ASSIGN_OR_RETURN(n.conv, backend_->CreateConv2d(s));
        break;
      }
      case LayerKind::kBatchNorm: {
        BatchNormShape s = BatchNormShapeOf(batch, x);
        s.relu = n.step.relu.runs_relu;
        s.channel_block = n.step.block;
        ASSIGN_OR_RETURN(n.bn, backend_->CreateBatchNorm(s));
        ASSIGN_OR_RETURN(n.batch_mean, backend_->Allocate(s.params()));
        ASSIGN_OR_RETURN(n.batch_var, backend_->Allocate(s.params()));
        break;
      }
      case LayerKind::kMaxPool: {
        PoolShape s{batch, x[0], x[1], x[2], l.kernel, l.stride, n.step.block};
        ASSIGN_OR_RETURN(n.pool, backend_->CreateMaxPool(s));
        break;
      }
      case LayerKind::kDense: {
        DenseShape s{batch, NumElements(x), l.shape[0]};
        ASSIGN_OR_RETURN(n.dense, backend_->CreateDense(s));
        break;
      }
      default:
        break;
    }
  }
  ASSIGN_OR_RETURN(p->xent,
                   backend_->CreateSoftmaxCrossEntropy({batch, spec_.classes}));
  ASSIGN_OR_RETURN(p->arena, backend_->Allocate({step.arena}));
  if (step.scratch > 0) {
    ASSIGN_OR_RETURN(p->scratch, backend_->Allocate({step.scratch}));
  }
  float* const arena = p->arena.view().data();
  for (size_t i = 0; i < layers.size(); ++i) {
    Node& n = p->nodes[i];
    const Shape shape = Batched(batch, layers[i].shape);
    n.out = DeviceView(arena + n.step.out, shape);
    if (n.step.grad >= 0) n.grad = DeviceView(arena + n.step.grad, shape);
  }
  return p;
}

absl::Status NetworkModel::GetBatchStatistics(NamedTensors* out) {
  const std::vector<VariableSpec>& specs = state_->specs();
  if (specs.empty()) return absl::OkStatus();
  if (last_trained_ == nullptr) {
    return absl::FailedPreconditionError(
        spec_.name + ": no batch statistics before the first training step");
  }
  const Plan& p = *last_trained_;
  for (size_t i = 0; i < spec_.layers.size(); ++i) {
    const Layer& l = spec_.layers[i];
    if (l.kind != LayerKind::kBatchNorm) continue;
    const Node& n = p.nodes[i];
    const VariableSpec& mean = specs[l.state];
    const VariableSpec& var = specs[l.state + 1];
    // Both entries first: an insertion may move the map's tensors.
    for (const VariableSpec* spec : {&mean, &var}) {
      Tensor& t = (*out)[spec->name];
      if (t.shape() != spec->shape) t = Tensor(spec->shape);
    }
    Tensor& m = out->at(mean.name);
    Tensor& v = out->at(var.name);
    RETURN_IF_ERROR(backend_->CopyToHost(n.batch_mean.view(), m.view()));
    RETURN_IF_ERROR(backend_->CopyToHost(n.batch_var.view(), v.view()));
    // The op keeps the biased variance (for its backward); the running
    // estimate takes the unbiased one, as the op's own update does.
    const Shape& x = spec_.layers[l.inputs[0]].shape;  // (C, H, W)
    const int64_t count = p.batch * NumElements(x) / x[0];
    const float unbias =
        count > 1 ? static_cast<float>(count) / (count - 1) : 1.0f;
    for (float& e : v.span()) e *= unbias;
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan*> NetworkModel::Prepare(
    const NamedConstViews& weights, ConstTensorView images,
    const absl::Span<const int32_t>* labels) {
  const Shape& s = images.shape();
  if (s.size() != 4 || s[0] <= 0 ||
      !std::equal(s.begin() + 1, s.end(), spec_.image.begin())) {
    return absl::InvalidArgumentError(absl::StrCat(
        spec_.name, ": images have shape ", ShapeToString(s), ", expected [N, ",
        spec_.image[0], ", ", spec_.image[1], ", ", spec_.image[2], "]"));
  }
  const int64_t n = s[0];
  if (labels != nullptr) {
    if (static_cast<int64_t>(labels->size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec_.name, ": ", labels->size(), " labels for ", n, " images"));
    }
    for (size_t i = 0; i < labels->size(); ++i) {
      if ((*labels)[i] < 0 || (*labels)[i] >= spec_.classes) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec_.name, ": label ", (*labels)[i], " of example ",
                         i, " is outside [0, ", spec_.classes, ")"));
      }
    }
  }
  RETURN_IF_ERROR(vars_->Upload(weights));
  ASSIGN_OR_RETURN(Plan * plan, PlanOf(n));
  RETURN_IF_ERROR(backend_->CopyToDevice(images, plan->nodes[0].out));
  return plan;
}

absl::StatusOr<Plan*> NetworkModel::PlanOf(int64_t batch) {
  std::unique_ptr<Plan>& plan = plans_[batch];
  if (plan == nullptr) {
    absl::StatusOr<std::unique_ptr<Plan>> made = MakePlan(batch);
    if (!made.ok()) {
      plans_.erase(batch);
      return made.status();
    }
    plan = std::move(made).value();
  }
  return plan.get();
}

absl::StatusOr<int64_t> NetworkModel::StepBytes(int64_t batch) {
  if (batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec_.name, ": a step of ", batch, " images"));
  }
  ASSIGN_OR_RETURN(Plan * p, PlanOf(batch));
  const int64_t floats = p->scratch.size() + p->arena.size();
  return floats * static_cast<int64_t>(sizeof(float)) +
         backend_->WorkspaceBytes();
}

absl::Status NetworkModel::Fold(Plan* p) {
  const std::vector<Layer>& layers = spec_.layers;
  for (size_t i = 1; i < layers.size(); ++i) {
    Node& n = p->nodes[i];
    if (n.step.folds < 0) continue;
    const Layer& conv = layers[i];
    const Layer& bn = layers[n.step.folds];
    Conv2dShape s = n.conv->shape();
    FoldedWeights& f = folded_[static_cast<int>(i)];
    if (f.weight.size() == 0) {
      ASSIGN_OR_RETURN(f.weight, backend_->Allocate(s.filter()));
      ASSIGN_OR_RETURN(f.bias, backend_->Allocate({s.out_channels}));
    }
    if (n.folded == nullptr) {
      s.has_bias = true;
      s.relu = p->nodes[n.step.folds].bn->shape().relu;  // its fused ReLU
      ASSIGN_OR_RETURN(n.folded, backend_->CreateConv2d(s));
    }
    const int64_t channels = s.out_channels;
    auto host = [&](ConstDeviceView v, Tensor* t) {
      if (t->shape() != v.shape()) *t = Tensor(v.shape());
      return backend_->CopyToHost(v, t->view());
    };
    RETURN_IF_ERROR(host(Weight(conv, 0), &fold_w_));
    RETURN_IF_ERROR(host(Weight(bn, 0), &fold_gamma_));
    RETURN_IF_ERROR(host(Weight(bn, 1), &fold_beta_));
    RETURN_IF_ERROR(host(state_->weight(bn.state), &fold_mean_));
    RETURN_IF_ERROR(host(state_->weight(bn.state + 1), &fold_var_));
    if (fold_b_.shape() != Shape{channels}) fold_b_ = Tensor({channels});
    if (conv.bias) {
      RETURN_IF_ERROR(host(Weight(conv, 1), &fold_b_));
    } else {
      std::fill(fold_b_.span().begin(), fold_b_.span().end(), 0.0f);
    }
    const double epsilon = p->nodes[n.step.folds].bn->shape().epsilon;
    const int64_t per_channel = fold_w_.size() / channels;
    float* w = fold_w_.data();
    float* b = fold_b_.data();
    for (int64_t c = 0; c < channels; ++c) {
      const double scale = static_cast<double>(fold_gamma_.data()[c]) /
                           std::sqrt(fold_var_.data()[c] + epsilon);
      for (int64_t k = c * per_channel; k < (c + 1) * per_channel; ++k) {
        w[k] = static_cast<float>(w[k] * scale);
      }
      b[c] = static_cast<float>((b[c] - fold_mean_.data()[c]) * scale +
                                fold_beta_.data()[c]);
    }
    RETURN_IF_ERROR(backend_->CopyToDevice(fold_w_.view(), f.weight.view()));
    RETURN_IF_ERROR(backend_->CopyToDevice(fold_b_.view(), f.bias.view()));
  }
  return absl::OkStatus();
}

absl::Status NetworkModel::Forward(Plan* p, bool training) {
  if (!training) RETURN_IF_ERROR(Fold(p));
  for (size_t i = 1; i < spec_.layers.size(); ++i) {
    const Layer& l = spec_.layers[i];
    Node& n = p->nodes[i];
    const DeviceView x = p->nodes[l.inputs[0]].out;
    // Only a training step's layers are profiled.
    ASSIGN_OR_RETURN(
        const absl::Time t0,
        training ? Mark() : absl::StatusOr<absl::Time>(absl::InfinitePast()));
    switch (l.kind) {
      case LayerKind::kInput:
        break;
      case LayerKind::kConv:
        if (!training && n.step.folds >= 0) {
          const FoldedWeights& f = folded_.at(static_cast<int>(i));
          RETURN_IF_ERROR(n.folded->Forward(x, f.weight.view(), f.bias.view(),
                                            p->nodes[n.step.folds].out));
          break;
        }
        RETURN_IF_ERROR(n.conv->Forward(
            x, Weight(l, 0), l.bias ? Weight(l, 1) : ConstDeviceView(), n.out));
        break;
      case LayerKind::kBatchNorm:
        if (!training && n.step.folded_away) break;  // its convolution ran it
        if (training) {
          RETURN_IF_ERROR(n.bn->ForwardTraining(
              x, Weight(l, 0), Weight(l, 1), n.out, n.batch_mean.view(),
              n.batch_var.view(), state_->mutable_weight(l.state),
              state_->mutable_weight(l.state + 1)));
        } else {
          RETURN_IF_ERROR(n.bn->ForwardInference(
              x, Weight(l, 0), Weight(l, 1), state_->weight(l.state),
              state_->weight(l.state + 1), n.out));
        }
        break;
      case LayerKind::kRelu:
        if (!n.step.relu.in_batch_norm && !n.step.relu.in_add) {
          RETURN_IF_ERROR(backend_->ReluForward(x, n.out));
        }
        break;
      case LayerKind::kAdd:
        if (n.step.relu.runs_relu) {
          RETURN_IF_ERROR(
              backend_->AddRelu(x, p->nodes[l.inputs[1]].out, n.out));
        } else {
          RETURN_IF_ERROR(backend_->Add(x, p->nodes[l.inputs[1]].out, n.out));
        }
        break;
      case LayerKind::kMaxPool:
        RETURN_IF_ERROR(n.pool->Forward(x, n.out));
        break;
      case LayerKind::kGlobalAvgPool:
        RETURN_IF_ERROR(backend_->GlobalAvgPoolForward(
            x, p->nodes[l.inputs[0]].step.block, n.out));
        break;
      case LayerKind::kDense:
        RETURN_IF_ERROR(n.dense->Forward(x.Reshaped(n.dense->shape().input()),
                                         Weight(l, 0), Weight(l, 1), n.out));
        break;
    }
    if (training) {
      RETURN_IF_ERROR(Charge(static_cast<int>(i), t0, /*forward=*/true));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> NetworkModel::Loss(
    Plan* p, absl::Span<const int32_t> labels) {
  Node& last = p->nodes.back();
  ASSIGN_OR_RETURN(CrossEntropyResult ce,
                   p->xent->Run(last.out, labels, last.grad));
  StepResult r;
  r.cross_entropy = ce.loss;
  r.loss = ce.loss;
  r.correct = ce.correct;
  r.examples = p->batch;
  return r;
}

absl::Status NetworkModel::Backward(Plan* p) {
  const int count = static_cast<int>(spec_.layers.size());
  for (Node& n : p->nodes) n.grad_written = n.step.add_alias;
  for (int i = count - 1; i >= 1; --i) {
    const Layer& l = spec_.layers[i];
    Node& n = p->nodes[i];
    const int in = l.inputs[0];
    const DeviceView x = p->nodes[in].out;
    ASSIGN_OR_RETURN(const absl::Time t0, Mark());
    switch (l.kind) {
      case LayerKind::kInput:
        break;
      case LayerKind::kConv: {
        // The images need no gradient.
        if (in != 0) {
          RETURN_IF_ERROR(
              n.conv->BackwardData(n.grad, Weight(l, 0), Target(p, in)));
          RETURN_IF_ERROR(Accumulate(p, in));
        }
        RETURN_IF_ERROR(n.conv->BackwardFilter(
            x, n.grad, vars_->gradient(l.variable),
            l.bias ? vars_->gradient(l.variable + 1) : DeviceView()));
        break;
      }
      case LayerKind::kBatchNorm:
        RETURN_IF_ERROR(n.bn->Backward(
            x, n.out, n.grad, Weight(l, 0), n.batch_mean.view(),
            n.batch_var.view(), Target(p, in), vars_->gradient(l.variable),
            vars_->gradient(l.variable + 1)));
        RETURN_IF_ERROR(Accumulate(p, in));
        break;
      case LayerKind::kRelu:
        // Fused: its batch norm's backward applies the mask. A ReLU run by
        // its add takes the mask from the shared output as any other.
        if (n.step.relu.in_batch_norm) break;
        RETURN_IF_ERROR(backend_->ReluBackward(n.out, n.grad, Target(p, in)));
        RETURN_IF_ERROR(Accumulate(p, in));
        break;
      case LayerKind::kAdd:
        for (int j : l.inputs) {
          Node& to = p->nodes[j];
          if (to.step.add_alias) continue;  // to.grad is n.grad
          if (to.step.add_shares) {         // so is its first contribution
            to.grad_written = true;
            continue;
          }
          if (!to.grad_written) {
            RETURN_IF_ERROR(backend_->Copy(n.grad, to.grad));
            to.grad_written = true;
          } else {
            RETURN_IF_ERROR(backend_->Add(to.grad, n.grad, to.grad));
          }
        }
        break;
      case LayerKind::kMaxPool:
        RETURN_IF_ERROR(n.pool->Backward(x, n.out, n.grad, Target(p, in)));
        RETURN_IF_ERROR(Accumulate(p, in));
        break;
      case LayerKind::kGlobalAvgPool:
        RETURN_IF_ERROR(backend_->GlobalAvgPoolBackward(
            n.grad, p->nodes[in].step.block, Target(p, in)));
        RETURN_IF_ERROR(Accumulate(p, in));
        break;
      case LayerKind::kDense: {
        const Shape& flat = n.dense->shape().input();
        if (in != 0) {
          RETURN_IF_ERROR(n.dense->BackwardData(n.grad, Weight(l, 0),
                                                Target(p, in).Reshaped(flat)));
          RETURN_IF_ERROR(Accumulate(p, in));
        }
        RETURN_IF_ERROR(n.dense->BackwardWeights(
            x.Reshaped(flat), n.grad, vars_->gradient(l.variable),
            vars_->gradient(l.variable + 1)));
        break;
      }
    }
    RETURN_IF_ERROR(Charge(i, t0, /*forward=*/false));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateNetworkModel(
    NetworkSpec spec, Backend* backend, NetworkOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceVariables> vars,
                   DeviceVariables::Create(spec.variables, backend));
  ASSIGN_OR_RETURN(std::unique_ptr<DeviceVariables> state,
                   DeviceVariables::Create(spec.state, backend));
  const NamedTensors initial = InitialValues(spec.state, 0);
  RETURN_IF_ERROR(state->Upload(ViewsOf(initial)));
  return std::unique_ptr<Model>(std::make_unique<NetworkModel>(
      std::move(spec), backend, options, std::move(vars), std::move(state)));
}

}  // namespace psgd
