// The run of a worker task (TaskRun) over in-process shards, driven as a
// front end drives it: the chief's run to max_steps with its evaluations,
// records and end (the servers shut down), a second worker's run beside
// it, a worker asked to leave (SIGTERM's request) leaving the shard's live
// set, and the order of the calls (Finish after Leave).
#include "worker/session/task_run.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ps/shard/shard.h"
#include "ps/state/placement.h"
#include "ps/testing/in_process_client.h"
#include "worker/session/leave_request.h"

namespace psgd {
namespace {

// One shard of variables "w" (4) and "b" (2), sync N of M = `workers` (N =
// M unless given).
struct Cluster {
  explicit Cluster(int workers, int n = 0) {
    specs = {{"w", {4}, Initializer::Constant(0.5f)},
             {"b", {2}, Initializer::Constant(0.25f)}};
    auto p = ps::PlaceVariables(specs, 1, 1024);
    REQUIRE(p.ok());
    ps::ShardOptions o;
    o.replicas_to_aggregate = n > 0 ? n : workers;
    o.total_num_replicas = workers;
    auto s = ps::ParameterShard::Create(o);
    REQUIRE(s.ok());
    shard = *std::move(s);
    for (int w = 0; w < workers; ++w) {
      auto c = ps::InProcessPsClient::Create({shard.get()}, *p, "psgd", w);
      REQUIRE(c.ok());
      clients.push_back(*std::move(c));
    }
  }
  std::vector<VariableSpec> specs;
  std::unique_ptr<ps::ParameterShard> shard;
  std::vector<std::unique_ptr<ps::InProcessPsClient>> clients;
};

// A front end with made-up gradients: what ClusterWorker and
// ExternalWorker do around the run, without a model.
struct Worker {
  Worker(Cluster* cluster, int id, int64_t max_steps, int64_t eval_every) {
    TaskRunOptions o;
    o.name = "worker:" + std::to_string(id);
    o.ends.max_steps = max_steps;
    o.log_every = 0;
    o.chief = id == 0;
    o.chief_options.eval_every = eval_every;
    o.chief_options.finish_timeout = absl::Seconds(30);
    RunCallbacks callbacks;
    callbacks.on_step = [this](const StepRecord& r) {
      steps.push_back(r);
      if (leave_after > 0 && static_cast<int>(steps.size()) == leave_after) {
        RequestLeave();  // as SIGTERM does
      }
      return absl::OkStatus();
    };
    callbacks.on_eval = [this](const EvalRecord& e) {
      evals.push_back(e);
      return absl::OkStatus();
    };
    run = std::make_unique<TaskRun>(o, callbacks);
    SessionOptions s;
    s.worker_id = id;
    s.sync = true;
    session = std::make_unique<WorkerSession>(
        cluster->clients[id].get(), cluster->specs,
        std::vector<ps::NamedTensorView>{{"w", w.view()}, {"b", b.view()}}, s);
  }

  // Start, steps until the run stops, Leave, Finish; the stop reason.
  std::string Run() {
    std::vector<ps::NamedConstTensorView> initial = {{"w", w.view()},
                                                     {"b", b.view()}};
    REQUIRE(run->Start(std::move(session), initial).ok());
    std::string stop;
    for (;;) {
      absl::StatusOr<TaskRun::Next> next = run->BeforeStep();
      REQUIRE(next.ok());
      if (!next->stop.empty()) {
        stop = next->stop;
        break;
      }
      const int64_t at = GlobalStep(run->session()->version());
      if (next->evaluate) {
        EvalRecord e;
        e.global_step = at;
        e.test_accuracy = 0.5;
        REQUIRE(run->RecordEval(e).ok());
        run->Evaluated(at);
      }
      for (float& x : gw.span()) x = 0.1f;
      for (float& x : gb.span()) x = 0.2f;
      absl::StatusOr<PushOutcome> pushed =
          run->session()->Push({{"w", gw.view()}, {"b", gb.view()}});
      REQUIRE(pushed.ok());
      REQUIRE(run->session()->PullAfterPush(*pushed).ok());
      StepRecord r;
      r.global_step = at;
      r.batch_size = 8;
      r.outcome = pushed->outcome;
      StepTimings t;
      t.begin = t.batch_ready = t.computed = t.pushed = t.pulled = absl::Now();
      REQUIRE(run->RecordStep(&r, t, r.local_step + 1).ok());
    }
    REQUIRE(run->Leave().ok());
    REQUIRE(run->Finish(stop).ok());
    return stop;
  }

  Tensor w{Shape{4}}, b{Shape{2}}, gw{Shape{4}}, gb{Shape{2}};
  std::unique_ptr<TaskRun> run;
  std::unique_ptr<WorkerSession> session;
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
  int leave_after = 0;  // > 0: asked to leave after this many steps
};

TEST_CASE("task run: the chief's run to max_steps, with its evaluations") {
  Cluster cluster(1);
  Worker chief(&cluster, 0, /*max_steps=*/5, /*eval_every=*/2);
  CHECK(chief.Run() == "reached step 5");
  const ClusterWorkerResult& r = chief.run->result();
  CHECK(r.local_steps == 5);
  CHECK(r.final_global_step == 5);
  CHECK(r.end_reason == "reached step 5");
  CHECK(r.outcomes.at(StepOutcome::kApplied) == 5);
  // Every step reported, numbered in order.
  REQUIRE(chief.steps.size() == 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(chief.steps[i].local_step == i + 1);
    CHECK(chief.steps[i].global_step == i);
  }
  // Evaluations at steps 2 and 4, kept in the result and reported.
  REQUIRE(chief.evals.size() == 2);
  CHECK(chief.evals[0].global_step == 2);
  CHECK(chief.evals[1].global_step == 4);
  CHECK(r.evals.size() == 2);
  // The chief shut the servers down at the end, with their statuses.
  REQUIRE(r.server_status.size() == 1);
  CHECK(r.server_status[0].step == 5);
  CHECK(cluster.shard->AwaitShutdown(absl::InfinitePast()));
}

TEST_CASE("task run: a second worker stops with the chief's servers") {
  Cluster cluster(2);
  Worker chief(&cluster, 0, /*max_steps=*/4, /*eval_every=*/0);
  Worker other(&cluster, 1, /*max_steps=*/4, /*eval_every=*/0);
  std::string other_stop;
  std::thread t([&] { other_stop = other.Run(); });
  CHECK(chief.Run() == "reached step 4");
  t.join();
  CHECK(other_stop == "reached step 4");
  CHECK(other.run->result().local_steps == 4);
  // Only the chief evaluates and shuts down; the other's result has none.
  CHECK(other.evals.empty());
  CHECK(other.run->result().server_status.empty());
  CHECK(chief.run->result().server_status.size() == 1);
  CHECK(cluster.shard->Status().counters.applied == 4);
}

TEST_CASE(
    "task run: a worker asked to leave stops at a step boundary and "
    "leaves the servers' live set") {
  ResetLeaveRequestForTesting();
  // N = 1 of 2: worker:1's steps apply alone while the chief, joined and
  // initialised, pushes nothing.
  Cluster cluster(2, /*n=*/1);
  Worker chief(&cluster, 0, /*max_steps=*/100, /*eval_every=*/0);
  Worker other(&cluster, 1, /*max_steps=*/100, /*eval_every=*/0);
  other.leave_after = 3;
  std::vector<ps::NamedConstTensorView> initial = {{"w", chief.w.view()},
                                                   {"b", chief.b.view()}};
  // Each Start waits for the other's Join.
  absl::Status chief_started;
  std::thread t([&] {
    chief_started = chief.run->Start(std::move(chief.session), initial);
  });
  CHECK(other.Run() == kLeaveRequested);
  ResetLeaveRequestForTesting();
  t.join();
  REQUIRE(chief_started.ok());
  CHECK(other.run->result().local_steps == 3);
  CHECK(other.run->result().end_reason == kLeaveRequested);
  // The shard's own record: worker:1 is out of the live set by its Leave
  // (this shard has no lease to run out), and only its 3 steps applied.
  const ps::ShardStatus after = cluster.shard->Status();
  CHECK(after.live_workers == std::vector<int>{0});
  CHECK(after.workers_expired == 0);
  CHECK(after.counters.applied == 3);
  // The chief, not asked to leave, ends the job without waiting for it.
  REQUIRE(chief.run->Leave().ok());
  REQUIRE(chief.run->Finish("done").ok());
  CHECK(cluster.shard->AwaitShutdown(absl::InfinitePast()));
}

TEST_CASE("task run: Finish comes after Leave") {
  Cluster cluster(1);
  Worker chief(&cluster, 0, 1, 0);
  std::vector<ps::NamedConstTensorView> initial = {{"w", chief.w.view()},
                                                   {"b", chief.b.view()}};
  REQUIRE(chief.run->Start(std::move(chief.session), initial).ok());
  absl::Status s = chief.run->Finish("early");
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message() == "Finish comes after Leave");
}

}  // namespace
}  // namespace psgd
