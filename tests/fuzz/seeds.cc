#include "tests/fuzz/seeds.h"

#include <cmath>
#include <limits>

#include "tests/fuzz/fuzz_input.h"

namespace psgd {
namespace fuzz {
namespace {

using Tensors = std::vector<ps::wire::TensorData>;

// The model of every seed: w (2, 3) and b (2).
Tensors Model(float w, float b) {
  return {Float32("w", {2, 3}, std::vector<float>(6, w)),
          Float32("b", {2}, std::vector<float>(2, b))};
}

FuzzConfig Sync(int n, int m) {
  FuzzConfig c;
  c.total_num_replicas = m;
  c.replicas_to_aggregate = n;
  return c;
}

FuzzConfig Async(int bound, bool scale_lr) {
  FuzzConfig c;
  c.async = true;
  c.total_num_replicas = 3;
  c.staleness_bound = bound;
  c.scale_lr = scale_lr;
  return c;
}

// Initialize, then Join of workers 0..m-1.
FuzzInputWriter Started(const FuzzConfig& c) {
  FuzzInputWriter in(c);
  in.Add(FuzzOp::kInitialize, InitializeRequest(Model(0.5f, -1.0f)));
  for (int w = 0; w < c.total_num_replicas; ++w) {
    in.Add(FuzzOp::kJoin, JoinRequest(w));
  }
  return in;
}

std::string SyncRounds() {
  FuzzInputWriter in = Started(Sync(2, 2));
  in.Add(FuzzOp::kPull, PullRequest(0, 0))
      .Add(FuzzOp::kPull, PullRequest(1, 1))  // waits for step 1
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.2f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, Model(-0.3f, 0.4f)))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.2f)))  // twice
      .Add(FuzzOp::kStatus, StatusRequest())
      .Add(FuzzOp::kPush, PushRequest(0, 1, Model(1.0f, 1.0f)))
      .Add(FuzzOp::kLeave, LeaveRequest(1))  // completes step 1
      .Add(FuzzOp::kPush, PushRequest(0, 2, Model(2.0f, -2.0f)))
      .Add(FuzzOp::kShutdown, ShutdownRequest())
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

std::string SyncBackupWorkers() {
  FuzzInputWriter in = Started(Sync(2, 3));
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, Model(0.2f, 0.2f)))
      .Add(FuzzOp::kPush, PushRequest(2, 0, Model(0.3f, 0.3f)))  // surplus
      .Add(FuzzOp::kPush, PushRequest(2, 0, Model(0.3f, 0.3f)))  // twice
      .Add(FuzzOp::kPush, PushRequest(0, 1, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(1, 1, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(0, 2, Model(0.5f, 0.5f)))
      .Add(FuzzOp::kPush, PushRequest(1, 2, Model(0.5f, 0.5f)))
      .Add(FuzzOp::kPush, PushRequest(2, 1, Model(0.3f, 0.3f)))  // stale
      .Add(FuzzOp::kPush, PushRequest(2, 3, Model(0.5f, 0.5f)))
      .Add(FuzzOp::kPush, PushRequest(0, 3, Model(0.5f, 0.5f)))
      .Add(FuzzOp::kPush, PushRequest(1, 3, Model(0.5f, 0.5f)))  // surplus
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

std::string AsyncStaleness() {
  FuzzConfig c = Async(1, true);
  c.sgd = true;
  FuzzInputWriter in = Started(c);
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, Model(0.2f, 0.2f)))  // stale 1
      .Add(FuzzOp::kPush, PushRequest(2, 0, Model(0.3f, 0.3f)))  // bound
      .Add(FuzzOp::kPull, PushRequest(0, 5, {}))  // a push as a pull
      .Add(FuzzOp::kPull, PullRequest(4, 2))
      .Add(FuzzOp::kPush, PushRequest(2, 2, Model(0.3f, 0.3f)))
      .Add(FuzzOp::kPush, PushRequest(0, 3, Model(0.3f, 0.3f)))
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

std::string LeasesAndPulls() {
  FuzzConfig c = Sync(3, 3);
  c.lease = true;
  FuzzInputWriter in = Started(c);
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPull, PullRequest(1, 0))  // worker 0 waits: not expired
      .Add(FuzzOp::kPull, PullRequest(7, -1))
      .Byte(FuzzOp::kExpireWorkers, 0)
      .Byte(FuzzOp::kExpireWorkers, 32)  // 1 and 2 expire: step 1 completes
      .Add(FuzzOp::kPull, PullRequest(9, 1))
      .Byte(FuzzOp::kCancelPull, 1)
      .Add(FuzzOp::kJoin, JoinRequest(1))
      .Add(FuzzOp::kPull, PullRequest(3, -1))
      .Add(FuzzOp::kShutdown, ShutdownRequest())  // ends the waiting pulls
      .Add(FuzzOp::kJoin, JoinRequest(2))
      .Byte(FuzzOp::kExpireWorkers, 255);
  return in.bytes();
}

std::string PullsBeforeInitialize() {
  FuzzInputWriter in(Sync(1, 2));
  in.Add(FuzzOp::kPull, PullRequest(0, -1))
      .Add(FuzzOp::kPull, PullRequest(0, 1))
      .Add(FuzzOp::kJoin, JoinRequest(0))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(1.0f, 1.0f)))  // too early
      .Add(FuzzOp::kInitialize, InitializeRequest(Model(3.0f, 4.0f)))
      .Add(FuzzOp::kInitialize, InitializeRequest(Model(5.0f, 6.0f)))  // again
      .Add(FuzzOp::kInitialize,
           InitializeRequest({Float32("w", {3, 2}, std::vector<float>(6))}))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(1.0f, 1.0f)));
  return in.bytes();
}

// One refusal of each kind, on a started sync shard.
std::string Refusals() {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  FuzzInputWriter in = Started(Sync(2, 2));
  Tensors half = Model(0.1f, 0.1f);
  half[0].set_dtype(ps::wire::DT_FLOAT16);
  Tensors unspecified = Model(0.1f, 0.1f);
  unspecified[1].set_dtype(ps::wire::DATA_TYPE_UNSPECIFIED);
  Tensors short_data = Model(0.1f, 0.1f);
  short_data[0].mutable_data()->resize(23);
  Tensors nan = Model(0.1f, 0.1f);
  nan[1] = Float32("b", {2}, {0.0f, kNaN});
  Tensors inf = Model(0.1f, 0.1f);
  inf[0] = Float32("w", {2, 3}, {0, 0, 0, 0, 0, -kInf});
  Tensors wrong_shape = Model(0.1f, 0.1f);
  wrong_shape[0] = Float32("w", {3, 2}, std::vector<float>(6, 0.1f));
  Tensors unknown = Model(0.1f, 0.1f);
  unknown.push_back(Float32("u", {1}, {1.0f}));
  Tensors twice = Model(0.1f, 0.1f);
  twice[1] = Float32("w", {2, 3}, std::vector<float>(6, 0.1f));
  Tensors zero_dim = Model(0.1f, 0.1f);
  zero_dim[1] = Float32("b", {0, 2}, {});
  ps::wire::PushRequest other_cluster = PushRequest(0, 0, Model(0.1f, 0.1f));
  other_cluster.set_cluster("fuzzy");
  in.Add(FuzzOp::kPush, PushRequest(0, 0, half))
      .Add(FuzzOp::kPush, PushRequest(0, 0, unspecified))
      .Add(FuzzOp::kPush, PushRequest(0, 0, short_data))
      .Add(FuzzOp::kPush, PushRequest(0, 0, nan))
      .Add(FuzzOp::kPush, PushRequest(0, 0, inf))
      .Add(FuzzOp::kPush, PushRequest(0, 0, wrong_shape))
      .Add(FuzzOp::kPush, PushRequest(0, 0, unknown))
      .Add(FuzzOp::kPush, PushRequest(0, 0, twice))
      .Add(FuzzOp::kPush, PushRequest(0, 0, zero_dim))
      .Add(FuzzOp::kPush, PushRequest(0, 0, {Model(0.1f, 0.1f)[0]}))
      .Add(FuzzOp::kPush, other_cluster)
      .Add(FuzzOp::kPush, PushRequest(0, -1, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(0, 1, Model(0.1f, 0.1f)))  // future
      .Add(FuzzOp::kPush, PushRequest(5, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPush, PushRequest(-1, 0, Model(0.1f, 0.1f)))
      .Add(FuzzOp::kPull, PullRequest(-3, 0))
      .Add(FuzzOp::kPull, PullRequest(0, 7))
      .Add(FuzzOp::kJoin, JoinRequest(2))
      .Add(FuzzOp::kLeave, LeaveRequest(-2))
      .Add(FuzzOp::kInitialize, InitializeRequest({Float32("", {1}, {1.0f})}))
      .Add(FuzzOp::kInitialize, InitializeRequest(nan))
      .Add(FuzzOp::kInitialize, InitializeRequest({}))
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

// Gradients at and beyond the largest magnitude a shard takes
// (kMaxGradientMagnitude): those beyond once turned Adam's v to Inf and a
// sync sum to Inf (the fuzzer's first finding).
std::string LargeGradients() {
  FuzzInputWriter in = Started(Sync(2, 2));
  in.Add(FuzzOp::kPush, PushRequest(0, 0, Model(3.0e38f, 1e20f)))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(0.2f, 2.9e32f)))
      .Add(FuzzOp::kPush, PushRequest(0, 0, Model(1e18f, -1e18f)))
      .Add(FuzzOp::kPush, PushRequest(1, 0, Model(1e18f, -1e18f)))
      .Add(FuzzOp::kPush, PushRequest(0, 1, Model(-1e18f, 1e18f)))
      .Add(FuzzOp::kPush, PushRequest(1, 1, Model(-1e18f, 1e18f)))
      .Add(FuzzOp::kStatus, StatusRequest());
  return in.bytes();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> SeedInputs() {
  return {
      {"seed_sync_rounds", SyncRounds()},
      {"seed_sync_backup_workers", SyncBackupWorkers()},
      {"seed_async_staleness", AsyncStaleness()},
      {"seed_leases_and_pulls", LeasesAndPulls()},
      {"seed_pulls_before_initialize", PullsBeforeInitialize()},
      {"seed_refusals", Refusals()},
      {"seed_large_gradients", LargeGradients()},
  };
}

}  // namespace fuzz
}  // namespace psgd
