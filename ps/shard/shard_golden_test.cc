// A golden run of a lone shard (issue 61, "one apply path"): a fixed
// sequence of pushes, whole and in parts, refused, stale, surplus, a step
// completed by a Leave, and async pushes too stale; the final weights and
// Adam's slots must be bit for bit those the shard computed before its
// decisions and their application became one path, and so must every reply,
// refusal and counter (a transcript, hashed). A change of the arithmetic or
// of the rules shows here first; the expected values were recorded from the
// code at 82999d0.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ps/shard/shard.h"

namespace psgd {
namespace ps {
namespace {

constexpr int kWorkers = 4;

struct Var {
  const char* name;
  std::vector<int64_t> shape;
  int size;
};
const std::vector<Var>& Vars() {
  static const auto* v =
      new std::vector<Var>{{"w", {2, 3}, 6}, {"b", {3}, 3}, {"c", {2}, 2}};
  return *v;
}

// Values whose float sums depend on their order.
std::vector<float> Values(int var, int worker, int64_t step) {
  std::vector<float> v(static_cast<size_t>(Vars()[var].size));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(
        std::sin(1.3 * worker + 0.7 * step + 0.37 * i + 0.9 * var) *
        (1.0 + 0.3 * worker));
  }
  return v;
}

// Every tensor of worker w's gradient for `step` (or, for step -1, the
// initial values), or only those of `only` (-1: all).
struct Tensors {
  std::vector<std::vector<float>> values;
  std::vector<TensorBytes> bytes;
};
Tensors Make(int worker, int64_t step, int only = -1) {
  Tensors t;
  t.values.reserve(Vars().size());
  for (int k = 0; k < static_cast<int>(Vars().size()); ++k) {
    if (only >= 0 && k != only) continue;
    t.values.push_back(Values(k, worker, step));
    t.bytes.push_back(FloatTensorBytes(Vars()[k].name, Vars()[k].shape,
                                       t.values.back().data()));
    t.bytes.back().kind = VariableKind::kParameter;
  }
  return t;
}

uint64_t Fnv(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string Bits(absl::Span<const float> values) {
  std::string out;
  for (float f : values) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    absl::StrAppendFormat(&out, "%08x ", u);
  }
  return out;
}

struct Run {
  std::unique_ptr<ParameterShard> shard;
  std::string transcript;

  explicit Run(const ShardOptions& o) {
    auto s = ParameterShard::Create(o);
    REQUIRE(s.ok());
    shard = *std::move(s);
    REQUIRE(shard->Initialize(Make(9, -1).bytes).ok());
    for (int w = 0; w < kWorkers; ++w) REQUIRE(shard->Join(w).ok());
  }

  void Note(const std::string& what, const absl::StatusOr<PushReply>& r) {
    absl::StrAppend(&transcript, what, ": ");
    if (!r.ok()) {
      absl::StrAppend(&transcript, r.status().ToString(), "\n");
      return;
    }
    absl::StrAppend(&transcript, PushOutcomeName(r->outcome), " step ", r->step,
                    " staleness ", r->staleness, " n ",
                    r->replicas_to_aggregate, " staged ", r->staged, " (",
                    r->reason, ")\n");
  }
  void Push(int w, int64_t step) {
    const Tensors g = Make(w, step);
    Note(absl::StrCat("push ", w, "@", step), shard->Push(w, step, g.bytes));
  }
  // In parts, one variable a part, in the order `order`.
  void PushParts(int w, int64_t step, const std::vector<int>& order) {
    for (int k : order) {
      const Tensors g = Make(w, step, k);
      Note(absl::StrCat("part ", k, " ", w, "@", step),
           shard->PushPart(w, step, g.bytes));
    }
  }
  int64_t step() { return shard->Status().step; }
  void Pull(int w) {
    auto s = shard->Pull(0, w, absl::Now() + absl::Seconds(10));
    REQUIRE(s.ok());
    absl::StrAppend(&transcript, "pull ", w, " at ", (*s)->step, "\n");
  }

  // The final state: weights, slots, counters, histogram.
  std::string Final() {
    std::string out;
    auto weights = shard->LatestWeights();
    absl::StrAppend(&out, "step ", weights->step, "\n");
    for (int i = 0; i < weights->layout->size(); ++i) {
      absl::StrAppend(&out, weights->layout->names[i], " ",
                      Bits(weights->weights[i].span()), "\n");
    }
    return out;
  }
  std::string Slots() {
    std::string out;
    for (const char* slot : {"m", "v"}) {
      for (int i = 0; i < static_cast<int>(Vars().size()); ++i) {
        absl::StrAppend(&out, slot, i, " ", Bits(shard->CopySlot(slot, i)),
                        "\n");
      }
    }
    const ShardStatus s = shard->Status();
    const PushCounters& c = s.counters;
    absl::StrAppend(&out, "counters ", c.aggregated, " ", c.applied, " ",
                    c.dropped_stale, " ", c.dropped_surplus, " ", c.refused,
                    " ", c.refused_too_stale, " ", c.completed_by_leave, " ",
                    c.staged, " ", c.decisions_applied, "\n");
    for (const auto& [staleness, count] : s.staleness_histogram) {
      absl::StrAppend(&out, "staleness ", staleness, ": ", count, "\n");
    }
    absl::StrAppend(&out, "live ", s.live_workers.size(), " n ",
                    s.replicas_to_aggregate, " dc ", s.dc_compensated, "/",
                    s.dc_uncompensated, "\n");
    return out;
  }
};

void CheckGolden(Run& run, const std::string& weights, uint64_t transcript,
                 uint64_t slots) {
  const std::string final_weights = run.Final();
  const std::string final_slots = run.Slots();
  // Printed on a failure: what to compare, and (after a deliberate change
  // of the arithmetic) what to record.
  INFO("weights:\n" << final_weights);
  INFO("transcript (" << absl::StrFormat("0x%016x", Fnv(run.transcript))
                      << "):\n"
                      << run.transcript);
  INFO("slots and counters (" << absl::StrFormat("0x%016x", Fnv(final_slots))
                              << "):\n"
                              << final_slots);
  CHECK(final_weights == weights);
  CHECK(Fnv(run.transcript) == transcript);
  CHECK(Fnv(final_slots) == slots);
}

ShardOptions Options(Mode mode) {
  ShardOptions o;
  o.mode = mode;
  o.total_num_replicas = kWorkers;
  o.optimizer.kind = OptimizerOptions::Kind::kAdam;
  o.optimizer.learning_rate = 0.01;
  return o;
}

TEST_CASE("golden: a lone sync shard with backup workers, Adam") {
  ShardOptions o = Options(Mode::kSync);
  o.replicas_to_aggregate = 3;  // one backup worker
  o.n_follows_live = true;      // N = live workers - 1
  o.lr_scale_follows_n = true;
  Run run(o);
  std::mt19937 rng(61);
  for (int64_t step = 0; step < 8; ++step) {
    std::vector<int> workers = {0, 1, 2, 3};
    std::shuffle(workers.begin(), workers.end(), rng);
    for (int i = 0; i < kWorkers; ++i) {
      const int w = workers[i];
      if (i == 1) run.Push(w, step + 1);  // from the future: refused
      if ((w + step) % 3 == 0) {
        run.PushParts(w, step, {2, 0, 1});
      } else {
        run.Push(w, step);
      }
      if (i == 0) run.Push(w, step);  // a second push: refused
    }
    if (step % 3 == 2) run.Push(workers[3], step - 1);  // stale
  }
  // Step 8: two gradients, then a worker leaves: N = 3 - 1 = 2 completes
  // the step without it; another leaves, which changes nothing.
  run.Push(1, 8);
  run.PushParts(2, 8, {1, 0, 2});
  REQUIRE(run.shard->Leave(0).ok());
  REQUIRE(run.shard->Leave(3).ok());
  absl::StrAppend(&run.transcript, "left at ", run.step(), "\n");
  // With one live worker every step is one gradient (N = 1).
  REQUIRE(run.shard->Leave(2).ok());
  for (int64_t step = 9; step < 12; ++step) run.Push(1, step);
  run.Push(0, 12);  // not live: refused
  for (int w : {0, 2, 3}) REQUIRE(run.shard->Join(w).ok());
  run.Push(0, 10);  // stale: from before the step just completed
  for (int64_t step = 12; step < 15; ++step) {
    for (int w : {3, 1, 0, 2}) run.Push(w, step);
  }
  CheckGolden(run,
              "step 15\n"
              "w c06ca25c c05cf1c1 c02f2513 bfd2fbe2 beb300c4 3f7f18f7 \n"
              "b c01375e1 bf8c8f42 3e6dca9d \n"
              "c 3f51337b 40032e78 \n",
              0xc251bf39c2cc23adull, 0x3aabddc0d2f3ff79ull);
}

TEST_CASE("golden: a lone async shard with staleness limits, Adam") {
  ShardOptions o = Options(Mode::kAsync);
  o.max_push_staleness = 3;
  o.scale_lr_by_staleness = true;
  o.dc_asgd_lambda = 0.04;
  Run run(o);
  std::mt19937 rng(62);
  std::vector<int64_t> last(kWorkers, -1);
  for (int w = 0; w < kWorkers; ++w) run.Pull(w);
  for (int n = 0; n < 90; ++n) {
    const int w = static_cast<int>(rng() % kWorkers);
    const int64_t now = run.step();
    // The step it pulled, up to five behind (beyond max_push_staleness).
    const int64_t step =
        std::max<int64_t>(last[w] + 1, now - static_cast<int64_t>(rng() % 6));
    if (step > now) continue;
    if (n % 7 == 3) {
      run.PushParts(w, step, {1, 2, 0});
    } else {
      run.Push(w, step);
    }
    last[w] = step;
    if (n % 5 == 0) run.Pull(w);
    if (n == 40) {
      REQUIRE(run.shard->Leave(2).ok());
      run.Push(2, run.step());  // not live: refused
      REQUIRE(run.shard->Join(2).ok());
    }
  }
  CheckGolden(run,
              "step 77\n"
              "w c06eb677 c05aba10 c02811fc bfbfd093 be29f217 3f989e98 \n"
              "b c00b2721 bf6ff6b3 3edbc4d3 \n"
              "c 3f81cdb3 400fae8b \n",
              0x2a5e52ff417601dcull, 0x7fad5deea1868341ull);
}

}  // namespace
}  // namespace ps
}  // namespace psgd
