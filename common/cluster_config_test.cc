#include "common/cluster_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "common/security.h"

namespace psgd {
namespace {

constexpr char kGood[] = R"(
name: "test"
ps { address: "127.0.0.1:5000" }
ps { address: "127.0.0.1:5001" }
worker { address: "127.0.0.1:6000" }
worker { address: "127.0.0.1:6001" device: "gpu:0" threads: 2 }
worker { address: "127.0.0.1:6002" }
training {
  mode: SYNC
  replicas_to_aggregate: 2
  batch_size: 32
  optimizer { learning_rate: 0.01 }
  steps: 100
}
data { source: SYNTHETIC }
)";

// The error message of parsing `text`, which must fail.
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(text, "c.pbtxt");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

std::string Replace(std::string text, const std::string& from,
                    const std::string& to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

TEST_CASE("a good config loads with defaults filled in") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(kGood, "c.pbtxt");
  REQUIRE(c.ok());
  CHECK(c->ps_size() == 2);
  CHECK(c->worker_size() == 3);
  CHECK(c->training().total_num_replicas() == 3);  // default: the workers
  CHECK(c->training().replicas_to_aggregate() == 2);
  CHECK(c->training().optimizer().beta2() == Approx(0.999));
  CHECK(c->worker(0).device() == "cpu");
  CHECK(c->worker(0).threads() == 1);
  CHECK(c->model().name() == "cifar10_tutorial");
  CHECK(c->run_root() == "runs");
  CHECK_FALSE(c->has_checkpoint());
  CHECK(c->ps_unavailable_timeout_seconds() == 300);
}

TEST_CASE("a checkpoint section takes its defaults") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(
      std::string(kGood) + "checkpoint { dir: \"ckpt\" every_steps: 20 }\n",
      "c.pbtxt");
  REQUIRE(c.ok());
  CHECK(c->checkpoint().dir() == "ckpt");
  CHECK(c->checkpoint().every_steps() == 20);
  CHECK(c->checkpoint().every_seconds() == 0);
  CHECK(c->checkpoint().keep() == 3);
}

TEST_CASE("a learning-rate schedule: the linear scaling rule's factor") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(
      Replace(kGood, "optimizer { learning_rate: 0.01 }",
              "optimizer { learning_rate: 0.01 schedule { base_batch_size: 16 "
              "warmup_steps: 10 warmup_from: 0.5 decay: COSINE decay_steps: "
              "90 final_factor: 0.1 } }"),
      "c.pbtxt");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  const LrSchedule s = LrScheduleFromConfig(c->training());
  CHECK(s.scale == 4.0);  // 32 per worker x N = 2 over 16
  CHECK(s.warmup_steps == 10);
  CHECK(s.warmup_from == 0.5);
  CHECK(s.decay == LrSchedule::Decay::kCosine);
  CHECK(s.decay_steps == 90);
  CHECK(s.final_factor == Approx(0.1));
  // No schedule: factor 1 throughout.
  absl::StatusOr<ClusterConfig> plain = ParseClusterConfig(kGood, "c.pbtxt");
  REQUIRE(plain.ok());
  const LrSchedule none = LrScheduleFromConfig(plain->training());
  CHECK(none.scale == 1.0);
  CHECK(none.warmup_steps == 0);
  CHECK(none.decay == LrSchedule::Decay::kConstant);
  for (int64_t t : {1, 50, 100}) CHECK(LrFactor(none, t) == 1.0);
}

TEST_CASE("syntax errors and unknown fields name the line") {
  CHECK(ErrorOf("name: \"x\"\nps { adress: \"a:1\" }\n") ==
        "c.pbtxt:2: Message type \"psgd.config.PsTask\" has no field named "
        "\"adress\".");
  CHECK(absl::StartsWith(ErrorOf("name: \"x\"\n\nps {\n"), "c.pbtxt:4: "));
}

TEST_CASE("each validation error names file, line and field") {
  const std::string good = kGood;
  struct Case {
    std::string text;
    std::string expected;
  } cases[] = {
      {Replace(good, "name: \"test\"", "name: \"a b\""),
       "c.pbtxt:2: name: 'a b' is not 1..64 letters, digits, '-', '_' or '.'"},
      {Replace(good, "replicas_to_aggregate: 2", "replicas_to_aggregate: 4"),
       "c.pbtxt:10: training.replicas_to_aggregate: 4 is more than "
       "total_num_replicas (3)"},
      {Replace(good, "replicas_to_aggregate: 2", "replicas_to_aggregate: 0"),
       "c.pbtxt:10: training.replicas_to_aggregate: 0 is less than 1"},
      {Replace(good, "mode: SYNC", "total_num_replicas: 4"),
       "c.pbtxt:9: training.total_num_replicas: 4 differs from the number of "
       "worker tasks (3)"},
      {Replace(good, "\"127.0.0.1:5001\"", "\"127.0.0.1:5000\""),
       "c.pbtxt:4: ps[1].address: '127.0.0.1:5000' is already the address of "
       "ps:0"},
      {Replace(good, "\"127.0.0.1:6002\"", "\"127.0.0.1:5001\""),
       "c.pbtxt:7: worker[2].address: '127.0.0.1:5001' is already the "
       "address of ps:1"},
      {Replace(good, "ps { address: \"127.0.0.1:5001\" }", "ps { }"),
       "c.pbtxt:4: ps[1].address: missing (expected host:port)"},
      {Replace(good, "\"127.0.0.1:6000\"", "\"127.0.0.1:70000\""),
       "c.pbtxt:5: worker[0].address: '127.0.0.1:70000' has port '70000' "
       "(expected 1..65535)"},
      {Replace(good, "\"127.0.0.1:6000\"", "\"localhost\""),
       "c.pbtxt:5: worker[0].address: 'localhost' is not host:port"},
      {Replace(good, "device: \"gpu:0\"", "device: \"tpu\""),
       "c.pbtxt:6: worker[1].device: device 'tpu' is not 'cpu' or 'gpu:K' "
       "(K a GPU index)"},
      {Replace(good, "threads: 2", "threads: 0"),
       "c.pbtxt:6: worker[1].threads: 0 is not in 1..256"},
      {Replace(good, "batch_size: 32", "batch_size: -5"),
       "c.pbtxt:11: training.batch_size: -5 is not in 1..65536"},
      {Replace(good, "learning_rate: 0.01", "learning_rate: -1"),
       "c.pbtxt:12: training.optimizer.learning_rate: -1 must be positive "
       "and finite"},
      {Replace(good, "learning_rate: 0.01", "beta1: 1.0"),
       "c.pbtxt:12: training.optimizer.beta1: 1 must be in [0, 1)"},
      {Replace(good, "optimizer { learning_rate: 0.01 }",
               "optimizer { kind: MOMENTUM momentum: 1.0 }"),
       "c.pbtxt:12: training.optimizer.momentum: 1 must be in [0, 1)"},
      {Replace(good, "optimizer { learning_rate: 0.01 }",
               "optimizer { kind: MOMENTUM nesterov: true }"),
       "c.pbtxt:12: training.optimizer.nesterov: true needs kind MOMENTUM "
       "with momentum > 0"},
      {Replace(good, "optimizer { learning_rate: 0.01 }",
               "optimizer { momentum: 0.9 }"),
       "c.pbtxt:12: training.optimizer.momentum: 0.9 is for kind MOMENTUM, "
       "not adam"},
      {Replace(good, "optimizer { learning_rate: 0.01 }",
               "optimizer { kind: SGD weight_decay: -0.1 }"),
       "c.pbtxt:12: training.optimizer.weight_decay: -0.1 must be >= 0 and "
       "finite"},
      {Replace(good, "optimizer { learning_rate: 0.01 }",
               "optimizer { weight_decay: 0.0005 }"),
       "c.pbtxt:12: training.optimizer.weight_decay: 0.0005 is for SGD and "
       "MOMENTUM (Adam keeps TensorFlow's form)"},
      {Replace(good, "optimizer { learning_rate: 0.01 }",
               "optimizer { learning_rate: 0.01 schedule { warmup_steps: 200 "
               "} }"),
       "c.pbtxt:12: training.optimizer.schedule.warmup_steps: 200 goes past "
       "the last step 100"},
      {Replace(good, "optimizer { learning_rate: 0.01 }",
               "optimizer { learning_rate: 0.01 schedule { decay: STEP } }"),
       "c.pbtxt:12: training.optimizer.schedule.decay_every: 0 must be "
       "positive for step decay"},
      {Replace(good, "optimizer { learning_rate: 0.01 }",
               "optimizer { learning_rate: 0.01 schedule { base_batch_size: "
               "0 } }"),
       "c.pbtxt:12: training.optimizer.schedule.base_batch_size: 0 is less "
       "than 1"},
      {Replace(good, "ps { address: \"127.0.0.1:5001\" }",
               "ps { address: \"127.0.0.1:5001\" metrics_port: 70000 }"),
       "c.pbtxt:4: ps[1].metrics_port: 70000 is not in 1..65535 (0: none)"},
      {Replace(good, "ps { address: \"127.0.0.1:5001\" }",
               "ps { address: \"127.0.0.1:5001\" metrics_port: 6000 }"),
       "c.pbtxt:4: ps[1].metrics_port: 6000 is already used on 127.0.0.1 by "
       "worker:0"},
      {Replace(good, "steps: 100", "steps: 100 epochs: 2"),
       "c.pbtxt:13: training: set exactly one of steps and epochs"},
      {Replace(good, "steps: 100", "steps: 0"),
       "c.pbtxt:13: training.steps: 0 is less than 1"},
      {Replace(good, "mode: SYNC", "staleness_bound: 4"),
       "c.pbtxt:9: training.staleness_bound: applies to async mode only (sync "
       "drops every stale gradient)"},
      {Replace(good, "mode: SYNC", "staleness_bound: 0"),
       "c.pbtxt:9: training.staleness_bound: applies to async mode only (sync "
       "drops every stale gradient)"},
      {Replace(good, "mode: SYNC", "mode: ASYNC staleness_bound: -1"),
       "c.pbtxt:9: training.staleness_bound: -1 is negative"},
      {Replace(good, "mode: SYNC", "mode: ASYNC max_push_staleness: -1"),
       "c.pbtxt:9: training.max_push_staleness: -1 is negative"},
      {Replace(good, "mode: SYNC", "max_push_staleness: 2"),
       "c.pbtxt:9: training.max_push_staleness: applies to async mode only "
       "(sync drops every stale gradient)"},
      {Replace(good, "mode: SYNC", "dc_asgd_lambda: 0.1"),
       "c.pbtxt:9: training.dc_asgd_lambda: applies to async mode only (sync "
       "gradients are never stale)"},
      {Replace(good, "mode: SYNC", "mode: ASYNC dc_asgd_lambda: -0.5"),
       "c.pbtxt:9: training.dc_asgd_lambda: -0.5 is not a finite number >= 0 "
       "(0: off)"},
      {Replace(good, "mode: SYNC", "mode: ASYNC dc_asgd_lambda: nan"),
       "c.pbtxt:9: training.dc_asgd_lambda: nan is not a finite number >= 0 "
       "(0: off)"},
      {Replace(good, "mode: SYNC", "mode: ASYNC dc_asgd_lambda: inf"),
       "c.pbtxt:9: training.dc_asgd_lambda: inf is not a finite number >= 0 "
       "(0: off)"},
      {Replace(good, "mode: SYNC", "async_beta1: 0.5"),
       "c.pbtxt:9: training.async_beta1: applies to async mode only"},
      {Replace(good, "mode: SYNC", "mode: ASYNC async_beta1: 1"),
       "c.pbtxt:9: training.async_beta1: 1 is not in [0, 1)"},
      {Replace(good, "mode: SYNC", "mode: ASYNC async_beta1: -0.25"),
       "c.pbtxt:9: training.async_beta1: -0.25 is not in [0, 1)"},
      {Replace(Replace(good, "mode: SYNC", "mode: ASYNC async_beta1: 0.5"),
               "optimizer { learning_rate: 0.01 }",
               "optimizer { kind: SGD learning_rate: 0.01 }"),
       "c.pbtxt:9: training.async_beta1: applies to Adam only"},
      {Replace(good, "source: SYNTHETIC", "source: CIFAR10"),
       "c.pbtxt:15: data.dir: missing: CIFAR10 needs the directory of its "
       ".bin files (or use source: SYNTHETIC)"},
      {Replace(good, "source: SYNTHETIC",
               "source: SYNTHETIC "
               "synthetic_train_size: 0"),
       "c.pbtxt:15: data.synthetic_train_size: 0 is less than 1"},
      {Replace(good, "mode: SYNC",
               "mode: ASYNC replicas_rule: LIVE_MINUS_BACKUPS"),
       "c.pbtxt:9: training.replicas_rule: LIVE_MINUS_BACKUPS is for sync mode "
       "without adaptive_backups (which choose N themselves)"},
      {Replace(good, "source: SYNTHETIC", "source: SYNTHETIC num_samples: 10"),
       "c.pbtxt:15: data.num_samples: is for sharding: SERVERS (the servers "
       "hand out the data)"},
      {Replace(good, "source: SYNTHETIC",
               "source: SYNTHETIC sharding: SERVERS num_samples: -1"),
       "c.pbtxt:15: data.num_samples: -1 is negative (0: the source's "
       "training set)"},
      {Replace(good, "source: SYNTHETIC", "source: SYNTHETIC ledger: true"),
       "c.pbtxt:15: data.ledger: is for sharding: SERVERS (the servers hand "
       "out the data)"},
      {Replace(good, "source: SYNTHETIC",
               "source: SYNTHETIC record_samples: true"),
       "c.pbtxt:15: data.record_samples: is for sharding: SERVERS (the "
       "servers hand out the data)"},
      {Replace(good, "source: SYNTHETIC",
               "source: SYNTHETIC sharding: SERVERS ledger: true"),
       "c.pbtxt:15: data.ledger: needs a checkpoint block: the ledger is kept "
       "beside ps:0's checkpoints and cut back with them"},
      {Replace(good, "source: SYNTHETIC",
               "source: SYNTHETIC sharding: SERVERS num_samples: 3"),
       "c.pbtxt:15: data.sharding: SERVERS: the training set's 3 samples are "
       "fewer than one batch of 32"},
      {Replace(good, "name: \"test\"",
               "name: \"test\" "
               "worker_lease_seconds: -2"),
       "c.pbtxt:2: worker_lease_seconds: -2 is not in [0, 86400] (0: no "
       "lease)"},
      {Replace(good, "mode: SYNC", "eval_examples: -1"),
       "c.pbtxt:9: training.eval_examples: -1 is negative"},
      {Replace(good, "mode: SYNC", "max_seconds: -3"),
       "c.pbtxt:9: training.max_seconds: -3 is not in [0, 1e7]"},
      {good + "checkpoint { every_steps: 10 }\n",
       "c.pbtxt:16: checkpoint.dir: missing: the directory the checkpoints go "
       "to (or give every ps task its own checkpoint_dir)"},
      {good + "checkpoint {\n dir: \"c\"\n every_steps: -1 }\n",
       "c.pbtxt:18: checkpoint.every_steps: -1 is negative (0: not by steps)"},
      {good + "checkpoint { dir: \"c\" every_seconds: -1 }\n",
       "c.pbtxt:16: checkpoint.every_seconds: -1 is not in [0, 1e6] (0: not by "
       "time)"},
      {good + "checkpoint { dir: \"c\" keep: 0 }\n",
       "c.pbtxt:16: checkpoint.keep: 0 is not in 1..1000"},
      {good + "max_workers: 2\n",
       "c.pbtxt:16: max_workers: 2 is below the 3 listed worker tasks"},
      {good + "max_workers: 5\n",
       "c.pbtxt:15: data.sharding: SHARD splits the data among the listed "
       "workers: elastic workers (max_workers) need SERVERS or OWN_ORDER"},
      {good + "ps_unavailable_timeout_seconds: -1\n",
       "c.pbtxt:16: ps_unavailable_timeout_seconds: -1 is not in [0, 86400]"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK(ErrorOf(c.text) == c.expected);
  }
}

TEST_CASE("a cluster without ps or worker tasks is refused") {
  CHECK(ErrorOf("name: \"x\"\nworker { address: \"h:1\" }\n") ==
        "c.pbtxt: ps: the cluster has no ps task");
  CHECK(ErrorOf("name: \"x\"\nps { address: \"h:1\" }\n") ==
        "c.pbtxt: worker: the cluster has no worker task");
}

TEST_CASE("task ids are checked against the config") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(kGood, "c.pbtxt");
  REQUIRE(c.ok());
  absl::StatusOr<TaskId> ps1 = ParseTaskId("ps:1", *c);
  REQUIRE(ps1.ok());
  CHECK(ps1->kind == TaskId::Kind::kPs);
  CHECK(ps1->index == 1);
  CHECK(ps1->ToString() == "ps:1");
  CHECK(ParseTaskId("worker:2", *c).ok());
  CHECK(ParseTaskId("worker:3", *c).status().message() ==
        "task 'worker:3' is not in cluster 'test', which has 3 worker tasks "
        "(worker:0..worker:2)");
  CHECK(ParseTaskId("chief:0", *c).status().message() ==
        "task 'chief:0' is not ps:I or worker:J");
  CHECK(!ParseTaskId("ps:-1", *c).ok());
  CHECK(!ParseTaskId("ps", *c).ok());

  // Elastic: worker tasks up to max_workers, with the last listed one's
  // settings.
  absl::StatusOr<ClusterConfig> e =
      ParseClusterConfig(Replace(kGood, "source: SYNTHETIC",
                                 "source: SYNTHETIC sharding: SERVERS") +
                             "max_workers: 5\n",
                         "c.pbtxt");
  INFO(e.status().ToString());
  REQUIRE(e.ok());
  CHECK(MaxWorkers(*e) == 5);
  CHECK(MaxWorkers(*c) == 3);
  CHECK(ParseTaskId("worker:4", *e).ok());
  CHECK(ParseTaskId("worker:5", *e).status().message() ==
        "task 'worker:5' is not in cluster 'test', which has 5 worker tasks "
        "(worker:0..worker:4)");
  CHECK(&WorkerTaskOf(*e, 4) == &e->worker(2));
  CHECK(&WorkerTaskOf(*e, 1) == &e->worker(1));
}

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string TempFile(const std::string& name, const std::string& contents) {
  const std::string path = TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
  chmod(path.c_str(), 0600);  // a token file others may read is refused
  return path;
}

TEST_CASE("security: a token inline or from a file, and TLS files") {
  const std::string token_file = TempFile("token", "from-a-file\n");
  const std::string pem = TempFile("x.pem", "-----BEGIN CERTIFICATE-----\n");
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(
      std::string(kGood) + "security { token_file: \"" + token_file +
          "\" tls { cert_file: \"" + pem + "\" key_file: \"" + pem + "\" } }\n",
      "c.pbtxt");
  REQUIRE(c.ok());
  CHECK(c->security().token() == "from-a-file");
  SecurityOptions o = SecurityFromConfig(*c);
  CHECK(o.token == "from-a-file");
  CHECK(o.tls);
  CHECK(o.tls_cert_file == pem);
  CHECK(o.tls_key_file == pem);
  CHECK(o.tls_ca_file.empty());

  c = ParseClusterConfig(std::string(kGood) + "security { token: \"t0k\" }",
                         "c.pbtxt");
  REQUIRE(c.ok());
  CHECK(SecurityFromConfig(*c).token == "t0k");
  CHECK_FALSE(SecurityFromConfig(*c).tls);

  c = ParseClusterConfig(std::string(kGood) + "security { insecure: true }",
                         "c.pbtxt");
  REQUIRE(c.ok());
  CHECK(SecurityFromConfig(*c).token.empty());
  CHECK(SecurityFromConfig(*c).insecure);
}

TEST_CASE("security: without a token the cluster's default token file") {
  // Bazel's HOME is the test's own directory: the default file lands there.
  const std::string dir = TempDir() + "/default-token";
  setenv("PSGD_TOKEN_FILE", (dir + "/sub/t.token").c_str(), 1);
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(kGood, "c.pbtxt");
  REQUIRE(c.ok());
  const SecurityOptions o = SecurityFromConfig(*c);
  CHECK(o.token.size() == 64);
  CHECK_FALSE(o.insecure);
  CHECK(c->security().token_file() == dir + "/sub/t.token");
  // The file: 0600, and the second task reads the same token.
  struct stat st;
  REQUIRE(stat((dir + "/sub/t.token").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(stat((dir + "/sub").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  absl::StatusOr<ClusterConfig> again = ParseClusterConfig(kGood, "c.pbtxt");
  REQUIRE(again.ok());
  CHECK(SecurityFromConfig(*again).token == o.token);
  // A TLS block alone takes the default token too.
  const std::string pem = TempFile("z.pem", "-----BEGIN CERTIFICATE-----\n");
  again =
      ParseClusterConfig(std::string(kGood) + "security { tls { cert_file: \"" +
                             pem + "\" key_file: \"" + pem + "\" } }",
                         "c.pbtxt");
  REQUIRE(again.ok());
  CHECK(SecurityFromConfig(*again).token == o.token);
  CHECK(SecurityFromConfig(*again).tls);

  unsetenv("PSGD_TOKEN_FILE");

  // Without PSGD_TOKEN_FILE: $XDG_CONFIG_HOME/psgd/tokens/NAME.token, else
  // $HOME/.config/...
  setenv("XDG_CONFIG_HOME", (dir + "/xdg").c_str(), 1);
  absl::StatusOr<std::string> path = DefaultTokenFile("c1");
  REQUIRE(path.ok());
  CHECK(*path == dir + "/xdg/psgd/tokens/c1.token");
  const std::string made = dir + "/xdg/psgd/tokens/test.token";  // kGood's name
  REQUIRE(ParseClusterConfig(kGood, "c.pbtxt").ok());
  // A default file others may read is refused, naming the fix.
  REQUIRE(chmod(made.c_str(), 0644) == 0);
  absl::Status s = ParseClusterConfig(kGood, "c.pbtxt").status();
  CHECK(s.message().find("has mode 0644") != absl::string_view::npos);
  CHECK(s.message().find("chmod 600") != absl::string_view::npos);
  // A symbolic link planted there is refused, not followed.
  REQUIRE(unlink(made.c_str()) == 0);
  REQUIRE(symlink("/etc/passwd", made.c_str()) == 0);
  s = ParseClusterConfig(kGood, "c.pbtxt").status();
  CHECK(s.message().find("symbolic link") != absl::string_view::npos);
  unsetenv("XDG_CONFIG_HOME");
  setenv("HOME", dir.c_str(), 1);
  path = DefaultTokenFile("c1");
  REQUIRE(path.ok());
  CHECK(*path == dir + "/.config/psgd/tokens/c1.token");
  CHECK(DefaultTokenFile("../x").status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("security: each error names file, line and field") {
  const std::string good = kGood;  // 15 lines; security starts on line 16
  const std::string empty = TempFile("empty_token", "\n");
  const std::string pem = TempFile("y.pem", "-----BEGIN CERTIFICATE-----\n");
  struct Case {
    std::string security;
    std::string expected;
  } cases[] = {
      {"security {\n  token: \"abc\"\n  token_file: \"/x\"\n}\n",
       "c.pbtxt:18: security.token_file: set either token or token_file, not "
       "both"},
      {"security {\n  token: \"abc\"\n  insecure: true\n}\n",
       "c.pbtxt:18: security.insecure: insecure: true means no token: drop "
       "token/token_file, or drop insecure"},
      {"security {\n  insecure: true\n  peer_token_file: \"/x\"\n}\n",
       "c.pbtxt:18: security.peer_token_file: insecure: true means no token: "
       "drop peer_token_file, or drop insecure"},
      {"security {\n  token: \"abc\"\n  peer_token_file: \"\"\n}\n",
       "c.pbtxt:18: security.peer_token_file: an empty file name"},
      {"security {\n  token: \"a b\"\n}\n",
       "c.pbtxt:17: security.token: the token has character 2 of code 32: "
       "only visible ASCII characters (no spaces) can travel in gRPC "
       "metadata"},
      {"security {\n  token: \"\"\n}\n",
       "c.pbtxt:17: security.token: the token is empty"},
      {"security {\n  token_file: \"/nonexistent/token\"\n}\n",
       "c.pbtxt:17: security.token_file: no file '/nonexistent/token'"},
      {"security {\n  token_file: \"" + empty + "\"\n}\n",
       "c.pbtxt:17: security.token_file: token file '" + empty + "' is empty"},
      {"security {\n  token: \"abc\"\n  tls {\n    key_file: \"" + pem +
           "\"\n  }\n}\n",
       "c.pbtxt:18: security.tls.cert_file: missing (a PEM file)"},
      {"security {\n  token: \"abc\"\n  tls {\n    cert_file: \"" + pem +
           "\"\n  }\n}\n",
       "c.pbtxt:18: security.tls.key_file: missing (a PEM file)"},
      {"security {\n  token: \"abc\"\n  tls {\n    cert_file: \"" + pem +
           "\"\n    key_file: \"/nonexistent/key.pem\"\n  }\n}\n",
       "c.pbtxt:20: security.tls.key_file: cannot read "
       "'/nonexistent/key.pem'"},
      {"security {\n  token: \"abc\"\n  tls {\n    cert_file: \"" + pem +
           "\"\n    key_file: \"" + pem + "\"\n    ca_file: \"/tmp\"\n  }\n}\n",
       "c.pbtxt:21: security.tls.ca_file: cannot read '/tmp'"},
  };
  for (const Case& c : cases) {
    INFO(c.security);
    CHECK(ErrorOf(good + c.security) == c.expected);
  }
}

TEST_CASE("hosts: names, IPv6, listen addresses, own checkpoint dirs") {
  std::string multi = Replace(
      Replace(kGood, "ps { address: \"127.0.0.1:5000\" }",
              "ps { address: \"h0:2222\" listen_address: \"0.0.0.0:2222\" "
              "checkpoint_dir: \"/var/ckpt\" }"),
      "ps { address: \"127.0.0.1:5001\" }",
      "ps { address: \"[fd00::1]:2222\" listen_address: \"[::]:2222\" "
      "checkpoint_dir: \"/var/ckpt\" }");
  multi += "checkpoint { every_steps: 10 }\n";
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(multi, "c.pbtxt");
  REQUIRE(c.ok());
  CHECK(ListenAddress(c->ps(0)) == "0.0.0.0:2222");
  CHECK(ListenAddress(c->ps(1)) == "[::]:2222");
  CHECK(PerHostCheckpoints(*c));
  CHECK(CheckpointDir(*c, 1) == "/var/ckpt");
  // Without listen_address a task listens where it is dialled.
  absl::StatusOr<ClusterConfig> good = ParseClusterConfig(kGood, "c.pbtxt");
  REQUIRE(good.ok());
  CHECK(ListenAddress(good->ps(1)) == "127.0.0.1:5001");
  CHECK_FALSE(PerHostCheckpoints(*good));

  const struct {
    std::string from, to, error;
  } cases[] = {
      {"127.0.0.1:5000", "0.0.0.0:5000",
       "c.pbtxt:3: ps[0].address: '0.0.0.0:5000' is a wildcard, which no task "
       "can dial"},
      {"127.0.0.1:5000", "fd00::1:5000",
       "c.pbtxt:3: ps[0].address: 'fd00::1:5000': an IPv6 address goes in "
       "brackets"},
      {"127.0.0.1:5000", "[h0]:5000",
       "c.pbtxt:3: ps[0].address: '[h0]:5000': only an IPv6 address goes in "
       "brackets"},
      {"127.0.0.1:5000\"", "h0:1\" listen_address: \"0.0.0.0\"",
       "c.pbtxt:3: ps[0].listen_address: '0.0.0.0' is not host:port"},
  };
  for (const auto& t : cases) {
    CAPTURE(t.to);
    CHECK_THAT(ErrorOf(Replace(kGood, t.from, t.to)),
               Catch::StartsWith(t.error));
  }
  std::string no_block = multi.substr(0, multi.find("checkpoint {"));
  CHECK_THAT(ErrorOf(no_block),
             Catch::StartsWith("c.pbtxt:3: ps[0].checkpoint_dir: set, but the "
                               "config has no checkpoint"));
  // Every ps task or none has its own directory.
  std::string half =
      Replace(kGood, "127.0.0.1:5000\"", "h0:1\" checkpoint_dir: \"/c\"") +
      "checkpoint { every_steps: 5 }\n";
  CHECK_THAT(ErrorOf(half),
             Catch::StartsWith("c.pbtxt:4: ps[1].checkpoint_dir: missing: 1 "
                               "of the 2 ps tasks have their own"));
  // The cluster's directory may be left out when every task has its own.
  CHECK_THAT(ErrorOf(kGood + std::string("checkpoint { every_steps: 5 }\n")),
             Catch::Contains("checkpoint.dir: missing"));
}

TEST_CASE("a missing file is NOT_FOUND") {
  CHECK(LoadClusterConfig("/nonexistent/x.pbtxt").status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("adaptive backup workers: bounds within M, sync only") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(
      Replace(kGood, "steps: 100", "steps: 100 adaptive_backups { }"),
      "c.pbtxt");
  REQUIRE(c.ok());
  CHECK(c->training().adaptive_backups().max_replicas() == 3);
  CHECK(c->training().adaptive_backups().min_replicas() == 1);
  CHECK_THAT(ErrorOf(Replace(kGood, "steps: 100",
                             "steps: 100 adaptive_backups { max_replicas: 4 "
                             "}")),
             Catch::Contains("training.adaptive_backups.max_replicas") &&
                 Catch::Contains("4 is more than total_num_replicas (3)"));
  CHECK_THAT(ErrorOf(Replace(kGood, "steps: 100",
                             "steps: 100 adaptive_backups { min_replicas: 3 "
                             "max_replicas: 2 }")),
             Catch::Contains("training.adaptive_backups.min_replicas"));
  CHECK_THAT(ErrorOf(Replace(kGood, "steps: 100",
                             "steps: 100 adaptive_backups { window_steps: 0 "
                             "}")),
             Catch::Contains("window_steps"));
  CHECK_THAT(
      ErrorOf(Replace(Replace(kGood, "mode: SYNC", "mode: ASYNC"),
                      "replicas_to_aggregate: 2", "adaptive_backups { }")),
      Catch::Contains("need mode: SYNC"));
}

}  // namespace
TEST_CASE("an unknown model name is refused, naming the known ones") {
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(
      std::string(kGood) + "model { name: \"externel\" }\n", "c.pbtxt");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("model.name: unknown model 'externel'") !=
        absl::string_view::npos);
  CHECK(c.status().message().find("resnet20") != absl::string_view::npos);
  CHECK(c.status().message().find("\"external\"") != absl::string_view::npos);
}

}  // namespace psgd

namespace psgd {
namespace {

TEST_CASE("wire.ucx_transports takes UCX_TLS's names and refuses others") {
  for (const char* ok :
       {"tcp", "", "rc,ud,sm,self", "^ud", "posix,cma,tcp", "rc_verbs",
        "ud_verbs:aux,rc_verbs", "cuda_copy,tcp"}) {
    INFO(ok);
    absl::StatusOr<ClusterConfig> c = ParseClusterConfig(
        std::string(kGood) + "wire { data_plane: UCX ucx_transports: \"" + ok +
            "\" }\n",
        "c.pbtxt");
    CHECK(c.ok());
  }
  const std::string bad = ErrorOf(std::string(kGood) +
                                  "wire { data_plane: UCX\n"
                                  "  ucx_transports: \"tcp,tpc\" }\n");
  CHECK_THAT(bad,
             Catch::Contains("wire.ucx_transports: 'tpc' in 'tcp,tpc' is not "
                             "a UCX transport name"));
  CHECK_THAT(bad, Catch::Contains("rc_verbs"));
  CHECK_THAT(
      ErrorOf(std::string(kGood) + "wire { ucx_transports: \"tcp,,sm\" }\n"),
      Catch::Contains("'' in 'tcp,,sm' is not a UCX transport name"));
}

}  // namespace
}  // namespace psgd
