// Networks as data: a model is a short list of layers (a small DAG in
// forward order), and one engine (network_model.h) runs any such list on a
// Backend. Layers and their variables, PyTorch's state_dict names:
//
//   conv        NAME.weight (O, C, K, K) [, NAME.bias (O)]; stride, padding
//   batch_norm  NAME.weight (C) = gamma, NAME.bias (C) = beta; state
//               NAME.running_mean (C), NAME.running_var (C) (not trainable)
//   relu, add (residual), max_pool (window/stride, SAME), global_avg_pool
//   dense       NAME.weight (K, M) (inputs x outputs: the transpose of
//               PyTorch's Linear.weight), NAME.bias (M)
//
// The last layer's output (classes) are the logits; the loss is the mean
// softmax cross-entropy plus weight_decay * sum(w^2) / 2 over the conv and
// dense weights (not biases, not batch norm).
//
//   NetworkBuilder b("tiny", {3, 8, 8}, 10, 5e-4f);
//   int x = b.Conv(b.input(), "conv1", 16, 3, 1, 1);
//   x = b.Relu(b.BatchNorm(x, "bn1"));
//   x = b.Dense(b.GlobalAvgPool(x), "fc", 10);
//   ASSIGN_OR_RETURN(NetworkSpec spec, std::move(b).Build());
//
// Thread-safety: plain values; a builder is used by one thread.
#ifndef PSGD_WORKER_MODELS_NETWORK_H_
#define PSGD_WORKER_MODELS_NETWORK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model_variables.h"
#include "common/tensor.h"
#include "worker/backend/op_shapes.h"

namespace psgd {

enum class LayerKind {
  kInput,
  kConv,
  kBatchNorm,
  kRelu,
  kAdd,
  kMaxPool,
  kGlobalAvgPool,
  kDense,
};

// "input", "conv", "batch_norm", "relu", "add", "max_pool",
// "global_avg_pool", "dense".
const char* LayerKindName(LayerKind kind);

struct Layer {
  LayerKind kind = LayerKind::kInput;
  std::string name;         // variables' prefix; empty for layers without
  std::vector<int> inputs;  // indices of earlier layers (0: the images)
  Shape shape;              // one example's output: (C, H, W) or (M)
  // kConv: kernel, stride, padding, bias. kMaxPool: kernel (the window) and
  // stride.
  int64_t kernel = 0;
  int64_t stride = 1;
  int64_t padding = 0;
  bool bias = false;
  // Indices into NetworkSpec::variables / ::state of the layer's first
  // variable (weight / gamma / running_mean; the next is the bias / beta /
  // running_var); -1 for none.
  int variable = -1;
  int state = -1;
};

struct NetworkSpec {
  std::string name;
  Shape image;  // (C, H, W)
  int64_t classes = 0;
  float weight_decay = 0.0f;
  std::vector<Layer> layers;  // layers[0] is the input
  std::vector<VariableSpec> variables;
  std::vector<VariableSpec> state;  // batch norm running statistics
  std::vector<int> decayed;         // variables weight decay applies to
};

// The backend shapes of a conv / batch norm layer at batch size `batch`;
// `in` is its input's per-example shape (C, H, W).
Conv2dShape ConvShapeOf(const Layer& conv, int64_t batch, const Shape& in);
BatchNormShape BatchNormShapeOf(int64_t batch, const Shape& in);

// The layout of each layer's output at a backend's channel block `block`
// (op_shapes.h, ValidateChannelBlock; 0: everything NCHW): the block for
// the activations from the first convolution to the pooling before the
// classifier, so that no op reorders them between layers; the largest
// smaller block where the channels do not divide by it (8 for 24 channels
// at 16; LargestChannelBlock), NCHW where none does, for the images (they
// come from the host in NCHW) and for what a dense layer flattens. Batch norm,
// ReLU, add and max pool keep their input's layout, so each ties its tensors
// into one group, and a group takes the block only if every tensor in it can; a
// convolution (and the global pooling) may change layouts.
std::vector<int64_t> ChooseLayouts(const std::vector<Layer>& layers,
                                   int64_t block);

// Builds a NetworkSpec layer by layer; each call returns the new layer's
// index. A wrong call (an input that does not exist, shapes that do not
// fit) is remembered and returned by Build as INVALID_ARGUMENT naming the
// layer; later calls are then ignored.
class NetworkBuilder {
 public:
  NetworkBuilder(std::string name, Shape image, int64_t classes,
                 float weight_decay);

  int input() const { return 0; }
  const Shape& shape(int layer) const;

  // x: (C, H, W) -> (out_channels, H', W'). Weights: truncated normal with
  // stddev sqrt(2 / (K * K * out_channels)) (He et al., fan-out).
  int Conv(int x, const std::string& name, int64_t out_channels, int64_t kernel,
           int64_t stride, int64_t padding, bool bias = false);
  // (C, H, W) -> (C, H, W); gamma 1, beta 0, running mean 0, variance 1.
  int BatchNorm(int x, const std::string& name);
  int Relu(int x);
  // a, b: equal shapes -> a + b.
  int Add(int a, int b);
  // (C, H, W) -> (C, ceil(H / stride), ceil(W / stride)).
  int MaxPool(int x, int64_t window, int64_t stride);
  // (C, H, W) -> (C).
  int GlobalAvgPool(int x);
  // (K) -> (outputs); weights truncated normal with stddev 1 / sqrt(K).
  int Dense(int x, const std::string& name, int64_t outputs);

  // The spec, or the first error; INVALID_ARGUMENT too when the last layer
  // is not (classes) or the variables are invalid (ValidateVariableSpecs).
  absl::StatusOr<NetworkSpec> Build() &&;

 private:
  // Appends `layer` after checking its inputs; returns its index or -1.
  int Append(Layer layer);
  void Fail(const std::string& message);

  NetworkSpec spec_;
  absl::Status status_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_NETWORK_H_
