// The worker loop under faults, over in-process shards (no sockets, so it
// runs under ThreadSanitizer), with the linear model: lost replies, dropped
// calls and duplicated pushes (every gradient counts once), a worker cut off
// (its lease runs out, the others go on, it ends with a clear error, or
// joins again when its link comes back), and a rollback of the cluster to a
// checkpoint in the middle of a run.
#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <vector>

#include "common/cluster_config.h"
#include "common/testing/eventually.h"
#include "ps/testing/fault_injection_client.h"
#include "worker/cluster/cluster_test_util.h"
#include "worker/session/resync.h"

namespace psgd {
namespace {

using testing::ClusterRun;
using testing::ClusterSetup;
using testing::RunCluster;

// Wrappers of every worker's client, owned by the test.
struct Network {
  ps::FaultInjector injector{/*seed=*/11, /*hold_timeout=*/absl::Seconds(60)};
  std::vector<std::unique_ptr<ps::FaultInjectionPsClient>> clients;

  std::function<ps::PsClient*(int, ps::PsClient*)> Wrap(
      absl::Duration call_timeout = absl::Seconds(60)) {
    clients.resize(8);
    return [this, call_timeout](int w, ps::PsClient* inner) {
      clients[w] = std::make_unique<ps::FaultInjectionPsClient>(
          inner, &injector, w, call_timeout);
      return clients[w].get();
    };
  }
};

bool Live(const ps::ParameterShard& shard, int worker) {
  for (int w : shard.Status().live_workers) {
    if (w == worker) return true;
  }
  return false;
}

ClusterSetup LinearSetup() {
  ClusterSetup setup;
  setup.model = "cifar10_linear";
  setup.eval_every = 0;
  return setup;
}

TEST_CASE(
    "lost replies, dropped calls, duplicates: each gradient counts once") {
  ClusterSetup setup = LinearSetup();
  setup.max_steps = 40;
  // Overlap: pushes in parts (each part a push call) and pulls in groups.
  const bool overlap = GENERATE(false, true);
  INFO("overlap " << overlap);
  setup.adjust = [overlap](int, ClusterWorkerOptions* o) {
    o->overlap = overlap;
  };
  Network net;
  setup.wrap = [&, wrap = net.Wrap()](int w, ps::PsClient* inner) {
    ps::PsClient* c = wrap(w, inner);
    using ps::CallKind;
    using ps::FaultAction;
    for (auto [call, action, p] :
         {std::tuple{CallKind::kPush, FaultAction::kDropReply, 0.1},
          std::tuple{CallKind::kPush, FaultAction::kDuplicate, 0.1},
          std::tuple{CallKind::kPush, FaultAction::kDropRequest, 0.1},
          std::tuple{CallKind::kPull, FaultAction::kDropRequest, 0.05},
          std::tuple{CallKind::kPull, FaultAction::kDropReply, 0.05},
          std::tuple{CallKind::kStatus, FaultAction::kDropRequest, 0.05}}) {
      net.clients[w]->AddRule({call, action, p, 0, /*times=*/-1});
    }
    return c;
  };
  ClusterRun run = RunCluster(setup);

  int64_t delivered = 0, faults = 0, duplicates = 0;
  for (int w = 0; w < setup.workers; ++w) {
    INFO("worker " << w << ": " << run.workers[w].result.status().ToString());
    REQUIRE(run.workers[w].result.ok());
    CHECK(run.workers[w].result->local_steps == setup.max_steps);
    const ps::FaultStats s = net.clients[w]->stats();
    delivered += s.delivered_pushes;
    faults += s.dropped_replies + s.dropped_requests + s.duplicated;
    auto it = run.workers[w].result->outcomes.find(StepOutcome::kDuplicate);
    if (it != run.workers[w].result->outcomes.end()) duplicates += it->second;
  }
  INFO(faults << " faults injected, " << duplicates << " duplicate outcomes");
  CHECK(faults > 0);  // the test is not vacuous
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.step == setup.max_steps);
    // Lockstep, N = M = 3: each step took exactly one gradient per worker,
    // none twice, none dropped; every other delivered push was refused.
    CHECK(s.counters.applied == setup.max_steps);
    CHECK(s.counters.applied + s.counters.aggregated ==
          setup.max_steps * setup.workers);
    CHECK(s.counters.dropped_stale + s.counters.dropped_surplus == 0);
  }
  // Whole pushes: every delivered push but the taken ones was refused by
  // shard 0, which decides them (a part that does not complete its push is
  // neither).
  if (!overlap) {
    CHECK(run.final_status[0].counters.refused ==
          delivered - setup.max_steps * setup.workers);
  }
}

TEST_CASE("a worker cut off: its lease runs out, the others finish, it fails") {
  ClusterSetup setup = LinearSetup();
  setup.max_steps = 30;
  setup.worker_lease = absl::Seconds(1);
  Network net;
  setup.wrap = net.Wrap(/*call_timeout=*/absl::Milliseconds(200));
  setup.adjust = [](int w, ClusterWorkerOptions* o) {
    if (w != 2) return;
    o->ps_unavailable_timeout = absl::Seconds(2);
    o->step_timeout = absl::Seconds(2);
  };
  bool expired = false;  // worker 2 left both shards' live sets
  setup.during = [&](const std::vector<ps::ParameterShard*>& shards) {
    REQUIRE(Eventually(
        [&] { return net.clients[2]->stats().delivered_pushes >= 5; }));
    net.clients[2]->SetCut(ps::CutMode::kHang);  // calls hang to deadlines
    // Every call of worker 2 hangs, a leave included: it can leave the live
    // sets only by its lease running out.
    expired = Eventually(
        [&] { return !Live(*shards[0], 2) && !Live(*shards[1], 2); });
  };
  ClusterRun run = RunCluster(setup);

  const absl::Status cut = run.workers[2].result.status();
  INFO(cut.ToString());
  CHECK((absl::IsDeadlineExceeded(cut) || absl::IsUnavailable(cut)));
  CHECK_THAT(std::string(cut.message()),
             Catch::Contains("ps_unavailable_timeout") &&
                 Catch::Contains("worker 2 is cut off"));
  for (int w : {0, 1}) {
    INFO("worker " << w << ": " << run.workers[w].result.status().ToString());
    REQUIRE(run.workers[w].result.ok());
    CHECK(run.workers[w].result->final_global_step >= setup.max_steps);
  }
  CHECK(expired);
  // Worker 2's lease ran out on shard 0, which expires leases for every
  // shard; on a loaded machine a live worker may miss its 1 s lease too (it
  // joins again), so not exactly one.
  CHECK(run.final_status[0].workers_expired >= 1);
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.step >= setup.max_steps);
  }
}

// A step longer than the servers' lease (a large batch, a loaded machine;
// here an emulated stall of 3 s against a 1.5 s lease on every step of
// worker 1; the keeper renews within two of its 0.5 s periods) does not
// take the worker out of the live set: it keeps its lease while it
// computes, every push counts, no step is computed again.
TEST_CASE("a step longer than the lease keeps the worker live") {
  ClusterSetup setup = LinearSetup();
  setup.max_steps = 3;
  setup.worker_lease = absl::Milliseconds(1500);
  absl::StatusOr<ClusterConfig> stalls = ParseClusterConfig(
      R"(name: "s"
         ps { address: "127.0.0.1:5000" }
         worker { address: "127.0.0.1:6000" }
         worker { address: "127.0.0.1:6001" }
         worker { address: "127.0.0.1:6002" }
         training { steps: 3 }
         data { source: SYNTHETIC }
         model { name: "cifar10_linear" }
         stragglers { workers: 1 stall_probability: 1 stall_seconds: 3 })",
      "stalls.pbtxt");
  REQUIRE(stalls.ok());
  setup.adjust = [&](int w, ClusterWorkerOptions* o) {
    o->stragglers = StragglerEmulator::ForWorker(*stalls, w);
  };
  ClusterRun run = RunCluster(setup);
  for (int w = 0; w < 3; ++w) {
    INFO("worker " << w << ": " << run.workers[w].result.status().ToString());
    REQUIRE(run.workers[w].result.ok());
    CHECK(run.workers[w].result->final_global_step >= setup.max_steps);
  }
  // Every step of worker 1 stalled past the lease, yet it never left.
  CHECK(run.workers[1].result->local_steps == setup.max_steps);
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.workers_expired == 0);
    CHECK(s.step == setup.max_steps);
  }
}

TEST_CASE("a worker cut off joins again when its link comes back") {
  ClusterSetup setup = LinearSetup();
  setup.max_steps = 40;
  setup.worker_lease = absl::Seconds(5);
  Network net;
  auto wrap = net.Wrap();
  setup.wrap = [&, wrap](int w, ps::PsClient* inner) {
    ps::PsClient* c = wrap(w, inner);
    // Workers 0 and 1 wait at the gate while the test holds it closed.
    if (w != 2) {
      net.clients[w]->AddRule(
          {ps::CallKind::kPush, ps::FaultAction::kGate, 1.0, 0, /*times=*/-1});
    }
    return c;
  };
  setup.during = [&](const std::vector<ps::ParameterShard*>& shards) {
    REQUIRE(Eventually(
        [&] { return net.clients[2]->stats().delivered_pushes >= 5; }));
    net.clients[2]->SetCut(ps::CutMode::kFail);
    REQUIRE(Eventually([&] { return net.clients[2]->stats().cut_calls >= 1; }));
    // The others' next pushes wait until worker 2 is back, so that it
    // rejoins before they can finish without it.
    net.injector.CloseGate();
    REQUIRE(Eventually(
        [&] { return !Live(*shards[0], 2) && !Live(*shards[1], 2); }));
    net.clients[2]->SetCut(ps::CutMode::kNone);
    REQUIRE(
        Eventually([&] { return Live(*shards[0], 2) && Live(*shards[1], 2); }));
    net.injector.OpenGate();
  };
  ClusterRun run = RunCluster(setup);

  for (int w = 0; w < setup.workers; ++w) {
    INFO("worker " << w << ": " << run.workers[w].result.status().ToString());
    REQUIRE(run.workers[w].result.ok());
  }
  const ClusterWorkerResult& back = *run.workers[2].result;
  CHECK(back.recoveries >= 1);
  CHECK(back.final_global_step >= setup.max_steps);
  // It trained on to the end, after the steps the others made without it.
  CHECK(run.workers[2].steps.back().global_step >= setup.max_steps - 1);
  // Worker 2's expiry on shard 0 (awaited above while it was cut off);
  // another worker that missed its lease on a loaded machine joins again.
  CHECK(run.final_status[0].workers_expired >= 1);
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.step == setup.max_steps);
  }
}

TEST_CASE("a rollback mid-run: every worker re-syncs and the run ends") {
  ClusterSetup setup = LinearSetup();
  setup.max_steps = 40;
  // Overlap: a push is two parts and, with two shards, the commit to shard
  // 0: three calls, so the gate waits for three times as many.
  const bool overlap = GENERATE(false, true);
  INFO("overlap " << overlap);
  setup.adjust = [overlap](int, ClusterWorkerOptions* o) {
    o->overlap = overlap;
  };
  setup.checkpoint_dir = std::string(std::getenv("TEST_TMPDIR")) +
                         (overlap ? "/rollback-overlap" : "/rollback");
  setup.checkpoint_every_steps = 5;
  // Every worker's 13th push and later wait while the gate is closed: the
  // rollback comes while they are in the middle of the run.
  Network net;
  net.injector.CloseGate();
  setup.wrap = [&, wrap = net.Wrap()](int w, ps::PsClient* inner) {
    ps::PsClient* c = wrap(w, inner);
    net.clients[w]->AddRule({ps::CallKind::kPush, ps::FaultAction::kGate, 1.0,
                             /*skip=*/overlap ? 36 : 12, /*times=*/-1});
    return c;
  };
  setup.during = [&](const std::vector<ps::ParameterShard*>& shards) {
    // Step-10 is complete (both shards' files are written).
    REQUIRE(Eventually([&] {
      return std::filesystem::exists(setup.checkpoint_dir +
                                     "/step-10/MANIFEST");
    }));
    // And the run is past step 12, which every worker's ungated pushes
    // complete (the gate holds the 13th and later): the rollback then
    // redoes at least two steps, however fast the checkpoint was seen.
    REQUIRE(Eventually([&] {
      for (ps::ParameterShard* s : shards) {
        if (s->Status().step < 12) return false;
      }
      return true;
    }));
    // What a worker does when a restarted shard restored step-10.
    for (ps::ParameterShard* s : shards) {
      auto r = s->Rollback(10, 2);
      INFO(r.status().ToString());
      REQUIRE(r.ok());
      // With overlap the workers' pulls are not held by the gate: one that
      // finds shard 0 rolled back repeats the rollback on shard 1 itself,
      // and this call finds it done.
      if (overlap) {
        CHECK(r->generation == 2);
      } else {
        CHECK(r->rolled_back);
      }
    }
    net.injector.OpenGate();
  };
  ClusterRun run = RunCluster(setup);

  for (int w = 0; w < setup.workers; ++w) {
    INFO("worker " << w << ": " << run.workers[w].result.status().ToString());
    REQUIRE(run.workers[w].result.ok());
    CHECK(run.workers[w].result->recoveries >= 1);
    CHECK(run.workers[w].result->final_global_step >= setup.max_steps);
  }
  for (const ps::ShardStatus& s : run.final_status) {
    CHECK(s.generation == 2);
    CHECK(s.step == setup.max_steps);
    // The counters are those of the history that was kept.
    CHECK(s.counters.applied == setup.max_steps);
  }
  const RollbackSummary rollbacks = SummarizeRollbacks(run.final_status);
  CHECK(rollbacks.rollbacks == 1);
  CHECK(rollbacks.max_steps_redone >= 2);
}

}  // namespace
}  // namespace psgd
