// The step plan of a layer-graph network (network.h) as pure passes over
// its layer list, with no backend in them. The network model's MakePlan
// (network_model.cc) takes PlanStep's result and creates the ops and the
// buffers it names. The passes, in the order PlanStep runs them:
//
//   FindConsumers    who reads each layer's output
//   FuseRelus        the ReLUs that their batch norm or add runs
//   FoldBatchNorms   the batch norms that inference folds into the
//                    convolution before them
//   OutputOwners     whose output buffer each layer writes
//   AliasGradients   whose gradient buffer each layer's gradient is
//   BufferLives      when each output and gradient buffer is in use
//   PackLives        where each buffer lives in one arena
//   ScratchElements  the buffer in which a gradient's later contributions
//                    are summed
//
// (The activations' layouts come from ChooseLayouts, network.h.)
//
// Thread-safety: plain values and pure functions.
#ifndef PSGD_WORKER_MODELS_NETWORK_PLAN_H_
#define PSGD_WORKER_MODELS_NETWORK_PLAN_H_

#include <cstdint>
#include <vector>

#include "worker/models/network.h"

namespace psgd {

// consumers[i]: the layers that read layer i's output, in layer order (a
// layer that reads it twice, as an add of it with itself, twice).
using Consumers = std::vector<std::vector<int>>;
Consumers FindConsumers(const std::vector<Layer>& layers);

// A ReLU run by the layer it reads, one pass instead of two.
struct ReluFusion {
  // A ReLU whose input is a batch norm that nothing else reads: the batch
  // norm runs it, forward and backward (BatchNormShape::relu), in the batch
  // norm's buffers.
  bool in_batch_norm = false;
  // A ReLU whose input is an add that nothing else reads: the add runs its
  // forward (Backend::AddRelu) into the add's output; its backward runs as
  // any ReLU's, with that output as its mask.
  bool in_add = false;
  // The batch norm or add that runs the ReLU after it.
  bool runs_relu = false;
};
std::vector<ReluFusion> FuseRelus(const std::vector<Layer>& layers,
                                  const Consumers& consumers);

// Inference: folds[i] is the batch norm that convolution i runs folded into
// its weights and bias, or -1. Only the layer right after the convolution,
// and only when that batch norm is the convolution's one reader: the
// convolution then writes the batch norm's output one layer early, when
// nothing but its own input is read, and that input's life (to the
// convolution's backward) meets the output's, so that the two never share
// memory.
std::vector<int> FoldBatchNorms(const std::vector<Layer>& layers,
                                const Consumers& consumers);

// out_owner[i]: the layer whose output buffer layer i writes: its own, or
// for a ReLU that its batch norm or add runs, that layer's (in place).
std::vector<int> OutputOwners(const std::vector<Layer>& layers,
                              const std::vector<ReluFusion>& relu);

// Which layers' gradients are one buffer, by layer.
struct GradientAliases {
  // The layer whose gradient buffer is this layer's gradient: its own; its
  // only reader's when that is an add (add_alias) or a ReLU its batch norm
  // runs; or an add's (add_shares).
  std::vector<int> owner;
  // The layer's only reader is an add: the add's gradient is the layer's,
  // without a copy.
  std::vector<bool> add_alias;
  // An add's input that other layers read too (a residual block's input:
  // the block's first layer and the add read it) takes the add's gradient
  // as its own, without a copy, when every other layer that contributes to
  // its gradient comes before every layer that reads the add's: their
  // backward then runs after those reads and sums into it. Once per add's
  // gradient (a second input would find the first's sums there), for one
  // input of an add, not for an add of a layer with itself.
  std::vector<bool> add_shares;
};
GradientAliases AliasGradients(const std::vector<Layer>& layers,
                               const Consumers& consumers,
                               const std::vector<ReluFusion>& relu);

// When a step's buffers are in use. A step runs the forward of layer i at
// time i (the images are copied in at 0), the loss at time `count` (the
// number of layers), and the backward of layer i at 2 * count - i. A
// buffer's life is the times [start, end] from its first write to its last
// read, both included: an op never reads and writes the same buffer unless
// it says so, so lives that touch at one op's time must not share.
struct Life {
  int64_t elements = 0;
  int start = -1;  // -1: no buffer
  int end = -1;
};

// The lives of a step of `batch` images: [0, count) the outputs', by output
// owner, [count, 2 * count) the gradients', by gradient owner (start -1 for
// an index that owns none). An output is read by the forward of its
// readers, by the backward of those that read their input there (a
// convolution's filter gradient, batch norm, max pooling, dense), by its own
// backward where that reads the output (ReLU's mask, batch norm's fused
// ReLU, max pooling), and by the loss (the last layer's); one that no
// backward reads (an add's whose ReLU is not its own, a batch norm's
// without a ReLU, as before a residual block's add) ends in the forward.
// A gradient is written first by the backward of its latest reader (the
// loss's for the last layer) and read last by the backward of its layer.
// The images have none unless a layer other than a convolution or a dense
// layer reads them (its backward writes one).
std::vector<Life> BufferLives(const std::vector<Layer>& layers,
                              const Consumers& consumers,
                              const std::vector<int>& out_owner,
                              const std::vector<int>& grad_owner,
                              int64_t batch);

// Places lives in one arena, the largest first, each at the lowest offset
// of the smallest gap that fits it between the lives placed so far that it
// meets, else after the last of them (greedy by size, as TensorFlow Lite's
// arena planner): two lives that meet never share memory. Offsets are in
// floats, multiples of 16 (64 bytes). Returns each life's offset (-1 for
// those with start -1); *arena: the floats the arena needs.
std::vector<int64_t> PackLives(const std::vector<Life>& lives, int64_t* arena);

// The floats of the buffer in which a gradient with more than one
// contribution sums the later ones (not an add's input, which shares the
// add's): the largest output with more than one reader at `batch` images;
// 0 for a chain of layers.
int64_t ScratchElements(const std::vector<Layer>& layers,
                        const Consumers& consumers, int64_t batch);

// One layer's part of a step plan.
struct LayerStep {
  int64_t block = 0;  // its output's and gradient's layout (ChooseLayouts)
  ReluFusion relu;
  bool add_alias = false;   // GradientAliases
  bool add_shares = false;  // GradientAliases
  // Inference: the batch norm this convolution runs (FoldBatchNorms; -1:
  // none), and for a batch norm, whether its convolution runs it.
  int folds = -1;
  bool folded_away = false;
  // Offsets of its output and gradient in the arena, in floats; grad -1:
  // no gradient (the images').
  int64_t out = -1;
  int64_t grad = -1;
};

struct StepPlan {
  std::vector<LayerStep> layers;
  int64_t arena = 0;    // floats
  int64_t scratch = 0;  // floats (ScratchElements)
};

// The passes above composed: the plan of a step of `batch` images whose
// activations take the channel block `channel_block` where they can
// (Backend::ChannelBlock), with the inference fold or without.
StepPlan PlanStep(const std::vector<Layer>& layers, int64_t batch,
                  int64_t channel_block, bool fold_batch_norm);

}  // namespace psgd

#endif  // PSGD_WORKER_MODELS_NETWORK_PLAN_H_
