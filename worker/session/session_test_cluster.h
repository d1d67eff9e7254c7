// For the worker session's tests: parameter shards in this process, one
// in-process client per worker, and each worker's weight and gradient
// buffers for the variables `specs` (their constant initializers are the
// initial values).
//
//   SessionTestCluster c(specs, ps::Mode::kSync, /*workers=*/2);
//   WorkerSession s(c.clients[0].get(), c.specs, c.Buffers(0), options);
//   s.Initialize(c.Initial());
//
// Thread-safety: set up on one thread; each worker's buffers are then its
// own.
#ifndef PSGD_WORKER_SESSION_SESSION_TEST_CLUSTER_H_
#define PSGD_WORKER_SESSION_SESSION_TEST_CLUSTER_H_

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/model_variables.h"
#include "common/tensor.h"
#include "ps/shard/shard.h"
#include "ps/state/placement.h"
#include "ps/testing/in_process_client.h"

namespace psgd {

struct SessionTestCluster {
  // Two shards (the first variable split over both), sync N = M = workers
  // or async.
  SessionTestCluster(std::vector<VariableSpec> variables, ps::Mode mode,
                     int workers, std::string checkpoint_dir = "",
                     absl::Duration worker_lease = absl::ZeroDuration())
      : specs(std::move(variables)) {
    auto p = ps::PlaceVariables(specs, 2, 1024);
    REQUIRE(p.ok());
    std::vector<ps::ParameterShard*> raw;
    for (int i = 0; i < 2; ++i) {
      ps::ShardOptions o;
      o.shard_index = i;
      o.num_shards = 2;
      o.mode = mode;
      o.replicas_to_aggregate = mode == ps::Mode::kSync ? workers : 1;
      o.total_num_replicas = workers;
      o.checkpoint.dir = checkpoint_dir;
      o.worker_lease = worker_lease;
      auto shard = ps::ParameterShard::Create(o);
      REQUIRE(shard.ok());
      raw.push_back(shard->get());
      shards.push_back(*std::move(shard));
    }
    for (int w = 0; w < workers; ++w) {
      auto c = ps::InProcessPsClient::Create(raw, *p, "psgd", w);
      REQUIRE(c.ok());
      clients.push_back(*std::move(c));
      weights.push_back(Tensors());
      gradients.push_back(Tensors());
    }
  }

  std::vector<Tensor> Tensors() const {
    std::vector<Tensor> t;
    for (const VariableSpec& s : specs) t.emplace_back(s.shape);
    return t;
  }
  // Worker w's weight buffers, for its session's pulls.
  std::vector<ps::NamedTensorView> Buffers(int w) {
    std::vector<ps::NamedTensorView> v;
    for (size_t i = 0; i < specs.size(); ++i) {
      v.push_back({specs[i].name, weights[w][i].view()});
    }
    return v;
  }
  // Worker w's gradients, every element `value`.
  std::vector<ps::NamedConstTensorView> Gradients(int w, float value) {
    std::vector<ps::NamedConstTensorView> v;
    for (size_t i = 0; i < specs.size(); ++i) {
      for (float& x : gradients[w][i].span()) x = value;
      v.push_back({specs[i].name, gradients[w][i].view()});
    }
    return v;
  }
  // The initial values: each variable's constant.
  std::vector<ps::NamedConstTensorView> Initial() {
    initial = Tensors();
    std::vector<ps::NamedConstTensorView> v;
    for (size_t i = 0; i < specs.size(); ++i) {
      for (float& x : initial[i].span()) x = specs[i].init.value;
      v.push_back({specs[i].name, initial[i].view()});
    }
    return v;
  }
  ps::PushCounters Counters(int shard) const {
    return shards[shard]->Status().counters;
  }

  std::vector<VariableSpec> specs;
  std::vector<std::unique_ptr<ps::ParameterShard>> shards;
  std::vector<std::unique_ptr<ps::PsClient>> clients;
  std::vector<std::vector<Tensor>> weights, gradients;
  std::vector<Tensor> initial;
};

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_SESSION_TEST_CLUSTER_H_
