#include "worker/models/network_plan.h"

#include <algorithm>

namespace psgd {
namespace {

// The one layer that reads layer i's output, or -1 (none, or several).
int OnlyConsumer(const Consumers& consumers, int i) {
  return consumers[i].size() == 1 ? consumers[i][0] : -1;
}

// The layers whose backward reads their input's forward value.
bool BackwardReadsInput(LayerKind k) {
  return k == LayerKind::kConv || k == LayerKind::kBatchNorm ||
         k == LayerKind::kMaxPool || k == LayerKind::kDense;
}

// Whether layer i's backward reads its own output: a ReLU's (its mask), max
// pooling's, and a batch norm's only where it runs the ReLU after it (the
// mask again: the ReLU writes the batch norm's output buffer,
// OutputOwners); without one, BatchNormOp::Backward leaves its output
// unread, and the output lives only to its readers' forward.
bool BackwardReadsOutput(const std::vector<Layer>& layers,
                         const Consumers& consumers,
                         const std::vector<int>& out_owner, int i) {
  switch (layers[i].kind) {
    case LayerKind::kRelu:
    case LayerKind::kMaxPool:
      return true;
    case LayerKind::kBatchNorm:
      for (int c : consumers[i]) {
        if (layers[c].kind == LayerKind::kRelu &&
            out_owner[c] == out_owner[i]) {
          return true;
        }
      }
      return false;
    default:
      return false;
  }
}

// AliasGradients' add_shares: for each add in turn, its first input that
// may take the add's gradient as its own, with every layer whose gradient
// was that input's.
void ShareAddGradients(const std::vector<Layer>& layers,
                       const Consumers& consumers, GradientAliases* g) {
  const int count = static_cast<int>(layers.size());
  std::vector<int>& owner = g->owner;
  std::vector<bool> shared(count, false);  // by gradient owner
  for (int a = 1; a < count; ++a) {
    if (layers[a].kind != LayerKind::kAdd || shared[owner[a]]) continue;
    const int ga = owner[a];
    int first_reader = count;
    for (int m = 0; m < count; ++m) {
      if (owner[m] == ga) first_reader = std::min(first_reader, m);
    }
    const std::vector<int>& in = layers[a].inputs;
    for (int j : in) {
      const int gj = owner[j];
      if (g->add_alias[j] || gj == ga || shared[gj] ||
          std::count(in.begin(), in.end(), j) > 1) {
        continue;
      }
      bool before = true;
      for (int m = 0; m < count; ++m) {
        if (owner[m] != gj) continue;
        for (int c : consumers[m]) {
          if (c != a && owner[c] != gj) before = before && c < first_reader;
        }
      }
      if (!before) continue;
      for (int m = 0; m < count; ++m) {
        if (owner[m] == gj) owner[m] = ga;
      }
      g->add_shares[j] = true;
      shared[ga] = true;
      break;
    }
  }
}

}  // namespace

Consumers FindConsumers(const std::vector<Layer>& layers) {
  Consumers consumers(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    for (int in : layers[i].inputs) {
      consumers[in].push_back(static_cast<int>(i));
    }
  }
  return consumers;
}

std::vector<ReluFusion> FuseRelus(const std::vector<Layer>& layers,
                                  const Consumers& consumers) {
  std::vector<ReluFusion> relu(layers.size());
  for (size_t i = 1; i < layers.size(); ++i) {
    if (layers[i].kind != LayerKind::kRelu) continue;
    const int in = layers[i].inputs[0];
    if (OnlyConsumer(consumers, in) != static_cast<int>(i)) continue;
    relu[i].in_batch_norm = layers[in].kind == LayerKind::kBatchNorm;
    relu[i].in_add = layers[in].kind == LayerKind::kAdd;
    relu[in].runs_relu = relu[i].in_batch_norm || relu[i].in_add;
  }
  return relu;
}

std::vector<int> FoldBatchNorms(const std::vector<Layer>& layers,
                                const Consumers& consumers) {
  const int count = static_cast<int>(layers.size());
  std::vector<int> folds(count, -1);
  for (int i = 1; i + 1 < count; ++i) {
    if (layers[i].kind == LayerKind::kConv &&
        layers[i + 1].kind == LayerKind::kBatchNorm &&
        OnlyConsumer(consumers, i) == i + 1) {
      folds[i] = i + 1;
    }
  }
  return folds;
}

std::vector<int> OutputOwners(const std::vector<Layer>& layers,
                              const std::vector<ReluFusion>& relu) {
  std::vector<int> owner(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    owner[i] = relu[i].in_batch_norm || relu[i].in_add
                   ? owner[layers[i].inputs[0]]
                   : static_cast<int>(i);
  }
  return owner;
}

GradientAliases AliasGradients(const std::vector<Layer>& layers,
                               const Consumers& consumers,
                               const std::vector<ReluFusion>& relu) {
  const int count = static_cast<int>(layers.size());
  GradientAliases g;
  g.owner.assign(count, -1);
  g.add_alias.assign(count, false);
  g.add_shares.assign(count, false);
  for (int i = count - 1; i >= 0; --i) {
    const int c = OnlyConsumer(consumers, i);
    g.add_alias[i] = c >= 0 && layers[c].kind == LayerKind::kAdd;
    g.owner[i] =
        g.add_alias[i] || (c >= 0 && relu[c].in_batch_norm) ? g.owner[c] : i;
  }
  ShareAddGradients(layers, consumers, &g);
  return g;
}

std::vector<Life> BufferLives(const std::vector<Layer>& layers,
                              const Consumers& consumers,
                              const std::vector<int>& out_owner,
                              const std::vector<int>& grad_owner,
                              int64_t batch) {
  const int count = static_cast<int>(layers.size());
  const auto backward_at = [count](int layer) { return 2 * count - layer; };
  std::vector<Life> lives(2 * count);
  for (int i = 0; i < count; ++i) {
    const int64_t elements = batch * NumElements(layers[i].shape);
    Life& out = lives[out_owner[i]];
    out.elements = elements;
    if (out.start < 0) out.start = i;
    int end = i == count - 1 ? count : i;
    for (int c : consumers[i]) {
      end = std::max(end, c);
      if (BackwardReadsInput(layers[c].kind)) {
        end = std::max(end, backward_at(c));
      }
    }
    if (i > 0 && BackwardReadsOutput(layers, consumers, out_owner, i)) {
      end = std::max(end, backward_at(i));
    }
    out.end = std::max(out.end, end);

    bool needs_grad = i > 0;
    for (int c : consumers[i]) {
      needs_grad = needs_grad || (layers[c].kind != LayerKind::kConv &&
                                  layers[c].kind != LayerKind::kDense);
    }
    if (!needs_grad) continue;
    Life& grad = lives[count + grad_owner[i]];
    grad.elements = elements;
    int first_write = consumers[i].empty() ? count : i;
    for (int c : consumers[i]) first_write = std::max(first_write, c);
    const int start = backward_at(first_write);
    grad.start = grad.start < 0 ? start : std::min(grad.start, start);
    grad.end = std::max(grad.end, backward_at(i));
  }
  return lives;
}

std::vector<int64_t> PackLives(const std::vector<Life>& lives, int64_t* arena) {
  constexpr int64_t kAlign = 16;
  auto aligned = [](int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(lives.size()); ++i) {
    if (lives[i].start >= 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return lives[a].elements > lives[b].elements;
  });
  std::vector<int64_t> offset(lives.size(), -1);
  std::vector<int> placed;
  *arena = 0;
  for (int b : order) {
    const Life& life = lives[b];
    const int64_t size = aligned(life.elements);
    // The placed lives this one meets, by offset.
    std::vector<int> met;
    for (int o : placed) {
      if (!(lives[o].end < life.start || life.end < lives[o].start)) {
        met.push_back(o);
      }
    }
    std::sort(met.begin(), met.end(),
              [&](int x, int y) { return offset[x] < offset[y]; });
    int64_t best = -1, best_gap = 0, end = 0;
    for (int o : met) {
      const int64_t gap = offset[o] - end;
      if (gap >= size && (best < 0 || gap < best_gap)) {
        best = end;
        best_gap = gap;
      }
      end = std::max(end, offset[o] + aligned(lives[o].elements));
    }
    offset[b] = best >= 0 ? best : end;
    *arena = std::max(*arena, offset[b] + size);
    placed.push_back(b);
  }
  return offset;
}

int64_t ScratchElements(const std::vector<Layer>& layers,
                        const Consumers& consumers, int64_t batch) {
  int64_t summed = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (consumers[i].size() > 1) {
      summed = std::max(summed, batch * NumElements(layers[i].shape));
    }
  }
  return summed;
}

StepPlan PlanStep(const std::vector<Layer>& layers, int64_t batch,
                  int64_t channel_block, bool fold_batch_norm) {
  const int count = static_cast<int>(layers.size());
  const Consumers consumers = FindConsumers(layers);
  const std::vector<ReluFusion> relu = FuseRelus(layers, consumers);
  const std::vector<int> folds = fold_batch_norm
                                     ? FoldBatchNorms(layers, consumers)
                                     : std::vector<int>(count, -1);
  const std::vector<int> out_owner = OutputOwners(layers, relu);
  const GradientAliases grads = AliasGradients(layers, consumers, relu);
  const std::vector<Life> lives =
      BufferLives(layers, consumers, out_owner, grads.owner, batch);
  StepPlan plan;
  const std::vector<int64_t> offset = PackLives(lives, &plan.arena);
  plan.scratch = ScratchElements(layers, consumers, batch);
  const std::vector<int64_t> layout = ChooseLayouts(layers, channel_block);
  plan.layers.resize(count);
  for (int i = 0; i < count; ++i) {
    LayerStep& s = plan.layers[i];
    s.block = layout[i];
    s.relu = relu[i];
    s.add_alias = grads.add_alias[i];
    s.add_shares = grads.add_shares[i];
    s.folds = folds[i];
    s.folded_away = i > 0 && folds[i - 1] == i;
    s.out = offset[out_owner[i]];
    s.grad = offset[count + grads.owner[i]];
  }
  return plan;
}

}  // namespace psgd
