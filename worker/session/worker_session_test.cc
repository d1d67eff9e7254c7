// The worker session on its own, with no model: sessions over in-process
// shards push made-up gradients and pull, and its recovery is driven
// through the fault-injection client (a lost reply, a worker out of the live
// set, a rollback under it, servers that stay away, a step that never comes
// while they answer, servers shut down).
#include "worker/session/worker_session.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status_macros.h"
#include "ps/shard/shard.h"
#include "ps/state/placement.h"
#include "ps/testing/fault_injection_client.h"
#include "ps/testing/in_process_client.h"
#include "worker/session/chief.h"
#include "worker/session/lease_keeper.h"
#include "worker/session/session_test_cluster.h"

namespace psgd {
namespace {

// Two shards, variables "w" (split over both) and "b"; one client per
// worker, and each worker's weight buffers.
struct Cluster : SessionTestCluster {
  explicit Cluster(ps::Mode mode, int workers, std::string checkpoint_dir = "",
                   absl::Duration worker_lease = absl::ZeroDuration())
      : SessionTestCluster({{"w", {64, 8}, Initializer::Constant(0.5f)},
                            {"b", {8}, Initializer::Constant(0.25f)}},
                           mode, workers, std::move(checkpoint_dir),
                           worker_lease) {}
};

SessionOptions Options(int worker, bool sync) {
  SessionOptions o;
  o.worker_id = worker;
  o.sync = sync;
  o.start_timeout = absl::Seconds(30);
  o.step_timeout = absl::Seconds(30);
  o.ps_unavailable_timeout = absl::Seconds(30);
  return o;
}

// The first call of `call` passes; the second waits while the injector's
// gate is closed (a test opens it once what it waits for has happened).
ps::FaultRule SecondAtGate(ps::CallKind call) {
  ps::FaultRule rule;
  rule.call = call;
  rule.action = ps::FaultAction::kGate;
  rule.skip = 1;
  return rule;
}

bool Live(const ps::ParameterShard& shard, int worker) {
  for (int w : shard.Status().live_workers) {
    if (w == worker) return true;
  }
  return false;
}

TEST_CASE("sync: two sessions step together and the pulls see each step") {
  const bool overlap = GENERATE(false, true);
  INFO("overlap " << overlap);
  Cluster c(ps::Mode::kSync, 2);
  std::vector<std::unique_ptr<WorkerSession>> s;
  for (int w = 0; w < 2; ++w) {
    SessionOptions o = Options(w, /*sync=*/true);
    o.overlap = overlap;
    s.push_back(std::make_unique<WorkerSession>(c.clients[w].get(), c.specs,
                                                c.Buffers(w), o));
  }
  REQUIRE(s[0]->Initialize(c.Initial()).ok());
  std::vector<std::thread> threads;
  std::vector<std::vector<StepOutcome>> outcomes(2);
  std::vector<absl::Status> errors(2);
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      errors[w] = [&]() -> absl::Status {
        RETURN_IF_ERROR(s[w]->Start());
        for (int step = 0; step < 3; ++step) {
          for (int v = 0; v < 2; ++v) RETURN_IF_ERROR(s[w]->AwaitWeights(v));
          std::vector<ps::NamedConstTensorView> g = c.Gradients(w, 0.1f);
          absl::StatusOr<PushOutcome> o;
          if (overlap) {
            for (const auto& part : g) s[w]->AddPart(part);
            o = s[w]->FinishParts(g);
          } else {
            o = s[w]->Push(g);
          }
          RETURN_IF_ERROR(o.status());
          outcomes[w].push_back(o->outcome);
          RETURN_IF_ERROR(s[w]->PullAfterPush(*o));
        }
        RETURN_IF_ERROR(s[w]->SettlePulls());
        return s[w]->Leave();
      }();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int w = 0; w < 2; ++w) {
    INFO("worker " << w << ": " << errors[w].ToString());
    REQUIRE(errors[w].ok());
    CHECK(GlobalStep(s[w]->version()) == 3);
    CHECK(NewestStep(s[w]->version()) == 3);
  }
  // Each step, on each shard: one gradient completed it, the other joined
  // its aggregate. Which worker's completed it may differ between the two
  // shards (the pushes race), so a worker sees kApplied when it completed
  // the step on any shard: at least one of the two does, each step.
  for (int step = 0; step < 3; ++step) {
    int applied = 0;
    for (int w = 0; w < 2; ++w) {
      const StepOutcome o = outcomes[w][step];
      CHECK((o == StepOutcome::kApplied || o == StepOutcome::kAggregated));
      applied += o == StepOutcome::kApplied;
    }
    CHECK(applied >= 1);
  }
  for (int i = 0; i < 2; ++i) {
    INFO("shard " << i);
    CHECK(c.Counters(i).applied == 3);
    CHECK(c.Counters(i).aggregated == 3);
  }
  // Both workers hold the weights of step 3, and they moved.
  for (int i = 0; i < 2; ++i) {
    CHECK(c.weights[0][i].span()[0] == c.weights[1][i].span()[0]);
  }
  CHECK(c.weights[0][0].span()[0] != 0.5f);
}

TEST_CASE(
    "sync: a session waiting for a step stays live while shard 0 waits for "
    "a dead worker's lease") {
  const absl::Duration lease = absl::Seconds(3);
  Cluster c(ps::Mode::kSync, 2, "", lease);
  WorkerSession s(c.clients[0].get(), c.specs, c.Buffers(0),
                  Options(0, /*sync=*/true));
  REQUIRE(s.Initialize(c.Initial()).ok());
  REQUIRE(c.clients[1]->Join().ok());  // before Start, which awaits it
  REQUIRE(s.Start().ok());
  // Worker 1 dies in the middle of its push of step 0: it reached shard 1
  // only, and was never committed.
  auto placement = ps::PlaceVariables(c.specs, 2, 1024);
  REQUIRE(placement.ok());
  std::vector<std::vector<float>> values;
  std::vector<ps::TensorBytes> half;
  const std::vector<VariableSpec> on_shard1 = placement->ShardVariables(1);
  for (const VariableSpec& v : on_shard1) {
    values.emplace_back(NumElements(v.shape), 0.1f);
  }
  for (size_t i = 0; i < on_shard1.size(); ++i) {
    half.push_back(ps::FloatTensorBytes(on_shard1[i].name, on_shard1[i].shape,
                                        values[i].data()));
  }
  REQUIRE(c.shards[1]->Push(1, 0, half).ok());
  // Worker 0's push is the only one of step 0 that shard 0 decides: the
  // step waits for worker 1's gradient, which never comes.
  absl::StatusOr<PushOutcome> pushed = s.Push(c.Gradients(0, 0.1f));
  REQUIRE(pushed.ok());
  absl::Status pulled;
  std::thread waiting([&] { pulled = s.PullAfterPush(*pushed); });
  // A lease and a half later: worker 1 is silent; worker 0 waits in its
  // pulls. Only shard 0 expires leases.
  absl::SleepFor(lease + lease / 6);
  CHECK(c.shards[1]->ExpireWorkers(absl::Now()).empty());
  CHECK(Live(*c.shards[1], 1));
  // Shard 0 lets worker 1 go: step 0 completes with worker 0's gradient on
  // both shards, and shard 1 learns that worker 1 left.
  CHECK(c.shards[0]->ExpireWorkers(absl::Now()) == std::vector<int>{1});
  waiting.join();
  INFO(pulled.ToString());
  REQUIRE(pulled.ok());
  CHECK(GlobalStep(s.version()) == 1);
  CHECK(NewestStep(s.version()) == 1);
  CHECK(c.shards[0]->Status().workers_expired == 1);
  CHECK(c.shards[1]->Status().workers_expired == 0);
  CHECK_FALSE(Live(*c.shards[1], 1));
  CHECK(Live(*c.shards[1], 0));
}

TEST_CASE("async: each push applies on arrival with its staleness") {
  Cluster c(ps::Mode::kAsync, 2);
  WorkerSession a(c.clients[0].get(), c.specs, c.Buffers(0), Options(0, false));
  WorkerSession b(c.clients[1].get(), c.specs, c.Buffers(1), Options(1, false));
  REQUIRE(a.Initialize(c.Initial()).ok());
  // Each waits at step 0 until both joined: they start side by side.
  absl::Status b_started;
  std::thread start_b([&] { b_started = b.Start(); });
  const absl::Status a_started = a.Start();
  start_b.join();
  REQUIRE(a_started.ok());
  REQUIRE(b_started.ok());
  // a pushes twice while b computes from step 0: b's gradient is 2 stale.
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<PushOutcome> o = a.Push(c.Gradients(0, 0.1f));
    REQUIRE(o.ok());
    CHECK(o->outcome == StepOutcome::kApplied);
    REQUIRE(a.PullAfterPush(*o).ok());
  }
  absl::StatusOr<PushOutcome> o = b.Push(c.Gradients(1, 0.1f));
  REQUIRE(o.ok());
  CHECK(o->outcome == StepOutcome::kApplied);
  CHECK(o->staleness == 2);
  REQUIRE(b.PullAfterPush(*o).ok());
  CHECK(GlobalStep(b.version()) == 3);
}

TEST_CASE("recovery: a push whose reply was lost is sent again, counted once") {
  Cluster c(ps::Mode::kSync, 1);
  ps::FaultInjector network(/*seed=*/3);
  ps::FaultInjectionPsClient faulty(c.clients[0].get(), &network, 0);
  WorkerSession s(&faulty, c.specs, c.Buffers(0), Options(0, true));
  REQUIRE(s.Initialize(c.Initial()).ok());
  REQUIRE(s.Start().ok());
  faulty.AddRule({ps::CallKind::kPush, ps::FaultAction::kDropReply});
  absl::StatusOr<PushOutcome> o = s.Push(c.Gradients(0, 0.1f));
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  // The first send completed the step; the copy after the recovery was
  // refused as one.
  CHECK(o->outcome == StepOutcome::kDuplicate);
  CHECK(s.recovery().recoveries() == 1);
  REQUIRE(s.PullAfterPush(*o).ok());
  CHECK(GlobalStep(s.version()) == 1);
  for (int shard = 0; shard < 2; ++shard) {
    CHECK(c.Counters(shard).applied == 1);
  }
}

TEST_CASE("recovery: a worker out of the live set joins again") {
  Cluster c(ps::Mode::kSync, 1);
  WorkerSession s(c.clients[0].get(), c.specs, c.Buffers(0), Options(0, true));
  REQUIRE(s.Initialize(c.Initial()).ok());
  REQUIRE(s.Start().ok());
  // As if its lease had run out.
  REQUIRE(c.clients[0]->Leave().ok());
  REQUIRE_FALSE(Live(*c.shards[0], 0));
  absl::StatusOr<PushOutcome> o = s.Push(c.Gradients(0, 0.1f));
  REQUIRE(o.ok());
  CHECK(o->outcome == StepOutcome::kRejoined);
  CHECK(Live(*c.shards[0], 0));
  CHECK(Live(*c.shards[1], 0));
  // After a rejoin the pull does not wait for a step.
  REQUIRE(s.PullAfterPush(*o).ok());
  CHECK(GlobalStep(s.version()) == 0);
}

TEST_CASE("recovery: a gradient computed before a rollback is dropped") {
  const std::string dir =
      (std::filesystem::temp_directory_path() / "worker_session_test_rb")
          .string();
  std::filesystem::remove_all(dir);
  Cluster c(ps::Mode::kSync, 1, dir);
  WorkerSession s(c.clients[0].get(), c.specs, c.Buffers(0), Options(0, true));
  REQUIRE(s.Initialize(c.Initial()).ok());
  REQUIRE(s.Start().ok());
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<PushOutcome> o = s.Push(c.Gradients(0, 0.1f));
    REQUIRE(o.ok());
    REQUIRE(s.PullAfterPush(*o).ok());
  }
  REQUIRE(GlobalStep(s.version()) == 2);
  const int64_t generation = s.version().generation;
  // Another worker rolls the cluster back to the initial checkpoint.
  c.shards[0]->FlushCheckpoints();
  c.shards[1]->FlushCheckpoints();
  const absl::Status rolled = c.clients[0]->Rollback(0, generation + 1);
  INFO("generation " << generation << ": " << rolled.ToString());
  REQUIRE(rolled.ok());
  absl::StatusOr<PushOutcome> o = s.Push(c.Gradients(0, 0.1f));
  INFO(o.status().ToString());
  REQUIRE(o.ok());
  CHECK(o->outcome == StepOutcome::kRolledBack);
  CHECK(o->generation == generation + 1);
  REQUIRE(s.PullAfterPush(*o).ok());
  CHECK(s.version().generation == generation + 1);
  CHECK(GlobalStep(s.version()) == 0);
  CHECK(c.weights[0][1].span()[0] == 0.25f);  // the initial values again
  std::filesystem::remove_all(dir);
}

TEST_CASE("recovery gives up after ps_unavailable_timeout, naming it") {
  Cluster c(ps::Mode::kSync, 1);
  ps::FaultInjector network(/*seed=*/5);
  ps::FaultInjectionPsClient faulty(c.clients[0].get(), &network, 0);
  SessionOptions o = Options(0, true);
  o.ps_unavailable_timeout = absl::Milliseconds(300);
  WorkerSession s(&faulty, c.specs, c.Buffers(0), o);
  REQUIRE(s.Initialize(c.Initial()).ok());
  REQUIRE(s.Start().ok());
  faulty.SetCut(ps::CutMode::kFail);
  absl::StatusOr<PushOutcome> pushed = s.Push(c.Gradients(0, 0.1f));
  REQUIRE(absl::IsUnavailable(pushed.status()));
  CHECK_THAT(std::string(pushed.status().message()),
             Catch::Contains("ps_unavailable_timeout"));
  // Nothing reached the servers.
  CHECK(c.Counters(0).applied == 0);
}

TEST_CASE(
    "a pull whose step never comes while the servers answer is an error, not "
    "a re-sync") {
  // N = M = 2: worker 1 joins and never pushes, so step 1 never comes.
  Cluster c(ps::Mode::kSync, 2);
  ps::FaultInjector network(/*seed=*/9);
  ps::FaultInjectionPsClient link(c.clients[0].get(), &network, 0,
                                  /*call_timeout=*/absl::Milliseconds(200));
  SessionOptions o = Options(0, /*sync=*/true);
  o.step_timeout = absl::Milliseconds(200);
  o.ps_unavailable_timeout = absl::Milliseconds(300);
  WorkerSession s(&link, c.specs, c.Buffers(0), o);
  REQUIRE(s.Initialize(c.Initial()).ok());
  REQUIRE(c.clients[1]->Join().ok());
  REQUIRE(s.Start().ok());
  absl::StatusOr<PushOutcome> pushed = s.Push(c.Gradients(0, 0.1f));
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == StepOutcome::kAggregated);
  SECTION("the servers answer: the pull's DEADLINE_EXCEEDED") {
    // A re-sync, were one to start, would find the link cut from the next
    // Status on and give up naming ps_unavailable_timeout.
    ps::FaultRule cut{ps::CallKind::kStatus, ps::FaultAction::kCutOff};
    cut.skip = 1;
    link.AddRule(cut);
    const absl::Status pulled = s.PullAfterPush(*pushed);
    INFO(pulled.ToString());
    CHECK(absl::IsDeadlineExceeded(pulled));
    CHECK_THAT(std::string(pulled.message()),
               !Catch::Contains("ps_unavailable_timeout"));
    CHECK(s.recovery().recoveries() == 0);
    CHECK(link.stats().cut_calls == 0);
    CHECK(GlobalStep(s.version()) == 0);
  }
  SECTION("cut off: a re-sync, which gives up naming its timeout") {
    link.SetCut(ps::CutMode::kHang);
    const absl::Status pulled = s.PullAfterPush(*pushed);
    INFO(pulled.ToString());
    CHECK_FALSE(pulled.ok());
    CHECK_THAT(std::string(pulled.message()),
               Catch::Contains("ps_unavailable_timeout"));
    CHECK(s.recovery().recoveries() == 1);
  }
  CHECK(c.Counters(0).applied == 0);
}

TEST_CASE("the chief's end: the others left, the servers shut down") {
  Cluster c(ps::Mode::kSync, 2);
  // The chief's calls pass a gate that the test closes, to know when the
  // chief asks the servers again whether the others have left.
  ps::FaultInjector network(/*seed=*/1);
  ps::FaultInjectionPsClient chief_client(c.clients[0].get(), &network,
                                          /*worker_id=*/0);
  WorkerSession chief_session(&chief_client, c.specs, c.Buffers(0),
                              Options(0, true));
  WorkerSession other(c.clients[1].get(), c.specs, c.Buffers(1),
                      Options(1, true));
  ChiefOptions co;
  co.finish_timeout = absl::Seconds(30);
  Chief chief(&chief_session, co);
  REQUIRE(chief_session.Initialize(c.Initial()).ok());
  std::thread t([&] { REQUIRE(other.Start().ok()); });
  REQUIRE(chief_session.Start().ok());
  t.join();
  REQUIRE(chief_session.Leave().ok());
  // The chief's first status call passes (the other is live); its second
  // waits at the gate, and only then does the other leave.
  network.CloseGate();
  chief_client.AddRule(SecondAtGate(ps::CallKind::kStatus));
  absl::Status left = absl::UnknownError("the leaver did not run");
  bool asked_again = false;
  std::thread leaver([&] {
    asked_again = network.AwaitAtGate(1, absl::Seconds(60));
    left = other.Leave();
    network.OpenGate();
  });
  REQUIRE(chief.AwaitOthersLeft().ok());
  // Read before the leaver is joined: a chief that did not wait would be
  // here while the other, still live, waits for its second question.
  CHECK(c.shards[0]->Status().live_workers.empty());
  leaver.join();
  CHECK(asked_again);
  REQUIRE(left.ok());
  absl::StatusOr<ps::ModelVersion> latest = chief_session.PullLatest();
  REQUIRE(latest.ok());
  absl::StatusOr<std::vector<ps::ShardStatus>> status =
      chief.ShutDownServers(*latest);
  REQUIRE(status.ok());
  CHECK(status->size() == 2);
  // Training is over: the other session's calls now end as CANCELLED.
  CHECK(absl::IsCancelled(other.Push(c.Gradients(1, 0.1f)).status()));
}

// One shard with `o`, holding a variable "w" of 4 floats, and an
// in-process client for each of `workers` workers.
struct OneShard {
  OneShard(const ps::ShardOptions& o, int workers) {
    auto s = ps::ParameterShard::Create(o);
    REQUIRE(s.ok());
    shard = *std::move(s);
    auto p = ps::PlaceVariables(specs, 1, 1024);
    REQUIRE(p.ok());
    for (int w = 0; w < workers; ++w) {
      auto c = ps::InProcessPsClient::Create({shard.get()}, *p, "psgd", w);
      REQUIRE(c.ok());
      clients.push_back(*std::move(c));
    }
  }
  const std::vector<VariableSpec> specs = {
      {"w", {4}, Initializer::Constant(0.5f)}};
  std::unique_ptr<ps::ParameterShard> shard;
  std::vector<std::unique_ptr<ps::PsClient>> clients;
};

// One shard handing out 8 samples in chunks of 2.
ps::ShardOptions QueueOptions() {
  ps::ShardOptions o;
  o.data_queue_on = true;
  o.data_queue = {/*num_samples=*/8, /*chunk_size=*/2, /*seed=*/3};
  return o;
}

// OneShard's "w" initialised to 0.5 by `s`, which then starts.
void InitializeAndStart(WorkerSession* s) {
  Tensor initial({4});
  for (float& v : initial.span()) v = 0.5f;
  REQUIRE(s->Initialize({{"w", initial.view()}}).ok());
  REQUIRE(s->Start().ok());
}

TEST_CASE(
    "recovery: a worker out of the live set whose first call is a lease "
    "joins again and leases") {
  // What a Python worker cut off from every shard meets after the heal: its
  // DataLoader asks for the next chunk before any push can say that its
  // lease ran out. One shard handing out chunks, sync N = M = 1.
  OneShard c(QueueOptions(), 1);
  Tensor weights({4});
  SessionOptions so = Options(0, /*sync=*/true);
  so.data_from_servers = true;
  WorkerSession s(c.clients[0].get(), c.specs, {{"w", weights.view()}}, so);
  InitializeAndStart(&s);
  absl::StatusOr<ps::DataChunk> first = s.LeaseData();
  REQUIRE(first.ok());
  // As if its lease had run out: shard 0 takes its chunk back.
  REQUIRE(c.clients[0]->Leave().ok());
  REQUIRE_FALSE(Live(*c.shard, 0));
  absl::StatusOr<ps::DataChunk> next = s.LeaseData();
  INFO(next.status().ToString());
  REQUIRE(next.ok());
  CHECK(Live(*c.shard, 0));
  // The chunk it held went back to the queue and is leased again, to it.
  CHECK(next->epoch == first->epoch);
  CHECK(next->index == first->index);
  // The step goes on with that chunk.
  Tensor g({4});
  for (float& v : g.span()) v = 0.1f;
  absl::StatusOr<PushOutcome> applied = s.Push({{"w", g.view()}});
  REQUIRE(applied.ok());
  CHECK(applied->outcome == StepOutcome::kApplied);
}

TEST_CASE(
    "sync: after a dropped push the worker pulls the newest weights, not "
    "a step its gradient did not help") {
  // One shard handing out chunks, sync N = M = 1. The worker's chunk goes
  // back to the queue under it (as a rollback gives it back): its push is
  // dropped at the current step, which then needs its next gradient.
  OneShard c(QueueOptions(), 1);
  Tensor weights({4});
  SessionOptions so = Options(0, /*sync=*/true);
  so.data_from_servers = true;
  so.step_timeout = absl::Seconds(3);  // a wait for step 1 ends in 3 s
  WorkerSession s(c.clients[0].get(), c.specs, {{"w", weights.view()}}, so);
  InitializeAndStart(&s);
  REQUIRE(s.LeaseData().ok());
  // A new incarnation of worker 0 joins: its chunks go back to the queue.
  REQUIRE(c.shard->Join(0, /*incarnation=*/99).ok());
  Tensor g({4});
  for (float& v : g.span()) v = 0.1f;
  absl::StatusOr<PushOutcome> dropped = s.Push({{"w", g.view()}});
  REQUIRE(dropped.ok());
  CHECK(dropped->outcome == StepOutcome::kDroppedStale);
  const absl::Status pulled = s.PullAfterPush(*dropped);
  INFO(pulled.ToString());
  REQUIRE(pulled.ok());
  CHECK(GlobalStep(s.version()) == 0);  // the step its gradient did not make
  // With a chunk of its own the step is made.
  REQUIRE(s.LeaseData().ok());
  absl::StatusOr<PushOutcome> applied = s.Push({{"w", g.view()}});
  REQUIRE(applied.ok());
  CHECK(applied->outcome == StepOutcome::kApplied);
  REQUIRE(s.PullAfterPush(*applied).ok());
  CHECK(GlobalStep(s.version()) == 1);
}

TEST_CASE(
    "a lease waits while the last epoch's chunks are out with another "
    "worker, and takes the one that comes back") {
  // One shard handing out 2 chunks, one epoch; worker 1 holds both.
  ps::ShardOptions o;
  o.total_num_replicas = 2;
  o.replicas_to_aggregate = 2;
  o.data_queue_on = true;
  o.data_queue = {/*num_samples=*/2, /*chunk_size=*/1, /*seed=*/3};
  o.data_epochs = 1;
  OneShard c(o, 2);
  auto& clients = c.clients;
  for (auto& client : clients) REQUIRE(client->Join().ok());
  REQUIRE(clients[1]->LeaseData(0, nullptr).ok());
  REQUIRE(clients[1]->LeaseData(0, nullptr).ok());
  Tensor weights({4});
  SessionOptions so = Options(0, /*sync=*/true);
  so.data_from_servers = true;
  // Worker 0's calls pass a gate that the test closes below.
  ps::FaultInjector network(/*seed=*/1);
  ps::FaultInjectionPsClient gated(clients[0].get(), &network,
                                   /*worker_id=*/0);
  WorkerSession session(&gated, c.specs, {{"w", weights.view()}}, so);
  // Interrupted by its caller (a Python signal) while it waits.
  int asked = 0;
  absl::Status interrupted =
      session.LeaseData([&] { return ++asked < 3; }).status();
  CHECK(absl::IsCancelled(interrupted));
  CHECK(asked == 3);
  // Worker 1 leaves once worker 0 has been told to wait and asks again:
  // its chunks come back, and worker 0 gets the first.
  network.CloseGate();
  gated.AddRule(SecondAtGate(ps::CallKind::kLeaseData));
  bool asked_again = false;
  std::thread leaver([&] {
    asked_again = network.AwaitAtGate(1, absl::Seconds(60));
    CHECK(clients[1]->Leave().ok());
    network.OpenGate();
  });
  absl::StatusOr<ps::DataChunk> chunk = session.LeaseData();
  leaver.join();
  CHECK(asked_again);
  INFO(chunk.status().ToString());
  REQUIRE(chunk.ok());
  CHECK((chunk->epoch == 0 && chunk->index == 0));
}

TEST_CASE(
    "a chunk leased ahead is the next step's, with no lease before the "
    "step; it goes back at leave and is void after a rollback") {
  // One shard handing out chunks of 2 of 8 samples, sync N = M = 1; worker
  // 0's calls pass a fault injector that counts them.
  const std::string dir =
      (std::filesystem::temp_directory_path() / "worker_session_test_ahead")
          .string();
  std::filesystem::remove_all(dir);
  ps::ShardOptions o = QueueOptions();
  o.checkpoint.dir = dir;
  OneShard c(o, 1);
  ps::FaultInjector network(/*seed=*/1);
  ps::FaultInjectionPsClient faulty(c.clients[0].get(), &network,
                                    /*worker_id=*/0);
  Tensor weights({4});
  SessionOptions so = Options(0, /*sync=*/true);
  so.data_from_servers = true;
  WorkerSession s(&faulty, c.specs, {{"w", weights.view()}}, so);
  InitializeAndStart(&s);
  Tensor g({4});
  for (float& v : g.span()) v = 0.1f;
  auto out = [&] { return c.shard->DataPosition()->chunks_out; };

  absl::StatusOr<ps::DataChunk> first = s.LeaseData();
  REQUIRE(first.ok());
  s.LeaseAhead();
  // The lease ahead reaches the shard while the step computes.
  for (int i = 0; i < 1000 && out() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  REQUIRE(out() == 2);
  absl::StatusOr<PushOutcome> pushed = s.Push({{"w", g.view()}});
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == StepOutcome::kApplied);
  REQUIRE(s.PullAfterPush(*pushed).ok());
  // The next step's chunk is the one leased ahead: no call reaches the
  // shard for it, and its push settles it.
  const int64_t delivered = faulty.stats().delivered;
  absl::StatusOr<ps::DataChunk> second = s.LeaseData();
  INFO(second.status().ToString());
  REQUIRE(second.ok());
  CHECK(faulty.stats().delivered == delivered);
  CHECK(!(second->epoch == first->epoch && second->index == first->index));
  REQUIRE(s.chunk().has_value());
  CHECK(s.chunk()->lease == second->lease);
  pushed = s.Push({{"w", g.view()}});
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == StepOutcome::kApplied);
  REQUIRE(s.PullAfterPush(*pushed).ok());
  CHECK(c.shard->DataPosition()->chunks_done == 2);
  CHECK(out() == 0);

  // Leased ahead, then the cluster rolls back to step 0: the chunk is void
  // (the queue is the checkpoint's, with nothing out) and the next
  // LeaseData leases one of the new generation, whose push is kept.
  REQUIRE(s.LeaseData().ok());
  s.LeaseAhead();
  for (int i = 0; i < 1000 && out() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  REQUIRE(out() == 2);
  c.shard->FlushCheckpoints();
  const int64_t generation = s.version().generation;
  REQUIRE(c.clients[0]->Rollback(0, generation + 1).ok());
  pushed = s.Push({{"w", g.view()}});
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == StepOutcome::kRolledBack);
  REQUIRE(s.PullAfterPush(*pushed).ok());
  REQUIRE(s.version().generation == generation + 1);
  CHECK(out() == 0);
  absl::StatusOr<ps::DataChunk> fresh = s.LeaseData();
  INFO(fresh.status().ToString());
  REQUIRE(fresh.ok());
  CHECK(out() == 1);
  pushed = s.Push({{"w", g.view()}});
  REQUIRE(pushed.ok());
  CHECK(pushed->outcome == StepOutcome::kApplied);
  REQUIRE(s.PullAfterPush(*pushed).ok());

  // Leased ahead and never trained: the Leave gives it back.
  REQUIRE(s.LeaseData().ok());
  s.LeaseAhead();
  pushed = s.Push({{"w", g.view()}});
  REQUIRE(pushed.ok());
  REQUIRE(s.Leave().ok());
  CHECK(out() == 0);
  CHECK(c.shard->DataPosition()->chunks_queued >= 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "a LeaseKeeper keeps a silent worker in the live set while it "
    "is held, and only then") {
  ps::ShardOptions o;
  o.worker_lease = absl::Seconds(1);
  OneShard c(o, 1);
  auto& shard = c.shard;
  REQUIRE(c.clients[0]->Join().ok());
  LeaseKeeper keeper(c.clients[0].get(), absl::Milliseconds(10));
  {
    LeaseKeeper::Hold hold(&keeper);
    while (keeper.renewals() < 3) absl::SleepFor(absl::Milliseconds(5));
    // Renewed within the last moments: nothing to expire now.
    CHECK(shard->ExpireWorkers(absl::Now()).empty());
  }
  CHECK(shard->Status().live_workers == std::vector<int>{0});
  // Once the hold is gone, no more renewals: three rounds of the keeper's
  // loop pass without one, and a lease later the worker is silent.
  const int64_t renewed = keeper.renewals();
  const int64_t round = keeper.rounds();
  while (keeper.rounds() < round + 3) absl::SleepFor(absl::Milliseconds(5));
  CHECK(keeper.renewals() == renewed);
  CHECK(shard->ExpireWorkers(absl::Now() + absl::Seconds(2)) ==
        std::vector<int>{0});
}

}  // namespace
}  // namespace psgd
