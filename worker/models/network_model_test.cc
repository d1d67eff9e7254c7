// The layer-graph engine (network_model.h) on a small network that has
// every layer kind (strided and padded convs with and without a bias, batch
// norm with and without a fused ReLU, residual adds with an identity and a
// 1x1 shortcut, a layer read by two others, max pooling, global average
// pooling, dense) against a float64 interpreter of the same NetworkSpec over
// the reference ops: the loss, every gradient against central finite
// differences, the running statistics after a step, and evaluation with
// them; the same with channels that divide the CPU's channel block, so
// that the activations stay channel-blocked between layers; that network
// and one whose dense layer flattens (which keeps its input group in NCHW)
// against the same networks in NCHW throughout (cpu:layout=plain). Also the
// registry: every CIFAR network's exact parameter count
// (PyTorch's), and the refusal of unknown names.
#include "worker/models/network_model.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "worker/models/cifar_networks.h"
#include "worker/models/initialize.h"
#include "worker/models/network.h"
#include "worker/models/registry.h"
#include "worker/testing/gradcheck.h"
#include "worker/testing/reference_ops.h"

namespace psgd {
namespace {

using reference::Vec;
using testing::Unwrap;

constexpr int64_t kBatch = 4;

// c1 and c2 channels in the two stages; the classifier reads the global
// pooling, or with `flatten` the last activations themselves.
NetworkSpec TinyNetwork(int64_t c1 = 4, int64_t c2 = 6, bool flatten = false) {
  NetworkBuilder b("tiny", {3, 8, 8}, 5, 1e-2f);
  int x = b.Relu(b.BatchNorm(b.Conv(b.input(), "conv1", c1, 3, 1, 1), "bn1"));
  // A projection block (stride 2, 1x1 conv + BN shortcut); x has two
  // readers.
  int y = b.Relu(b.BatchNorm(b.Conv(x, "a.conv1", c2, 3, 2, 1), "a.bn1"));
  y = b.BatchNorm(b.Conv(y, "a.conv2", c2, 3, 1, 1), "a.bn2");
  int sc = b.BatchNorm(b.Conv(x, "a.sc", c2, 1, 2, 0), "a.sc_bn");
  x = b.Relu(b.Add(y, sc));
  x = b.MaxPool(x, 2, 2);
  // A pre-activation block with an identity shortcut.
  y = b.Relu(b.BatchNorm(x, "b.bn1"));
  y = b.Conv(y, "b.conv1", c2, 3, 1, 1, /*bias=*/true);
  x = b.Add(y, x);
  b.Dense(flatten ? x : b.GlobalAvgPool(x), "fc", 5);
  return Unwrap(std::move(b).Build());
}

// The float64 interpreter: the loss of `spec` on a batch (mean
// cross-entropy + weight decay). Training: batch statistics, whose means
// and biased variances go to `stats` (two per batch norm, in state order)
// when not null; otherwise `state` normalises. Logits into `logits` when
// not null.
double ReferenceLoss(const NetworkSpec& spec, const std::vector<Vec>& w,
                     const Vec& images, const std::vector<int32_t>& labels,
                     bool training, const std::vector<Vec>& state,
                     std::vector<Vec>* stats, Vec* logits = nullptr) {
  const int64_t n = static_cast<int64_t>(labels.size());
  std::vector<Vec> out(spec.layers.size());
  out[0] = images;
  if (stats != nullptr) stats->assign(spec.state.size(), Vec());
  for (size_t i = 1; i < spec.layers.size(); ++i) {
    const Layer& l = spec.layers[i];
    const Vec& x = out[l.inputs[0]];
    const Shape& in = spec.layers[l.inputs[0]].shape;
    switch (l.kind) {
      case LayerKind::kConv: {
        out[i] = reference::Conv2d(ConvShapeOf(l, n, in), x, w[l.variable],
                                   l.bias ? w[l.variable + 1] : Vec());
        break;
      }
      case LayerKind::kBatchNorm: {
        const BatchNormShape s = BatchNormShapeOf(n, in);
        const Vec& g = w[l.variable];
        const Vec& beta = w[l.variable + 1];
        if (training) {
          Vec mean, var;
          out[i] = reference::BatchNormTraining(s, x, g, beta, &mean, &var);
          if (stats != nullptr) {
            (*stats)[l.state] = mean;
            (*stats)[l.state + 1] = var;
          }
        } else {
          out[i] = reference::BatchNormInference(s, x, g, beta, state[l.state],
                                                 state[l.state + 1]);
        }
        break;
      }
      case LayerKind::kRelu:
        out[i] = reference::Relu(x);
        break;
      case LayerKind::kAdd: {
        out[i] = x;
        const Vec& other = out[l.inputs[1]];
        for (size_t k = 0; k < other.size(); ++k) out[i][k] += other[k];
        break;
      }
      case LayerKind::kMaxPool:
        out[i] =
            reference::MaxPool({n, in[0], in[1], in[2], l.kernel, l.stride}, x);
        break;
      case LayerKind::kGlobalAvgPool:
        out[i] = reference::GlobalAvgPool(n * in[0], in[1] * in[2], x);
        break;
      case LayerKind::kDense:
        out[i] = reference::Dense({n, NumElements(in), l.shape[0]}, x,
                                  w[l.variable], w[l.variable + 1]);
        break;
      case LayerKind::kInput:
        break;
    }
  }
  if (logits != nullptr) *logits = out.back();
  double loss =
      reference::SoftmaxCrossEntropy(n, spec.classes, out.back(), labels);
  for (int v : spec.decayed)
    loss += spec.weight_decay * reference::L2Loss(w[v]);
  return loss;
}

TEST_CASE("a layer graph matches its float64 reference") {
  struct Case {
    const char* what;
    NetworkSpec spec;
  };
  auto backend = testing::MakeBackend("cpu");
  const int64_t block = backend->ChannelBlock();
  // With AVX2 or AVX-512 oneDNN takes channel blocks (ChooseLayouts' own
  // test says which tensors); 16 channels divide either block.
  const std::vector<Case> cases = {
      {"4 and 6 channels: NCHW throughout", TinyNetwork()},
      {"16 channels: blocked", TinyNetwork(16, 16)},
  };
  // (The flattened form's finite differences cross the max pool's and the
  // ReLUs' kinks in NCHW as in blocks; it is compared with NCHW below.)
  for (const Case& c : cases) {
    INFO(c.what << " (channel block " << block << ")");
    const NetworkSpec& spec = c.spec;
    auto model = Unwrap(CreateNetworkModel(spec, backend.get()));
    REQUIRE(model->state().size() == 10);  // five batch norms
    NamedTensors batch_stats;
    CHECK(model->GetBatchStatistics(&batch_stats).code() ==
          absl::StatusCode::kFailedPrecondition);

    NamedTensors weights = InitialValues(model->variables(), 7);
    // Batch norm's gamma and beta away from 1 and 0, so that they matter.
    for (const VariableSpec& v : model->variables()) {
      if (v.shape.size() != 1) continue;
      const auto r =
          testing::RandomValues(NumElements(v.shape), v.name.size(), -0.5, 0.5);
      Tensor& t = weights.at(v.name);
      for (int64_t k = 0; k < t.size(); ++k) t.data()[k] += r[k];
    }
    const auto image_values = testing::RandomValues(kBatch * 3 * 64, 11, -1, 1);
    Tensor images = Unwrap(Tensor::FromVector({kBatch, 3, 8, 8}, image_values));
    const std::vector<int32_t> labels = {0, 3, 1, 4};

    NamedTensors grads;
    const StepResult r = Unwrap(model->ComputeGradients(
        ViewsOf(weights), images.view(), labels, &grads));

    std::vector<Vec> w;
    for (const VariableSpec& v : spec.variables) {
      const Tensor& t = weights.at(v.name);
      w.push_back(Vec(t.data(), t.data() + t.size()));
    }
    const Vec x = testing::ToDouble(image_values);
    std::vector<Vec> stats;
    const double want = ReferenceLoss(spec, w, x, labels, true, {}, &stats);
    CHECK(std::abs(r.loss - want) < 1e-5 * std::abs(want));
    CHECK(r.weight_decay > 0.0);
    CHECK(r.examples == kBatch);

    for (size_t v = 0; v < spec.variables.size(); ++v) {
      const std::string& name = spec.variables[v].name;
      const Tensor& g = grads.at(name);
      auto e = testing::CompareGradient(
          [&](const Vec& value) {
            std::vector<Vec> moved = w;
            moved[v] = value;
            return ReferenceLoss(spec, moved, x, labels, true, {}, nullptr);
          },
          w[v], std::vector<float>(g.data(), g.data() + g.size()), 1e-4,
          /*max_checks=*/24, /*seed=*/v + 1);
      INFO(name << " " << e.ToString());
      CHECK(e.relative() < 1e-3);
    }

    // Running statistics: 0.9 * (0, 1) + 0.1 * (mean, unbiased variance).
    NamedTensors state;
    REQUIRE_OK(model->GetState(&state));
    std::vector<Vec> running, batch;
    for (size_t s = 0; s < spec.state.size(); ++s) {
      const VariableSpec& spec_s = spec.state[s];
      const bool is_var = s % 2 == 1;
      const int64_t m = kBatch * [&] {
        for (const Layer& l : spec.layers) {
          if (l.state == static_cast<int>(s - (is_var ? 1 : 0))) {
            return NumElements(spec.layers[l.inputs[0]].shape) / l.shape[0];
          }
        }
        return int64_t{0};
      }();
      Vec want_s(stats[s].size()), batch_s(stats[s].size());
      for (size_t k = 0; k < want_s.size(); ++k) {
        batch_s[k] = is_var ? stats[s][k] * m / (m - 1.0) : stats[s][k];
        want_s[k] = (is_var ? 0.9 : 0.0) + 0.1 * batch_s[k];
      }
      batch.push_back(batch_s);
      const Tensor& got = state.at(spec_s.name);
      INFO(spec_s.name);
      CHECK(testing::MaxRelativeDifference(
                std::vector<float>(got.data(), got.data() + got.size()),
                want_s) < 1e-5);
      running.push_back(want_s);
    }

    // Evaluation normalises with them and leaves them alone.
    Tensor logits({kBatch, 5});
    REQUIRE_OK(model->Logits(ViewsOf(weights), images.view(), logits.view()));
    Vec want_logits;
    ReferenceLoss(spec, w, x, labels, false, running, nullptr, &want_logits);
    CHECK(testing::MaxRelativeDifference(
              std::vector<float>(logits.data(), logits.data() + logits.size()),
              want_logits) < 1e-5);
    NamedTensors after;
    REQUIRE_OK(model->GetState(&after));
    for (const auto& [name, t] : state) {
      CHECK(std::equal(t.data(), t.data() + t.size(), after.at(name).data()));
    }

    // The batch statistics a push carries: the batch's mean and unbiased
    // variance, also after the evaluation above.
    REQUIRE_OK(model->GetBatchStatistics(&batch_stats));
    REQUIRE(batch_stats.size() == spec.state.size());
    for (size_t s = 0; s < spec.state.size(); ++s) {
      const Tensor& got = batch_stats.at(spec.state[s].name);
      INFO("batch " << spec.state[s].name);
      CHECK(testing::MaxRelativeDifference(
                std::vector<float>(got.data(), got.data() + got.size()),
                batch[s]) < 1e-5);
    }

    // SetState round trip and refusal.
    REQUIRE_OK(model->SetState(ViewsOf(state)));
    NamedConstViews missing = ViewsOf(state);
    missing.erase("bn1.running_var");
    CHECK(model->SetState(missing).code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("channel-blocked layers choose their layouts by group") {
  // TinyNetwork(16, 16, flatten): conv1 bn1 relu | a.conv1 a.bn1 relu
  // a.conv2 a.bn2 | a.sc a.sc_bn add relu max_pool | b.bn1 relu b.conv1 add
  // dense.
  const NetworkSpec spec = TinyNetwork(16, 16, /*flatten=*/true);
  const std::vector<int64_t> layout = ChooseLayouts(spec.layers, 16);
  REQUIRE(layout.size() == spec.layers.size());
  std::map<std::string, int64_t> by_name;
  for (size_t i = 0; i < layout.size(); ++i) {
    const Layer& l = spec.layers[i];
    if (l.kind == LayerKind::kConv || l.kind == LayerKind::kBatchNorm) {
      by_name[l.name] = layout[i];
    }
  }
  CHECK(layout[0] == 0);  // the images
  CHECK(by_name["conv1"] == 16);
  CHECK(by_name["bn1"] == 16);
  CHECK(by_name["a.conv1"] == 16);
  CHECK(by_name["a.bn1"] == 16);
  // The first block's add and what it adds (a.conv2's and the shortcut's
  // outputs, through their batch norms), the pool, the second block's batch
  // norm and the add the dense layer flattens are one group: NCHW, every
  // member.
  CHECK(by_name["a.conv2"] == 0);
  CHECK(by_name["a.bn2"] == 0);
  CHECK(by_name["a.sc"] == 0);
  CHECK(by_name["a.sc_bn"] == 0);
  CHECK(by_name["b.bn1"] == 0);
  CHECK(by_name["b.conv1"] == 0);
  CHECK(layout.back() == 0);
  // With the global pooling they are blocked, and nothing is at block 0
  // or where a group has channels the block does not divide.
  const NetworkSpec pooled = TinyNetwork(16, 16);
  const std::vector<int64_t> pooled_layout = ChooseLayouts(pooled.layers, 16);
  for (size_t i = 1; i < pooled.layers.size(); ++i) {
    INFO(i << " " << LayerKindName(pooled.layers[i].kind));
    const bool image = pooled.layers[i].shape.size() == 3;
    CHECK(pooled_layout[i] == (image ? 16 : 0));
  }
  CHECK(ChooseLayouts(pooled.layers, 0) ==
        std::vector<int64_t>(pooled.layers.size(), 0));
  const NetworkSpec narrow = TinyNetwork(16, 24);
  const std::vector<int64_t> narrow_layout = ChooseLayouts(narrow.layers, 16);
  for (size_t i = 0; i < narrow.layers.size(); ++i) {
    const Shape& s = narrow.layers[i].shape;
    if (s.size() == 3 && s[0] == 24) CHECK(narrow_layout[i] == 8);
    if (s.size() == 3 && s[0] == 16 && i > 0) CHECK(narrow_layout[i] == 16);
  }
  // Channels that 16 does not divide take the largest block that divides
  // them (8 for 24, as on an AVX-512 CPU), and NCHW where none does (12).
  for (const auto& [width, block, want] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {24, 16, 8}, {24, 8, 8}, {12, 16, 0}, {12, 8, 0}, {32, 16, 16}}) {
    INFO(width << " channels at block " << block);
    const NetworkSpec net = TinyNetwork(width, width);
    const std::vector<int64_t> chosen = ChooseLayouts(net.layers, block);
    for (size_t i = 1; i < net.layers.size(); ++i) {
      const bool image = net.layers[i].shape.size() == 3;
      CHECK(chosen[i] == (image ? want : 0));
    }
  }
}

// Every case of the inference fold (NetworkOptions::fold_batch_norm): a
// convolution with a bias into a batch norm with a fused ReLU, one without
// a bias into a batch norm read by an add, one into a batch norm read by
// a ReLU and an add (folded without the ReLU, which runs as a layer), one
// read by two layers (not folded) and a batch norm after a pooling (not
// folded). Logits and Evaluate with running statistics away from (0, 1)
// against the float64 reference and against the model without the fold;
// the state stays as it was, and a training step after the inference is
// the unfolded model's.
NetworkSpec FoldNetwork(int64_t c) {
  NetworkBuilder b("fold", {3, 8, 8}, 5, 1e-2f);
  int x = b.Relu(b.BatchNorm(
      b.Conv(b.input(), "conv1", c, 3, 1, 1, /*bias=*/true), "bn1"));
  const int y = b.BatchNorm(b.Conv(x, "conv2", c, 3, 1, 1), "bn2");
  const int z = b.Conv(x, "conv3", c, 1, 1, 0);  // two readers
  x = b.Relu(b.Add(y, b.Add(b.BatchNorm(z, "bn3"), z)));
  const int u = b.BatchNorm(b.Conv(x, "conv4", c, 3, 2, 1), "bn4");
  x = b.Add(b.Relu(u), u);  // bn4's ReLU is not fused
  x = b.BatchNorm(b.MaxPool(x, 2, 2), "bn5");
  b.Dense(b.GlobalAvgPool(x), "fc", 5);
  return Unwrap(std::move(b).Build());
}

TEST_CASE("inference folds batch norm into the convolution before it") {
  for (const char* backend_name : {"cpu", "cpu:layout=plain"}) {
    auto backend = testing::MakeBackend(backend_name);
    for (int64_t c : {4, 16}) {
      INFO(backend_name << ", " << c << " channels");
      const NetworkSpec spec = FoldNetwork(c);
      auto folded = Unwrap(CreateNetworkModel(spec, backend.get()));
      NetworkOptions off;
      off.fold_batch_norm = false;
      auto plain = Unwrap(CreateNetworkModel(spec, backend.get(), off));
      NamedTensors weights = InitialValues(spec.variables, 5);
      for (const VariableSpec& v : spec.variables) {
        if (v.shape.size() != 1) continue;  // biases, gamma, beta
        const auto r = testing::RandomValues(NumElements(v.shape),
                                             v.name.size(), -0.5, 0.5);
        Tensor& t = weights.at(v.name);
        for (int64_t k = 0; k < t.size(); ++k) t.data()[k] += r[k];
      }
      NamedTensors state;
      std::vector<Vec> state_values;
      for (size_t s = 0; s < spec.state.size(); ++s) {
        const VariableSpec& v = spec.state[s];
        const bool is_var = s % 2 == 1;
        std::vector<float> r =
            testing::RandomValues(NumElements(v.shape), 100 + s,
                                  is_var ? 0.3 : -0.5, is_var ? 2.0 : 0.5);
        state[v.name] = Unwrap(Tensor::FromVector(v.shape, r));
        state_values.push_back(testing::ToDouble(r));
      }
      REQUIRE_OK(folded->SetState(ViewsOf(state)));
      REQUIRE_OK(plain->SetState(ViewsOf(state)));
      const auto values = testing::RandomValues(kBatch * 3 * 64, 9, -1, 1);
      Tensor images = Unwrap(Tensor::FromVector({kBatch, 3, 8, 8}, values));
      const std::vector<int32_t> labels = {1, 4, 0, 2};

      Tensor la({kBatch, 5}), lb({kBatch, 5});
      REQUIRE_OK(folded->Logits(ViewsOf(weights), images.view(), la.view()));
      REQUIRE_OK(plain->Logits(ViewsOf(weights), images.view(), lb.view()));
      std::vector<Vec> w;
      for (const VariableSpec& v : spec.variables) {
        const Tensor& t = weights.at(v.name);
        w.push_back(Vec(t.data(), t.data() + t.size()));
      }
      Vec want;
      ReferenceLoss(spec, w, testing::ToDouble(values), labels, false,
                    state_values, nullptr, &want);
      const std::vector<float> got(la.data(), la.data() + la.size());
      CHECK(testing::MaxRelativeDifference(got, want) < 1e-5);
      CHECK(testing::MaxRelativeDifference(
                got, testing::ToDouble(std::vector<float>(
                         lb.data(), lb.data() + lb.size()))) < 1e-5);
      const StepResult ea =
          Unwrap(folded->Evaluate(ViewsOf(weights), images.view(), labels));
      const StepResult eb =
          Unwrap(plain->Evaluate(ViewsOf(weights), images.view(), labels));
      CHECK(std::abs(ea.loss - eb.loss) < 1e-5 * std::abs(eb.loss));
      CHECK(ea.correct == eb.correct);
      NamedTensors after;
      REQUIRE_OK(folded->GetState(&after));
      for (const auto& [name, t] : state) {
        CHECK(std::equal(t.data(), t.data() + t.size(), after.at(name).data()));
      }
      // Training after an inference runs the layers as they are.
      NamedTensors ga, gb;
      const StepResult ta = Unwrap(folded->ComputeGradients(
          ViewsOf(weights), images.view(), labels, &ga));
      const StepResult tb = Unwrap(plain->ComputeGradients(
          ViewsOf(weights), images.view(), labels, &gb));
      CHECK(ta.loss == tb.loss);
      for (const auto& [name, g] : gb) {
        INFO(name);
        CHECK(std::equal(g.data(), g.data() + g.size(), ga.at(name).data()));
      }
    }
  }
}

TEST_CASE("channel-blocked and NCHW activations give the same step") {
  auto blocked = testing::MakeBackend("cpu");
  auto plain = testing::MakeBackend("cpu:layout=plain");
  CHECK(plain->ChannelBlock() == 0);
  if (blocked->ChannelBlock() == 0) {
    WARN("this CPU has neither AVX2 nor AVX-512: nothing to compare");
    return;
  }
  for (bool flatten : {false, true}) {
    INFO("flatten " << flatten);
    const NetworkSpec spec = TinyNetwork(16, 32, flatten);
    auto a = Unwrap(CreateNetworkModel(spec, blocked.get()));
    auto b = Unwrap(CreateNetworkModel(spec, plain.get()));
    const NamedTensors weights = InitialValues(a->variables(), 3);
    const auto values = testing::RandomValues(kBatch * 3 * 64, 5, -1, 1);
    Tensor images = Unwrap(Tensor::FromVector({kBatch, 3, 8, 8}, values));
    const std::vector<int32_t> labels = {4, 0, 2, 2};
    NamedTensors ga, gb;
    const StepResult ra = Unwrap(
        a->ComputeGradients(ViewsOf(weights), images.view(), labels, &ga));
    const StepResult rb = Unwrap(
        b->ComputeGradients(ViewsOf(weights), images.view(), labels, &gb));
    CHECK(std::abs(ra.loss - rb.loss) < 1e-6 * std::abs(rb.loss));
    // Every tensor of `got` (blocked) against the same name in `want`.
    auto check_close = [](const NamedTensors& got, const NamedTensors& want,
                          double tolerance) {
      for (const auto& [name, w] : want) {
        INFO(name);
        const Tensor& g = got.at(name);
        CHECK(testing::MaxRelativeDifference(
                  std::vector<float>(g.data(), g.data() + g.size()),
                  testing::ToDouble(std::vector<float>(
                      w.data(), w.data() + w.size()))) < tolerance);
      }
    };
    check_close(ga, gb, 1e-4);
    NamedTensors sa, sb;
    REQUIRE_OK(a->GetBatchStatistics(&sa));
    REQUIRE_OK(b->GetBatchStatistics(&sb));
    check_close(sa, sb, 1e-5);
    const StepResult ea =
        Unwrap(a->Evaluate(ViewsOf(weights), images.view(), labels));
    const StepResult eb =
        Unwrap(b->Evaluate(ViewsOf(weights), images.view(), labels));
    CHECK(std::abs(ea.loss - eb.loss) < 1e-5 * std::abs(eb.loss));
    CHECK(ea.correct == eb.correct);
  }
}

TEST_CASE("the CIFAR networks have PyTorch's parameter counts") {
  const std::vector<std::pair<std::string, int64_t>> want = {
      {"resnet20", 272474},  {"resnet56", 855770},
      {"wrn_16_4", 2748890}, {"wrn_28_10", 36479194},
      {"cnn10", 1923914},    {"resnet50_cifar", 23520842},
  };
  for (const auto& [name, count] : want) {
    INFO(name);
    CHECK(TotalParameters(Unwrap(ModelVariables(name))) == count);
    bool listed = false;
    for (const ModelInfo& m : ListModels()) {
      listed = listed || (m.name == name && m.parameters == count);
    }
    CHECK(listed);
  }
  // Running statistics: two per batch norm, e.g. resnet20 has 19 + 2.
  CHECK(Unwrap(CifarResNet(20)).state.size() == 2 * 21);
  absl::Status unknown = ModelVariables("resnet21").status();
  CHECK(unknown.code() == absl::StatusCode::kInvalidArgument);
  CHECK(unknown.message().find("resnet20 (272,474 parameters)") !=
        absl::string_view::npos);
  CHECK(CifarResNet(21).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a step's memory is known before it runs") {
  auto backend = testing::MakeBackend("cpu");
  auto cnn10 = Unwrap(CreateModel("cnn10", backend.get()));
  // cnn10 is a chain: per image its activations (conv and batch norm
  // outputs, the ReLUs fused: 2 x (3 x 64 x 32 x 32 + 3 x 128 x 16 x 16 +
  // 3 x 256 x 8 x 8) floats, the pools and the rest smaller) and, beside
  // them, a few gradient buffers and the workspace.
  const int64_t activations =
      2 * (3 * 64 * 32 * 32 + 3 * 128 * 16 * 16 + 3 * 256 * 8 * 8) * 4;
  const int64_t at16 = Unwrap(cnn10->StepBytes(16));
  CHECK(at16 > 16 * activations);
  CHECK(at16 < 16 * 2 * activations);
  // The gradients need no memory of their own: the first stage's (the
  // largest, two at a time) take what the later stages' activations held,
  // which their backward has read by then; beside the activations only the
  // pools' outputs, the images and the loss's gradient (under a tenth more,
  // where two gradients of the first stage's size would add a fifth).
  const int64_t workspace16 = backend->WorkspaceBytes();
  CHECK(at16 - workspace16 < 16 * activations * 11 / 10);
  // Twice the images, twice the memory beside the workspace (which the
  // Winograd convolutions size by their chunks of tiles, not the batch).
  const int64_t at32 = Unwrap(cnn10->StepBytes(32));
  const int64_t workspace32 = backend->WorkspaceBytes();
  CHECK(workspace32 >= workspace16);
  CHECK(at32 - workspace32 > (at16 - workspace16) * 19 / 10);
  CHECK(at32 - workspace32 < (at16 - workspace16) * 21 / 10);
  CHECK(absl::IsInvalidArgument(cnn10->StepBytes(0).status()));
  // The hand-written models plan nothing ahead.
  auto tutorial = Unwrap(CreateModel("cifar10_tutorial", backend.get()));
  CHECK(absl::IsUnimplemented(tutorial->StepBytes(16).status()));
}

TEST_CASE("a network model refuses wrong images and labels") {
  auto backend = testing::MakeBackend("cpu");
  auto model = Unwrap(CreateModel("resnet20", backend.get()));
  const NamedTensors weights = InitialValues(model->variables(), 1);
  Tensor wrong({2, 3, 24, 24});
  CHECK(
      model->Evaluate(ViewsOf(weights), wrong.view(), {0, 1}).status().code() ==
      absl::StatusCode::kInvalidArgument);
  Tensor images({2, 3, 32, 32});
  CHECK(model->Evaluate(ViewsOf(weights), images.view(), {0, 10})
            .status()
            .code() == absl::StatusCode::kInvalidArgument);
  const StepResult r =
      Unwrap(model->Evaluate(ViewsOf(weights), images.view(), {0, 1}));
  CHECK(std::isfinite(r.loss));
}

TEST_CASE("a network's training steps can be timed layer by layer") {
  auto backend = testing::MakeBackend("cpu");
  auto model = Unwrap(CreateModel("resnet20", backend.get()));
  const NetworkSpec spec = Unwrap(ModelNetworkSpec("resnet20"));
  const NamedTensors weights = InitialValues(model->variables(), 1);
  Tensor images({2, 3, 32, 32});
  images.Fill(0.5f);
  NamedTensors grads;
  LayerProfile profile;
  REQUIRE(model->ProfileLayers(&profile));
  for (int s = 0; s < 2; ++s) {
    Unwrap(model->ComputeGradients(ViewsOf(weights), images.view(), {0, 1},
                                   &grads));
  }
  // Evaluations are not profiled; after ProfileLayers(nullptr) nothing is.
  Unwrap(model->Evaluate(ViewsOf(weights), images.view(), {0, 1}));
  const LayerProfile before = profile;
  model->ProfileLayers(nullptr);
  Unwrap(
      model->ComputeGradients(ViewsOf(weights), images.view(), {0, 1}, &grads));
  CHECK(profile.steps == 2);
  REQUIRE(profile.layers.size() == spec.layers.size());
  int convs = 0;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    CHECK(profile.layers[i].forward_s == before.layers[i].forward_s);
    if (spec.layers[i].kind != LayerKind::kConv) continue;
    ++convs;
    CHECK(profile.layers[i].kind == "conv");
    CHECK(profile.layers[i].name == spec.layers[i].name);
    CHECK(profile.layers[i].forward_s > 0);
    CHECK(profile.layers[i].backward_s > 0);
  }
  CHECK(convs == 19 + 2);  // 19 convolutions and 2 shortcut projections
  CHECK(profile.layers[0].forward_s == 0);  // the input
  // The hand-written models have no layers to time.
  auto tutorial = Unwrap(CreateModel("cifar10_tutorial", backend.get()));
  CHECK_FALSE(tutorial->ProfileLayers(&profile));
}

TEST_CASE("the builder refuses shapes that do not fit") {
  NetworkBuilder b("bad", {3, 8, 8}, 10, 0.0f);
  b.Add(b.Conv(b.input(), "c", 4, 3, 1, 1), b.input());
  absl::StatusOr<NetworkSpec> spec = std::move(b).Build();
  CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(spec.status().message().find("add of [4, 8, 8] and [3, 8, 8]") !=
        absl::string_view::npos);
}

}  // namespace
}  // namespace psgd
