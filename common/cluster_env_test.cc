// Golden tests of the cluster from Slurm and TF_CONFIG: TensorFlow's own
// examples of node lists and tasks per node (slurm_cluster_resolver_test.py),
// its resolver's task layouts, Kubeflow TF_CONFIGs, and every bad input
// named by its variable.
#include "common/cluster_env.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace psgd {
namespace {

using Strings = std::vector<std::string>;

// `max_workers` > 0: elastic membership (with the data from the servers).
ClusterConfig Config(int ps, int workers, int max_workers = 0) {
  std::string text = "name: 'c' ";
  if (max_workers > 0) {
    text += "max_workers: " + std::to_string(max_workers) + " ";
  }
  for (int i = 0; i < ps; ++i) {
    text += "ps { address: 'p" + std::to_string(i) + ":1' } ";
  }
  for (int i = 0; i < workers; ++i) {
    text += "worker { address: 'w" + std::to_string(i) + ":1' } ";
  }
  text += "training { steps: 10 } data { source: SYNTHETIC ";
  text += max_workers > 0 ? "sharding: SERVERS }" : "}";
  absl::StatusOr<ClusterConfig> c = ParseClusterConfig(text, "c.pbtxt");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  return *c;
}

// "ps:0=host:port ... worker:0=..." of a resolved cluster.
std::string Layout(const ResolvedCluster& r) {
  std::string out;
  for (int i = 0; i < r.config.ps_size(); ++i) {
    out += "ps:" + std::to_string(i) + "=" + r.config.ps(i).address() + " ";
  }
  for (int i = 0; i < r.config.worker_size(); ++i) {
    out += "worker:" + std::to_string(i) + "=" + r.config.worker(i).address() +
           " ";
  }
  return out;
}

std::string ErrorOf(const absl::StatusOr<ResolvedCluster>& r) {
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

std::string Golden(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  REQUIRE(srcdir != nullptr);
  std::ifstream in(std::string(srcdir) + "/psgd/common/testdata/cluster_env/" +
                   name);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("Slurm node lists expand as TensorFlow's do") {
  const struct {
    std::string in;
    Strings out;
  } cases[] = {
      {"n1", {"n1"}},
      {"n[1,3]", {"n1", "n3"}},
      {"n[1-3]", {"n1", "n2", "n3"}},
      {"n[1-2],m5,o[3-4,6,7-9]",
       {"n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9"}},
      {"n[0001-0003],m5,o[009-011]",
       {"n0001", "n0002", "n0003", "m5", "o009", "o010", "o011"}},
      {"t02n13,t02n41", {"t02n13", "t02n41"}},
      {"t02n[13,41]", {"t02n13", "t02n41"}},
      {"t02n[13-15,41]", {"t02n13", "t02n14", "t02n15", "t02n41"}},
      {"node[01-03]", {"node01", "node02", "node03"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    absl::StatusOr<Strings> got = ExpandSlurmNodelist(c.in);
    REQUIRE(got.ok());
    CHECK(*got == c.out);
  }
  for (const char* bad :
       {"", "n[1-", "n[3-1]", "n[a-b]", "[1-2]", "n 1", "n[1]x", "n]"}) {
    CAPTURE(bad);
    CHECK_FALSE(ExpandSlurmNodelist(bad).ok());
  }
}

TEST_CASE("Slurm tasks per node expand as TensorFlow's do") {
  const struct {
    std::string in;
    std::vector<int> out;
  } cases[] = {
      {"2", {2}},
      {"2,1,3", {2, 1, 3}},
      {"3(x2),2,1", {3, 3, 2, 1}},
      {"3(x2),2,11(x4)", {3, 3, 2, 11, 11, 11, 11}},
      {"13(x10)", std::vector<int>(10, 13)},
      {"2(x2),1", {2, 2, 1}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    absl::StatusOr<std::vector<int>> got = ExpandSlurmTasksPerNode(c.in);
    REQUIRE(got.ok());
    CHECK(*got == c.out);
  }
  for (const char* bad : {"", "0", "2(x)", "2(x0)", "x", "2,,1", "2(3)"}) {
    CAPTURE(bad);
    CHECK_FALSE(ExpandSlurmTasksPerNode(bad).ok());
  }
}

TEST_CASE("Slurm: ranks to tasks, ports from a base (TensorFlow's layouts)") {
  // slurm_cluster_resolver_test: 1 task on each of 3 nodes, ps 1, worker 2.
  Environment env = {{"SLURM_PROCID", "0"},
                     {"SLURM_STEP_NUM_TASKS", "3"},
                     {"SLURM_STEP_TASKS_PER_NODE", "1(x3)"},
                     {"SLURM_STEP_NODELIST", "t02n13,t02n41,t02n43"}};
  absl::StatusOr<ResolvedCluster> r = ClusterFromSlurm(Config(1, 2), env, 8888);
  REQUIRE(r.ok());
  CHECK(Layout(*r) ==
        "ps:0=t02n13:8888 worker:0=t02n41:8888 worker:1=t02n43:8888 ");
  CHECK(r->task.ToString() == "ps:0");
  CHECK(r->config.ps(0).listen_address() == "0.0.0.0:8888");

  // Two tasks per node: ps 1, worker 3; rank 2 is worker:1.
  env = {{"SLURM_PROCID", "2"},
         {"SLURM_STEP_NUM_TASKS", "4"},
         {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
         {"SLURM_STEP_NODELIST", "t02n[13,41]"}};
  r = ClusterFromSlurm(Config(1, 3), env, 8888);
  REQUIRE(r.ok());
  CHECK(Layout(*r) ==
        "ps:0=t02n13:8888 worker:0=t02n13:8889 worker:1=t02n41:8888 "
        "worker:2=t02n41:8889 ");
  CHECK(r->task.ToString() == "worker:1");

  // The job's variables when the step's are missing; uneven nodes.
  env = {{"SLURM_PROCID", "4"},
         {"SLURM_NTASKS", "5"},
         {"SLURM_TASKS_PER_NODE", "2(x2),1"},
         {"SLURM_JOB_NODELIST", "node[01-03]"}};
  r = ResolveCluster(Config(2, 3), "slurm", env, 2222);
  REQUIRE(r.ok());
  CHECK(Layout(*r) ==
        "ps:0=node01:2222 ps:1=node01:2223 worker:0=node02:2222 "
        "worker:1=node02:2223 worker:2=node03:2222 ");
  CHECK(r->task.ToString() == "worker:2");
  CHECK(PrintResolvedCluster(*r) == Golden("slurm_2ps_3w.pbtxt"));
}

TEST_CASE("Slurm: an environment that does not fit is named") {
  const Environment good = {{"SLURM_PROCID", "1"},
                            {"SLURM_STEP_NUM_TASKS", "4"},
                            {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                            {"SLURM_STEP_NODELIST", "n[1-2]"}};
  REQUIRE(ClusterFromSlurm(Config(2, 2), good, 8888).ok());
  auto with = [&](const std::string& key, const std::string& value) {
    Environment env = good;
    if (value.empty()) {
      env.erase(key);
    } else {
      env[key] = value;
    }
    return ClusterFromSlurm(Config(2, 2), env, 8888);
  };
  CHECK_THAT(ErrorOf(with("SLURM_STEP_NUM_TASKS", "5")),
             Catch::StartsWith("SLURM_STEP_NUM_TASKS='5': config 'c' has 2 ps "
                               "and 2 worker tasks (4): run srun with -n 4"));
  CHECK_THAT(ErrorOf(with("SLURM_PROCID", "4")),
             Catch::StartsWith("SLURM_PROCID='4': not a rank in 0..3"));
  CHECK_THAT(ErrorOf(with("SLURM_STEP_NODELIST", "n[1-")),
             Catch::StartsWith("SLURM_STEP_NODELIST='n[1-': nodelist='n[1-': "
                               "not a Slurm node list"));
  CHECK_THAT(ErrorOf(with("SLURM_STEP_NODELIST", "n[1-3]")),
             Catch::StartsWith("SLURM_STEP_TASKS_PER_NODE='2(x2)': counts 2 "
                               "nodes, but SLURM_STEP_NODELIST='n[1-3]' names "
                               "3"));
  CHECK_THAT(ErrorOf(with("SLURM_STEP_TASKS_PER_NODE", "3,2")),
             Catch::StartsWith("SLURM_STEP_TASKS_PER_NODE='3,2': adds up to 5 "
                               "tasks"));
  CHECK_THAT(ErrorOf(with("SLURM_PROCID", "")),
             Catch::StartsWith("--cluster_from=slurm: SLURM_PROCID not set"));
  CHECK_THAT(ErrorOf(ClusterFromSlurm(Config(2, 2), good, 0)),
             Catch::StartsWith("--slurm_port_base=0"));
}

TEST_CASE("TF_CONFIG: Kubeflow's chief, workers and ps") {
  const std::string cluster =
      R"("cluster": {"chief": ["job-chief-0.job:2222"],
                     "worker": ["job-worker-0.job:2222", "job-worker-1.job:2222"],
                     "ps": ["job-ps-0.job:2222", "job-ps-1.job:2222"]})";
  absl::StatusOr<ResolvedCluster> r = ResolveCluster(
      Config(2, 3), "tf_config",
      {{"TF_CONFIG",
        "{" + cluster + R"(, "task": {"type": "worker", "index": 1}})"}},
      0);
  REQUIRE(r.ok());
  CHECK(Layout(*r) ==
        "ps:0=job-ps-0.job:2222 ps:1=job-ps-1.job:2222 "
        "worker:0=job-chief-0.job:2222 worker:1=job-worker-0.job:2222 "
        "worker:2=job-worker-1.job:2222 ");
  CHECK(r->task.ToString() == "worker:2");
  CHECK(PrintResolvedCluster(*r) == Golden("tf_config_2ps_3w.pbtxt"));
  r = ClusterFromTfConfig(
      Config(2, 3),
      {{"TF_CONFIG", "{" + cluster + R"(, "task": {"type": "chief"}})"}});
  REQUIRE(r.ok());
  CHECK(r->task.ToString() == "worker:0");
  r = ClusterFromTfConfig(
      Config(2, 3),
      {{"TF_CONFIG",
        "{" + cluster + R"(, "task": {"type": "ps", "index": 1}})"}});
  REQUIRE(r.ok());
  CHECK(r->task.ToString() == "ps:1");
  // Without a chief, worker 0 is the chief.
  r = ClusterFromTfConfig(
      Config(1, 2),
      {{"TF_CONFIG", R"({"cluster": {"worker": ["a:1", "b:1"], "ps": ["c:1"]},
                         "task": {"type": "worker", "index": 0}})"}});
  REQUIRE(r.ok());
  CHECK(Layout(*r) == "ps:0=c:1 worker:0=a:1 worker:1=b:1 ");
}

TEST_CASE("TF_CONFIG: an elastic worker beyond the listed ones") {
  // 3 listed workers (worker:0..2), max_workers 6: worker:3..5 may join.
  const std::string plain =
      R"("cluster": {"worker": ["a:1", "b:1", "c:1"], "ps": ["p:1"]})";
  const std::string chief =
      R"("cluster": {"chief": ["a:1"], "worker": ["b:1", "c:1"],
                     "ps": ["p:1"]})";
  // The cluster of `config` from a TF_CONFIG of `cluster` and `task`.
  auto resolve = [](const ClusterConfig& config, const std::string& cluster,
                    const std::string& task) {
    return ResolveCluster(
        config, "tf_config",
        Environment{
            {"TF_CONFIG", "{" + cluster + R"(, "task": )" + task + "}"}},
        0);
  };
  absl::StatusOr<ResolvedCluster> r =
      resolve(Config(1, 3, 6), plain, R"({"type": "worker", "index": 3})");
  REQUIRE(r.ok());
  CHECK(r->task.ToString() == "worker:3");
  // The listed addresses stay; the elastic worker adds none.
  CHECK(Layout(*r) == "ps:0=p:1 worker:0=a:1 worker:1=b:1 worker:2=c:1 ");
  r = resolve(Config(1, 3, 6), plain, R"({"type": "worker", "index": 5})");
  REQUIRE(r.ok());
  CHECK(r->task.ToString() == "worker:5");
  // With a chief, worker index i is worker:i+1.
  r = resolve(Config(1, 3, 6), chief, R"({"type": "worker", "index": 4})");
  REQUIRE(r.ok());
  CHECK(r->task.ToString() == "worker:5");

  // Beyond max_workers - 1.
  CHECK(ErrorOf(resolve(Config(1, 3, 6), plain,
                        R"({"type": "worker", "index": 6})")) ==
        "TF_CONFIG: task worker:6: cluster.worker has 3 addresses and config "
        "'c' allows worker ids up to max_workers - 1 = 5");
  CHECK(ErrorOf(resolve(Config(1, 3, 6), chief,
                        R"({"type": "worker", "index": 5})")) ==
        "TF_CONFIG: task worker:5: cluster.worker has 2 addresses (worker:6 "
        "after the chief) and config 'c' allows worker ids up to "
        "max_workers - 1 = 5");
  CHECK_THAT(ErrorOf(resolve(Config(1, 3, 6), plain,
                             R"({"type": "worker", "index": 1e12})")),
             Catch::Contains("allows worker ids up to max_workers - 1 = 5"));
  // max_workers equal to the listed workers: none beyond them.
  CHECK_THAT(ErrorOf(resolve(Config(1, 3, 3), plain,
                             R"({"type": "worker", "index": 3})")),
             Catch::EndsWith("allows worker ids up to max_workers - 1 = 2"));
  // Without max_workers: the listed workers only.
  CHECK(ErrorOf(resolve(Config(1, 3), plain,
                        R"({"type": "worker", "index": 3})")) ==
        "TF_CONFIG: task worker:3: cluster.worker has 3 addresses");
  // Only workers are elastic; an index that is no index stays refused.
  CHECK(ErrorOf(
            resolve(Config(1, 3, 6), plain, R"({"type": "ps", "index": 1})")) ==
        "TF_CONFIG: task ps:1: cluster.ps has 1 address");
  CHECK(ErrorOf(resolve(Config(1, 3, 6), chief,
                        R"({"type": "chief", "index": 1})")) ==
        "TF_CONFIG: task chief:1: cluster.chief has 1 address");
  CHECK(ErrorOf(resolve(Config(1, 3, 6), plain,
                        R"({"type": "worker", "index": 3.5})")) ==
        "TF_CONFIG: task worker:3.5: cluster.worker has 3 addresses");
  CHECK(ErrorOf(resolve(Config(1, 3, 6), plain,
                        R"({"type": "worker", "index": -1})")) ==
        "TF_CONFIG: task worker:-1: cluster.worker has 3 addresses");
}

TEST_CASE("TF_CONFIG: bad input is named") {
  auto error = [](const std::string& json, int ps = 1, int workers = 2) {
    return ErrorOf(ResolveCluster(Config(ps, workers), "tf_config",
                                  {{"TF_CONFIG", json}}, 0));
  };
  const std::string ok_cluster =
      R"("cluster": {"worker": ["a:1", "b:1"], "ps": ["c:1"]})";
  CHECK_THAT(error("{not json"), Catch::StartsWith("TF_CONFIG: not JSON"));
  CHECK_THAT(error(R"({"task": {"type": "ps"}})"),
             Catch::StartsWith("TF_CONFIG: no \"cluster\" object"));
  CHECK_THAT(error("{" + ok_cluster + "}"),
             Catch::StartsWith("TF_CONFIG: no \"task\" object"));
  CHECK_THAT(
      error(R"({"cluster": {"worker": ["a:1", "b:1"], "ps": ["c:1"],
                            "evaluator": ["e:1"]}, "task": {"type": "ps"}})"),
      Catch::StartsWith("TF_CONFIG: cluster.evaluator: a role psgd does not "
                        "have"));
  CHECK_THAT(error("{" + ok_cluster + R"(, "task": {"type": "ps"}})", 2),
             Catch::StartsWith("TF_CONFIG: cluster.ps has 1 addresses, but "
                               "config 'c' has 2 ps tasks"));
  CHECK_THAT(error("{" + ok_cluster + R"(, "task": {"type": "ps"}})", 1, 3),
             Catch::StartsWith("TF_CONFIG: cluster has 2 workers (chief "
                               "included), but config 'c' has 3"));
  CHECK_THAT(
      error("{" + ok_cluster + R"(, "task": {"type": "worker", "index": 2}})"),
      Catch::StartsWith("TF_CONFIG: task worker:2: cluster.worker has 2 "
                        "addresses"));
  CHECK_THAT(error("{" + ok_cluster + R"(, "task": {"type": "master"}})"),
             Catch::StartsWith("TF_CONFIG: task.type 'master': a role psgd "
                               "does not have"));
  CHECK_THAT(error(R"({"cluster": {"worker": ["a:1", "a:1"], "ps": ["c:1"]},
                      "task": {"type": "ps"}})"),
             Catch::Contains("worker[1].address: 'a:1' is already the address "
                             "of worker:0"));
  CHECK_THAT(ErrorOf(ResolveCluster(Config(1, 2), "tf_config", {}, 0)),
             Catch::StartsWith("--cluster_from=tf_config: TF_CONFIG is not "
                               "set"));
  CHECK_THAT(ErrorOf(ResolveCluster(Config(1, 2), "mpi", {}, 0)),
             Catch::StartsWith("--cluster_from='mpi': expected slurm or "
                               "tf_config"));
}

}  // namespace
}  // namespace psgd
