#include "common/cluster_env.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

extern char** environ;

namespace psgd {
namespace {

absl::Status Bad(absl::string_view variable, absl::string_view value,
                 absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(variable, "='", value, "': ", why));
}

// The first of `names` that `env` has; empty when none.
std::pair<std::string, std::string> FirstOf(
    const Environment& env, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = env.find(n);
    if (it != env.end() && !it->second.empty()) return {n, it->second};
  }
  return {"", ""};
}

// Splits at commas outside brackets.
std::vector<std::string> SplitTopLevel(absl::string_view s) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  parts.push_back(current);
  return parts;
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

bool ValidHostChars(absl::string_view s) {
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '.' && c != '_') {
      return false;
    }
  }
  return true;
}

// Replaces task addresses; ps tasks listen on every interface.
void SetAddress(ClusterConfig* config, const TaskId& task,
                const std::string& address) {
  if (task.kind == TaskId::Kind::kPs) {
    config::PsTask* p = config->mutable_ps(task.index);
    p->set_address(address);
    p->set_listen_address(
        absl::StrCat("0.0.0.0:", address.substr(address.rfind(':') + 1)));
  } else {
    config->mutable_worker(task.index)->set_address(address);
  }
}

}  // namespace

Environment ProcessEnvironment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    const size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  return env;
}

absl::StatusOr<std::vector<std::string>> ExpandSlurmNodelist(
    absl::string_view nodelist) {
  const std::string why_syntax =
      "not a Slurm node list (such as 'n1', 'n[1-3,5]' or 'a[01-02],b7')";
  if (nodelist.empty()) return Bad("nodelist", nodelist, "empty");
  std::vector<std::string> hosts;
  for (const std::string& part : SplitTopLevel(nodelist)) {
    const size_t open = part.find('[');
    if (open == std::string::npos) {
      if (part.empty() || !ValidHostChars(part) ||
          part.find(']') != std::string::npos) {
        return Bad("nodelist", nodelist, why_syntax);
      }
      hosts.push_back(part);
      continue;
    }
    const size_t close = part.find(']', open);
    if (open == 0 || close != part.size() - 1 ||
        !ValidHostChars(part.substr(0, open))) {
      return Bad("nodelist", nodelist, why_syntax);
    }
    const std::string prefix = part.substr(0, open);
    for (absl::string_view range : absl::StrSplit(
             absl::string_view(part).substr(open + 1, close - open - 1), ',')) {
      std::vector<absl::string_view> ends = absl::StrSplit(range, '-');
      if (ends.size() > 2 || !AllDigits(ends[0]) ||
          (ends.size() == 2 && !AllDigits(ends[1]))) {
        return Bad("nodelist", nodelist, why_syntax);
      }
      int64_t lo = 0, hi = 0;
      if (!absl::SimpleAtoi(ends[0], &lo) ||
          !absl::SimpleAtoi(ends.back(), &hi) || hi < lo || hi - lo > 100000) {
        return Bad("nodelist", nodelist,
                   absl::StrCat("range '", range, "' is not LOW-HIGH"));
      }
      const size_t width = ends[0].size();
      for (int64_t n = lo; n <= hi; ++n) {
        std::string digits = absl::StrCat(n);
        if (digits.size() < width) {
          digits.insert(0, width - digits.size(), '0');
        }
        hosts.push_back(prefix + digits);
      }
    }
  }
  return hosts;
}

absl::StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(
    absl::string_view spec) {
  const std::string why =
      "not a Slurm tasks-per-node list (such as '2', '2,1' or '3(x2),1')";
  if (spec.empty()) return Bad("tasks per node", spec, "empty");
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    int count = 0, repeat = 1;
    const size_t open = part.find("(x");
    absl::string_view number = part.substr(0, open);
    if (!AllDigits(number) || !absl::SimpleAtoi(number, &count) || count < 1) {
      return Bad("tasks per node", spec, why);
    }
    if (open != absl::string_view::npos) {
      absl::string_view times = part.substr(open + 2);
      if (times.empty() || times.back() != ')' ||
          !AllDigits(times.substr(0, times.size() - 1)) ||
          !absl::SimpleAtoi(times.substr(0, times.size() - 1), &repeat) ||
          repeat < 1 || repeat > 100000) {
        return Bad("tasks per node", spec, why);
      }
    }
    for (int i = 0; i < repeat; ++i) out.push_back(count);
  }
  return out;
}

absl::StatusOr<ResolvedCluster> ClusterFromSlurm(const ClusterConfig& config,
                                                 const Environment& env,
                                                 int port_base) {
  if (port_base < 1 || port_base > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--slurm_port_base=", port_base, ": not a port (1..65535)"));
  }
  const auto [procid_var, procid_text] = FirstOf(env, {"SLURM_PROCID"});
  const auto [ntasks_var, ntasks_text] =
      FirstOf(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  const auto [nodes_var, nodes_text] =
      FirstOf(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"});
  const auto [tpn_var, tpn_text] =
      FirstOf(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  if (procid_var.empty() || ntasks_var.empty() || nodes_var.empty() ||
      tpn_var.empty()) {
    std::vector<std::string> missing;
    if (procid_var.empty()) missing.push_back("SLURM_PROCID");
    if (ntasks_var.empty()) missing.push_back("SLURM_STEP_NUM_TASKS");
    if (nodes_var.empty()) missing.push_back("SLURM_STEP_NODELIST");
    if (tpn_var.empty()) missing.push_back("SLURM_STEP_TASKS_PER_NODE");
    return absl::InvalidArgumentError(absl::StrCat(
        "--cluster_from=slurm: ", absl::StrJoin(missing, ", "),
        " not set: start the tasks with srun (in an sbatch script)"));
  }
  const int total = config.ps_size() + config.worker_size();
  int ntasks = 0, procid = 0;
  if (!absl::SimpleAtoi(ntasks_text, &ntasks) || ntasks < 1) {
    return Bad(ntasks_var, ntasks_text, "not a task count");
  }
  if (ntasks != total) {
    return Bad(
        ntasks_var, ntasks_text,
        absl::StrCat("config '", config.name(), "' has ", config.ps_size(),
                     " ps and ", config.worker_size(), " worker tasks (", total,
                     "): run srun with -n ", total));
  }
  if (!absl::SimpleAtoi(procid_text, &procid) || procid < 0 ||
      procid >= ntasks) {
    return Bad(procid_var, procid_text,
               absl::StrCat("not a rank in 0..", ntasks - 1));
  }
  absl::StatusOr<std::vector<std::string>> nodes =
      ExpandSlurmNodelist(nodes_text);
  if (!nodes.ok()) {
    return Bad(nodes_var, nodes_text, nodes.status().message());
  }
  absl::StatusOr<std::vector<int>> per_node = ExpandSlurmTasksPerNode(tpn_text);
  if (!per_node.ok()) {
    return Bad(tpn_var, tpn_text, per_node.status().message());
  }
  if (per_node->size() != nodes->size()) {
    return Bad(
        tpn_var, tpn_text,
        absl::StrCat("counts ", per_node->size(), " nodes, but ", nodes_var,
                     "='", nodes_text, "' names ", nodes->size()));
  }
  int sum = 0;
  for (int n : *per_node) sum += n;
  if (sum != ntasks) {
    return Bad(tpn_var, tpn_text,
               absl::StrCat("adds up to ", sum, " tasks, but ", ntasks_var,
                            " is ", ntasks));
  }
  ResolvedCluster r{config, {}, "slurm"};
  int rank = 0;
  for (size_t node = 0; node < nodes->size(); ++node) {
    for (int k = 0; k < (*per_node)[node]; ++k, ++rank) {
      if (port_base + k > 65535) {
        return Bad(tpn_var, tpn_text,
                   absl::StrCat("too many tasks on ", (*nodes)[node],
                                " for ports from ", port_base));
      }
      TaskId task;
      task.kind =
          rank < config.ps_size() ? TaskId::Kind::kPs : TaskId::Kind::kWorker;
      task.index = rank < config.ps_size() ? rank : rank - config.ps_size();
      SetAddress(&r.config, task,
                 absl::StrCat((*nodes)[node], ":", port_base + k));
      if (rank == procid) r.task = task;
    }
  }
  return r;
}

absl::StatusOr<ResolvedCluster> ClusterFromTfConfig(const ClusterConfig& config,
                                                    const Environment& env) {
  auto it = env.find("TF_CONFIG");
  if (it == env.end() || it->second.empty()) {
    return absl::InvalidArgumentError(
        "--cluster_from=tf_config: TF_CONFIG is not set (a TFJob sets it "
        "for each replica)");
  }
  google::protobuf::Struct root;
  google::protobuf::util::JsonParseOptions options;
  if (auto s = google::protobuf::util::JsonStringToMessage(it->second, &root,
                                                           options);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: not JSON: ", s.message().as_string()));
  }
  const auto& fields = root.fields();
  auto cluster_it = fields.find("cluster");
  auto task_it = fields.find("task");
  if (cluster_it == fields.end() || !cluster_it->second.has_struct_value()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG: no \"cluster\" object (role -> list of host:port)");
  }
  if (task_it == fields.end() || !task_it->second.has_struct_value()) {
    return absl::InvalidArgumentError(
        "TF_CONFIG: no \"task\" object ({\"type\": ROLE, \"index\": I})");
  }
  // role -> addresses
  std::map<std::string, std::vector<std::string>> roles;
  for (const auto& [role, value] : cluster_it->second.struct_value().fields()) {
    if (role != "chief" && role != "worker" && role != "ps") {
      return absl::InvalidArgumentError(
          absl::StrCat("TF_CONFIG: cluster.", role,
                       ": a role psgd does not have (chief, worker, ps)"));
    }
    if (!value.has_list_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: cluster.", role, ": not a list of host:port"));
    }
    for (const auto& v : value.list_value().values()) {
      if (v.kind_case() != google::protobuf::Value::kStringValue) {
        return absl::InvalidArgumentError(absl::StrCat(
            "TF_CONFIG: cluster.", role, ": not a list of host:port strings"));
      }
      roles[role].push_back(v.string_value());
    }
  }
  const bool has_chief = roles.count("chief") > 0;
  if (has_chief && roles["chief"].size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: cluster.chief has ", roles["chief"].size(),
                     " addresses; a TFJob has one chief"));
  }
  const int workers =
      static_cast<int>(roles["worker"].size()) + (has_chief ? 1 : 0);
  if (static_cast<int>(roles["ps"].size()) != config.ps_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: cluster.ps has ", roles["ps"].size(),
                     " addresses, but config '", config.name(), "' has ",
                     config.ps_size(), " ps tasks"));
  }
  if (workers != config.worker_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: cluster has ", workers,
                     " workers (chief included), but "
                     "config '",
                     config.name(), "' has ", config.worker_size()));
  }
  ResolvedCluster r{config, {}, "tf_config"};
  for (int i = 0; i < config.ps_size(); ++i) {
    SetAddress(&r.config, {TaskId::Kind::kPs, i}, roles["ps"][i]);
  }
  if (has_chief) {
    SetAddress(&r.config, {TaskId::Kind::kWorker, 0}, roles["chief"][0]);
  }
  for (size_t i = 0; i < roles["worker"].size(); ++i) {
    SetAddress(
        &r.config,
        {TaskId::Kind::kWorker, static_cast<int>(i) + (has_chief ? 1 : 0)},
        roles["worker"][i]);
  }
  const auto& task = task_it->second.struct_value().fields();
  auto type_it = task.find("type");
  auto index_it = task.find("index");
  if (type_it == task.end() ||
      type_it->second.kind_case() != google::protobuf::Value::kStringValue) {
    return absl::InvalidArgumentError("TF_CONFIG: task.type missing");
  }
  const std::string type = type_it->second.string_value();
  double index = 0;
  if (index_it != task.end()) {
    if (index_it->second.kind_case() != google::protobuf::Value::kNumberValue) {
      return absl::InvalidArgumentError("TF_CONFIG: task.index: not a number");
    }
    index = index_it->second.number_value();
  }
  const int count =
      roles.count(type) ? static_cast<int>(roles[type].size()) : 0;
  if (type != "chief" && type != "worker" && type != "ps") {
    return absl::InvalidArgumentError(
        absl::StrCat("TF_CONFIG: task.type '", type,
                     "': a role psgd does not have (chief, worker, ps)"));
  }
  const std::string listed =
      absl::StrCat("TF_CONFIG: task ", type, ":", index, ": cluster.", type,
                   " has ", count, " address", count == 1 ? "" : "es");
  if (std::trunc(index) != index || index < 0) {
    return absl::InvalidArgumentError(listed);
  }
  if (index >= count) {
    // An elastic worker (config max_workers): a worker id beyond the listed
    // workers, up to max_workers - 1. Its own address is not needed (workers
    // do not listen); the listed addresses stay as they are.
    const double id = index + (has_chief ? 1 : 0);
    if (type != "worker" || !config.has_max_workers()) {
      return absl::InvalidArgumentError(listed);
    }
    if (id >= MaxWorkers(config)) {
      return absl::InvalidArgumentError(absl::StrCat(
          listed,
          has_chief ? absl::StrCat(" (worker:", id, " after the chief)") : "",
          " and config '", config.name(),
          "' allows worker ids up to max_workers - 1 = ",
          MaxWorkers(config) - 1));
    }
  }
  const int i = static_cast<int>(index);
  if (type == "ps") {
    r.task = {TaskId::Kind::kPs, i};
  } else {
    r.task = {TaskId::Kind::kWorker,
              type == "chief" ? 0 : i + (has_chief ? 1 : 0)};
  }
  return r;
}

absl::StatusOr<ResolvedCluster> ResolveCluster(const ClusterConfig& config,
                                               absl::string_view source,
                                               const Environment& env,
                                               int slurm_port_base) {
  absl::StatusOr<ResolvedCluster> r;
  if (source == "slurm") {
    r = ClusterFromSlurm(config, env, slurm_port_base);
  } else if (source == "tf_config") {
    r = ClusterFromTfConfig(config, env);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cluster_from='", source, "': expected slurm or tf_config"));
  }
  if (!r.ok()) return r;
  // Validated as a file would be (addresses, duplicates). The token was
  // read from token_file on load: keep one of the two.
  ClusterConfig check = r->config;
  if (check.security().has_token_file()) {
    check.mutable_security()->clear_token();
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(check, &text);
  absl::StatusOr<ClusterConfig> valid =
      ParseClusterConfig(text, absl::StrCat("the cluster from ", source));
  if (!valid.ok()) return valid.status();
  return r;
}

absl::StatusOr<ResolvedCluster> ResolveTask(const ClusterConfig& config,
                                            absl::string_view task_flag,
                                            absl::string_view source,
                                            const Environment& env,
                                            int slurm_port_base) {
  if (source.empty()) {
    if (task_flag.empty()) {
      return absl::InvalidArgumentError(
          "--task is required (or --cluster_from=slurm|tf_config)");
    }
    ASSIGN_OR_RETURN(TaskId task, ParseTaskId(task_flag, config));
    return ResolvedCluster{config, task, "config"};
  }
  ASSIGN_OR_RETURN(ResolvedCluster r,
                   ResolveCluster(config, source, env, slurm_port_base));
  if (!task_flag.empty() && task_flag != r.task.ToString()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--task=", task_flag, " but --cluster_from=", source,
                     " makes this process ", r.task.ToString()));
  }
  return r;
}

std::string ClusterConfigText(const ClusterConfig& config) {
  ClusterConfig c = config;
  if (c.security().has_token_file()) c.mutable_security()->clear_token();
  // The default token file in the user's own config directory is found
  // again by whoever loads the text as that user: no block to print for
  // it. One that PSGD_TOKEN_FILE named (a job's directory) is printed, so
  // that a task started later from the text (an elastic worker in another
  // srun step) reads the same file.
  const char* named = std::getenv("PSGD_TOKEN_FILE");
  if (absl::StatusOr<std::string> fallback = DefaultTokenFile(c.name());
      fallback.ok() && c.security().token_file() == *fallback &&
      (named == nullptr || *fallback != named)) {
    c.mutable_security()->clear_token_file();
    if (c.security().ByteSizeLong() == 0) c.clear_security();
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(c, &text);
  return text;
}

std::string PrintResolvedCluster(const ResolvedCluster& cluster) {
  return absl::StrCat("# this task: ", cluster.task.ToString(), " (from ",
                      cluster.source, ")\n", ClusterConfigText(cluster.config));
}

}  // namespace psgd
