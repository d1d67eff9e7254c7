// The step plan's passes (network_plan.h), each on small hand-made layer
// lists with the result worked out by hand: the readers of each layer; the
// ReLUs that their batch norm or add runs and those that stay apart; the
// batch norms that fold into their convolution and those that do not (a
// convolution with two readers, a batch norm that is not the next layer, one
// after pooling); output owners; gradient aliases (a residual block, an add
// of a layer with itself, an input read at or after the add's first
// reader, once per add's gradient, one input per add); every buffer's
// life (a batch norm's output kept to its backward only with its ReLU);
// the scratch buffer; the passes composed, and the CIFAR networks'
// arenas as they were before the passes were split out of MakePlan. Then
// PackLives against its promise, on many random sets of lives: two lives
// that meet (their [start, end] times intersect, touching included) never
// share memory; offsets are 64-byte aligned; the arena holds every life and
// is no larger than all of them end to end; lives without a buffer get
// none. Then the greedy placement's own small cases.
#include "worker/models/network_plan.h"

#include <array>
#include <catch2/catch.hpp>
#include <random>

#include "worker/models/cifar_networks.h"

namespace psgd {
namespace {

using K = LayerKind;

// A layer of a hand-made list: its kind, inputs and one example's shape.
Layer L(K kind, std::vector<int> inputs = {}, Shape shape = {1}) {
  Layer l;
  l.kind = kind;
  l.inputs = std::move(inputs);
  l.shape = std::move(shape);
  return l;
}

template <typename T, typename F>
std::vector<bool> Column(const std::vector<T>& rows, F field) {
  std::vector<bool> column;
  for (const T& r : rows) column.push_back(r.*field);
  return column;
}

using Triple = std::array<int64_t, 3>;  // elements, start, end
std::vector<Triple> Triples(const std::vector<Life>& lives) {
  std::vector<Triple> t;
  for (const Life& l : lives) t.push_back({l.elements, l.start, l.end});
  return t;
}

constexpr bool F = false;
constexpr bool T = true;

// 0 images, conv, bn, relu (the batch norm's), conv, bn, add (of the bn
// and the first relu), relu (the add's), dense.
std::vector<Layer> ResidualBlock() {
  return {L(K::kInput),       L(K::kConv, {0}), L(K::kBatchNorm, {1}),
          L(K::kRelu, {2}),   L(K::kConv, {3}), L(K::kBatchNorm, {4}),
          L(K::kAdd, {5, 3}), L(K::kRelu, {6}), L(K::kDense, {7})};
}

TEST_CASE("FindConsumers: every reader in layer order, a double read twice") {
  const std::vector<Layer> layers = {L(K::kInput),       L(K::kConv, {0}),
                                     L(K::kRelu, {1}),   L(K::kAdd, {2, 2}),
                                     L(K::kAdd, {3, 1}), L(K::kDense, {4})};
  CHECK(FindConsumers(layers) == Consumers{{1}, {2, 4}, {3, 3}, {4}, {5}, {}});
}

TEST_CASE("FuseRelus: a ReLU runs in the batch norm or add only it reads") {
  const std::vector<Layer> fused = {L(K::kInput),          L(K::kConv, {0}),
                                    L(K::kBatchNorm, {1}), L(K::kRelu, {2}),
                                    L(K::kConv, {3}),      L(K::kAdd, {4, 3}),
                                    L(K::kRelu, {5}),      L(K::kDense, {6})};
  const std::vector<ReluFusion> r = FuseRelus(fused, FindConsumers(fused));
  CHECK(Column(r, &ReluFusion::in_batch_norm) ==
        std::vector<bool>{F, F, F, T, F, F, F, F});
  CHECK(Column(r, &ReluFusion::in_add) ==
        std::vector<bool>{F, F, F, F, F, F, T, F});
  CHECK(Column(r, &ReluFusion::runs_relu) ==
        std::vector<bool>{F, F, T, F, F, T, F, F});
  CHECK(OutputOwners(fused, r) == std::vector<int>{0, 1, 2, 2, 4, 5, 5, 7});

  // A ReLU of the images, of a batch norm and of an add that others read
  // too, of a convolution: each runs alone.
  const std::vector<Layer> apart = {
      L(K::kInput),          L(K::kRelu, {0}), L(K::kConv, {1}),
      L(K::kBatchNorm, {2}), L(K::kRelu, {3}), L(K::kAdd, {4, 3}),
      L(K::kRelu, {5}),      L(K::kConv, {5}), L(K::kRelu, {7}),
      L(K::kAdd, {8, 6}),    L(K::kDense, {9})};
  const std::vector<ReluFusion> a = FuseRelus(apart, FindConsumers(apart));
  const std::vector<bool> none(apart.size(), false);
  CHECK(Column(a, &ReluFusion::in_batch_norm) == none);
  CHECK(Column(a, &ReluFusion::in_add) == none);
  CHECK(Column(a, &ReluFusion::runs_relu) == none);
  CHECK(OutputOwners(apart, a) ==
        std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
}

TEST_CASE("FoldBatchNorms: the batch norm right after its one convolution") {
  // 2 folds into 1 and 14 into 13; not 5 (its convolution 4 is read by the
  // add 6 too), 9 (the one reader of convolution 7, but not the layer after
  // it) or 12 (after pooling).
  const std::vector<Layer> layers = {
      L(K::kInput),           L(K::kConv, {0}),   L(K::kBatchNorm, {1}),
      L(K::kRelu, {2}),       L(K::kConv, {3}),   L(K::kBatchNorm, {4}),
      L(K::kAdd, {5, 4}),     L(K::kConv, {6}),   L(K::kConv, {6}),
      L(K::kBatchNorm, {7}),  L(K::kAdd, {9, 8}), L(K::kMaxPool, {10}),
      L(K::kBatchNorm, {11}), L(K::kConv, {12}),  L(K::kBatchNorm, {13}),
      L(K::kDense, {14})};
  CHECK(FoldBatchNorms(layers, FindConsumers(layers)) ==
        std::vector<int>{-1, 2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 14,
                         -1, -1});
}

// AliasGradients of `layers` with the fusions FuseRelus finds.
GradientAliases Aliases(const std::vector<Layer>& layers) {
  const Consumers consumers = FindConsumers(layers);
  return AliasGradients(layers, consumers, FuseRelus(layers, consumers));
}

TEST_CASE("AliasGradients: a residual block's input takes the add's") {
  // The second batch norm's only reader is the add (an alias); the first
  // batch norm's ReLU runs in it (its gradient is the ReLU's); the block's
  // input (the ReLU, 3) is read by the block's first convolution before
  // the add's first reader (5): it shares the add's gradient, and so does
  // the batch norm whose gradient was its.
  const GradientAliases g = Aliases(ResidualBlock());
  CHECK(g.owner == std::vector<int>{0, 1, 6, 6, 4, 6, 6, 7, 8});
  CHECK(g.add_alias == std::vector<bool>{F, F, F, F, F, T, F, F, F});
  CHECK(g.add_shares == std::vector<bool>{F, F, F, T, F, F, F, F, F});
}

TEST_CASE("AliasGradients: an add of a layer with itself shares nothing") {
  const GradientAliases g =
      Aliases({L(K::kInput), L(K::kConv, {0}), L(K::kRelu, {1}),
               L(K::kAdd, {2, 2}), L(K::kDense, {3})});
  CHECK(g.owner == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(g.add_alias == std::vector<bool>(5, false));
  CHECK(g.add_shares == std::vector<bool>(5, false));
}

TEST_CASE("AliasGradients: no share for an input read at the first reader") {
  // The relu (2) is read by the convolution (3) that is itself the add's
  // first reader (an alias): its contribution comes too late.
  GradientAliases g =
      Aliases({L(K::kInput), L(K::kConv, {0}), L(K::kRelu, {1}),
               L(K::kConv, {2}), L(K::kAdd, {3, 2}), L(K::kDense, {4})});
  CHECK(g.owner == std::vector<int>{0, 1, 2, 4, 4, 5});
  CHECK(g.add_alias == std::vector<bool>{F, F, F, T, F, F});
  CHECK(g.add_shares == std::vector<bool>(6, false));
  // Nor for one that a later add reads too.
  g = Aliases({L(K::kInput), L(K::kConv, {0}), L(K::kRelu, {1}),
               L(K::kConv, {2}), L(K::kAdd, {3, 2}), L(K::kAdd, {4, 2}),
               L(K::kDense, {5})});
  CHECK(g.owner == std::vector<int>{0, 1, 2, 5, 5, 5, 6});
  CHECK(g.add_alias == std::vector<bool>{F, F, F, T, T, F, F});
  CHECK(g.add_shares == std::vector<bool>(7, false));
}

TEST_CASE("AliasGradients: once per add's gradient") {
  SECTION("an add whose only reader is an add: the second finds it taken") {
    // 6 = 5 + 3 shares 3; 7 = 6 + 1 has the same gradient (6 is its
    // alias), so 1, which could share it, does not.
    const GradientAliases g =
        Aliases({L(K::kInput), L(K::kConv, {0}), L(K::kConv, {1}),
                 L(K::kRelu, {2}), L(K::kConv, {3}), L(K::kBatchNorm, {4}),
                 L(K::kAdd, {5, 3}), L(K::kAdd, {6, 1}), L(K::kDense, {7})});
    CHECK(g.owner == std::vector<int>{0, 1, 2, 7, 4, 7, 7, 7, 8});
    CHECK(g.add_alias == std::vector<bool>{F, F, F, F, F, T, T, F, F});
    CHECK(g.add_shares == std::vector<bool>{F, F, F, T, F, F, F, F, F});
  }
  SECTION("an add whose gradient an input shares is not shared again") {
    // 4 = 3 + 1 shares 1; 4 is then an input of 7 = 6 + 4, but its
    // gradient already holds 1's sums.
    const GradientAliases g =
        Aliases({L(K::kInput), L(K::kConv, {0}), L(K::kConv, {1}),
                 L(K::kBatchNorm, {2}), L(K::kAdd, {3, 1}), L(K::kConv, {4}),
                 L(K::kBatchNorm, {5}), L(K::kAdd, {6, 4}), L(K::kDense, {7})});
    CHECK(g.owner == std::vector<int>{0, 4, 2, 4, 4, 5, 7, 7, 8});
    CHECK(g.add_alias == std::vector<bool>{F, F, F, T, F, F, T, F, F});
    CHECK(g.add_shares == std::vector<bool>{F, T, F, F, F, F, F, F, F});
  }
  SECTION("one input per add") {
    // Both inputs of 5 = 1 + 2 are read before the add's first reader (4):
    // the first shares, the second does not.
    const GradientAliases g =
        Aliases({L(K::kInput), L(K::kConv, {0}), L(K::kConv, {1}),
                 L(K::kConv, {2}), L(K::kBatchNorm, {3}), L(K::kAdd, {1, 2}),
                 L(K::kAdd, {4, 5}), L(K::kDense, {6})});
    CHECK(g.owner == std::vector<int>{0, 6, 2, 3, 6, 6, 6, 7});
    CHECK(g.add_alias == std::vector<bool>{F, F, F, F, T, T, F, F});
    CHECK(g.add_shares == std::vector<bool>{F, T, F, F, F, F, F, F});
  }
}

TEST_CASE("BufferLives: first write to last read, forward and backward") {
  constexpr int64_t kBatch = 2;
  SECTION("a chain with a fused ReLU and max pooling") {
    // Times: forward of layer i at i, the loss at 6, backward of i at
    // 12 - i.
    const std::vector<Layer> layers = {
        L(K::kInput, {}, {2}),      L(K::kConv, {0}, {3}),
        L(K::kBatchNorm, {1}, {3}), L(K::kRelu, {2}, {3}),
        L(K::kMaxPool, {3}, {4}),   L(K::kDense, {4}, {5})};
    const std::vector<Life> lives =
        BufferLives(layers, FindConsumers(layers), {0, 1, 2, 2, 4, 5},
                    {0, 1, 3, 3, 4, 5}, kBatch);
    CHECK(Triples(lives) == std::vector<Triple>{
                                // Outputs. The images: to the convolution's
                                // filter gradient.
                                {4, 0, 11},
                                // The convolution's: to batch norm's
                                // backward.
                                {6, 1, 10},
                                // Batch norm's and its ReLU's: to batch
                                // norm's backward (the mask).
                                {6, 2, 10},
                                {0, -1, -1},
                                // Max pooling's: to its own backward.
                                {8, 4, 8},
                                // The logits: to the loss.
                                {10, 5, 6},
                                // Gradients. The images need none.
                                {0, -1, -1},
                                {6, 10, 11},
                                {0, -1, -1},
                                // The ReLU's (batch norm's too): from max
                                // pooling's backward to batch norm's.
                                {6, 8, 10},
                                {8, 7, 8},
                                // The logits': from the loss.
                                {10, 6, 7}});
  }
  SECTION("images read by a ReLU, layers read twice, an add apart") {
    // Times: forward of i at i, the loss at 7, backward of i at 14 - i.
    const std::vector<Layer> layers = {
        L(K::kInput, {}, {2}),   L(K::kRelu, {0}, {2}), L(K::kConv, {1}, {2}),
        L(K::kAdd, {2, 1}, {2}), L(K::kRelu, {3}, {2}), L(K::kAdd, {4, 3}, {2}),
        L(K::kDense, {5}, {3})};
    const std::vector<Life> lives =
        BufferLives(layers, FindConsumers(layers), {0, 1, 2, 3, 4, 5, 6},
                    {0, 1, 3, 3, 5, 5, 6}, kBatch);
    CHECK(Triples(lives) == std::vector<Triple>{
                                // Outputs. The images: to the ReLU.
                                {4, 0, 1},
                                // The ReLU's: to its own backward.
                                {4, 1, 13},
                                {4, 2, 3},
                                // The add's (its ReLU apart): no backward
                                // reads it.
                                {4, 3, 5},
                                {4, 4, 10},
                                // The second add's: to dense's backward.
                                {4, 5, 8},
                                {6, 6, 7},
                                // Gradients. The images': the ReLU's
                                // backward writes one.
                                {4, 13, 14},
                                // Read by two: from the later one's
                                // backward.
                                {4, 11, 13},
                                {0, -1, -1},
                                // The convolution's and the add's, one
                                // buffer.
                                {4, 9, 12},
                                {0, -1, -1},
                                {4, 8, 10},
                                {6, 7, 8}});
    CHECK(ScratchElements(layers, FindConsumers(layers), kBatch) == 4);
  }
}

TEST_CASE(
    "BufferLives: a batch norm's output reaches its backward only with a "
    "ReLU") {
  // ResidualBlock: forward of i at i, the loss at 9, backward of i at
  // 18 - i. The first batch norm runs its ReLU: its backward reads the
  // output (the mask). The second has none: its output is read by the add's
  // forward and by nothing after it.
  const std::vector<Layer> layers = ResidualBlock();
  const Consumers consumers = FindConsumers(layers);
  const std::vector<ReluFusion> relu = FuseRelus(layers, consumers);
  const std::vector<int> out_owner = OutputOwners(layers, relu);
  REQUIRE(out_owner == std::vector<int>{0, 1, 2, 2, 4, 5, 6, 6, 8});
  const std::vector<Life> lives =
      BufferLives(layers, consumers, out_owner,
                  AliasGradients(layers, consumers, relu).owner, 1);
  CHECK(Triples(lives)[2] == Triple{1, 2, 16});
  CHECK(Triples(lives)[5] == Triple{1, 5, 6});
}

TEST_CASE("ScratchElements: the largest output with several readers") {
  const std::vector<Layer> chain = {
      L(K::kInput, {}, {3}), L(K::kConv, {0}, {8}), L(K::kDense, {1}, {2})};
  CHECK(ScratchElements(chain, FindConsumers(chain), 4) == 0);
  const std::vector<Layer> twice = {
      L(K::kInput, {}, {3}), L(K::kConv, {0}, {5}),   L(K::kAdd, {1, 1}, {5}),
      L(K::kRelu, {2}, {5}), L(K::kAdd, {3, 2}, {5}), L(K::kDense, {4}, {2})};
  CHECK(ScratchElements(twice, FindConsumers(twice), 4) == 20);
}

TEST_CASE("PlanStep: the passes composed") {
  std::vector<Layer> layers = ResidualBlock();
  layers.insert(layers.end() - 1, L(K::kGlobalAvgPool, {7}, {8}));
  layers.back().inputs = {8};
  layers.back().shape = {10};
  layers[0].shape = {3, 4, 4};
  for (int i = 1; i <= 7; ++i) layers[i].shape = {8, 4, 4};
  const StepPlan plan = PlanStep(layers, 2, 8, /*fold_batch_norm=*/true);
  const std::vector<LayerStep>& s = plan.layers;
  REQUIRE(s.size() == layers.size());
  std::vector<int64_t> blocks;
  for (const LayerStep& l : s) blocks.push_back(l.block);
  CHECK(blocks == ChooseLayouts(layers, 8));
  // The ReLUs write their batch norm's and add's outputs.
  CHECK(s[3].relu.in_batch_norm);
  CHECK(s[2].relu.runs_relu);
  CHECK(s[3].out == s[2].out);
  CHECK(s[7].relu.in_add);
  CHECK(s[7].out == s[6].out);
  // The add's gradient is its inputs', and the first batch norm's.
  CHECK(s[5].add_alias);
  CHECK(s[3].add_shares);
  for (int i : {2, 3, 5}) CHECK(s[i].grad == s[6].grad);
  CHECK(s[0].grad == -1);
  CHECK(s[1].grad >= 0);
  // Every buffer inside the arena.
  for (size_t i = 0; i < s.size(); ++i) {
    const int64_t elements = 2 * NumElements(layers[i].shape);
    CHECK(s[i].out + elements <= plan.arena);
    CHECK(s[i].grad + elements <= plan.arena);
  }
  CHECK(plan.scratch == 2 * 128);
  // Both convolutions fold their batch norms.
  CHECK(s[1].folds == 2);
  CHECK(s[2].folded_away);
  CHECK(s[4].folds == 5);
  CHECK(s[5].folded_away);
  const StepPlan unfolded = PlanStep(layers, 2, 8, /*fold_batch_norm=*/false);
  for (const LayerStep& l : unfolded.layers) {
    CHECK(l.folds == -1);
    CHECK_FALSE(l.folded_away);
  }
  CHECK(unfolded.arena == plan.arena);
}

TEST_CASE("PlanStep: the CIFAR networks' arenas as before the split") {
  // MakePlan's figures at 32 images before its passes moved here (any
  // channel block, with the fold or without), but ResNet-20's: 3,145,728
  // floats fewer since a batch norm without a ReLU (each block's second,
  // and the two shortcuts') stopped keeping its output to its backward,
  // 98,304 floats an image.
  struct Want {
    absl::StatusOr<NetworkSpec> spec;
    int64_t arena, scratch;
  };
  const Want wants[] = {{CifarResNet(20), 12812288, 524288},
                        {Cnn10(), 23953408, 0},
                        {WideResNet(16, 4), 31555584, 2097152}};
  for (const Want& w : wants) {
    REQUIRE(w.spec.ok());
    INFO(w.spec->name);
    for (int64_t block : {0, 8, 16}) {
      const StepPlan plan = PlanStep(w.spec->layers, 32, block, true);
      CHECK(plan.arena == w.arena);
      CHECK(plan.scratch == w.scratch);
    }
  }
}

int64_t Aligned(int64_t n) { return (n + 15) / 16 * 16; }

TEST_CASE("PackLives: lives that meet never share memory") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    const int horizon = 1 + static_cast<int>(rng() % 30);
    std::vector<Life> lives(n);
    for (Life& l : lives) {
      if (rng() % 8 == 0) continue;  // no buffer
      l.elements = 1 + static_cast<int64_t>(rng() % 5000);
      l.start = static_cast<int>(rng() % horizon);
      l.end = l.start + static_cast<int>(rng() % 6);
    }
    int64_t arena = -1;
    const std::vector<int64_t> offset = PackLives(lives, &arena);
    REQUIRE(offset.size() == lives.size());
    int64_t all = 0;
    for (int a = 0; a < n; ++a) {
      INFO("trial " << trial << " life " << a);
      if (lives[a].start < 0) {
        CHECK(offset[a] == -1);
        continue;
      }
      all += Aligned(lives[a].elements);
      CHECK(offset[a] >= 0);
      CHECK(offset[a] % 16 == 0);
      CHECK(offset[a] + lives[a].elements <= arena);
      for (int b = a + 1; b < n; ++b) {
        if (lives[b].start < 0) continue;
        const bool meet =
            !(lives[a].end < lives[b].start || lives[b].end < lives[a].start);
        if (!meet) continue;
        INFO("with life " << b);
        const bool apart = offset[a] + lives[a].elements <= offset[b] ||
                           offset[b] + lives[b].elements <= offset[a];
        CHECK(apart);
      }
    }
    CHECK(arena <= all);
  }
}

TEST_CASE("PackLives: lives apart in time share, lives that touch do not") {
  int64_t arena = 0;
  // [0, 1] and [2, 3] never meet: the same memory. [3, 4] touches [2, 3].
  const std::vector<Life> lives = {{100, 0, 1}, {100, 2, 3}, {50, 3, 4}};
  const std::vector<int64_t> offset = PackLives(lives, &arena);
  CHECK(offset[0] == offset[1]);
  CHECK(offset[2] >= offset[1] + 100);
  CHECK(arena == 112 + 64);  // 100 floats take 112 (aligned), 50 take 64
}

}  // namespace
}  // namespace psgd
