// A worker task's outputs in its run directory, as both front ends open
// them: the file names, the step lines appended to on a restart, the
// chief's event file and run summary, the payload bytes left off the lines
// without a client.
#include "worker/session/task_outputs.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/file_io.h"

namespace psgd {
namespace {

// A fresh directory under the test's TEST_TMPDIR.
std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir =
      std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
      ("task_outputs_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

TaskOutputsOptions Worker(const std::string& run_dir, int j, bool chief) {
  TaskOutputsOptions o;
  o.run_dir = run_dir;
  o.task = TaskId{TaskId::Kind::kWorker, j};
  o.chief = chief;
  return o;
}

std::vector<std::string> Lines(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  REQUIRE(text.ok());
  std::vector<std::string> lines;
  size_t at = 0;
  while (at < text->size()) {
    const size_t end = text->find('\n', at);
    lines.push_back(text->substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return lines;
}

// The names of the files in `dir` that start with `prefix`.
std::vector<std::string> FilesStartingWith(const std::string& dir,
                                           const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) names.push_back(name);
  }
  return names;
}

TEST_CASE("the file names of worker task J in the run directory") {
  const std::string dir = FreshDir("names");
  TaskOutputsOptions o = Worker(dir, 3, /*chief=*/false);
  auto outputs = TaskOutputs::Open(o, nullptr, nullptr);
  REQUIRE(outputs.ok());
  CHECK((*outputs)->run_dir() == dir);
  CHECK((*outputs)->local_statistics_file() == dir + "/worker-3.batch_norm");
  CHECK((*outputs)->job_end_marker() == dir + "/summary.json");
  // No sample records unless the config asks for them.
  CHECK((*outputs)->samples_file().empty());
  CHECK(std::filesystem::exists(dir + "/worker-3.jsonl"));

  o.record_samples = true;
  auto recording = TaskOutputs::Open(o, nullptr, nullptr);
  REQUIRE(recording.ok());
  CHECK((*recording)->samples_file() == dir + "/samples-worker-3.jsonl");
}

TEST_CASE("a restarted worker adds to the step lines of the one before") {
  const std::string dir = FreshDir("restart");
  StepRecord r;
  r.global_step = 5;
  {
    auto first = TaskOutputs::Open(Worker(dir, 1, false), nullptr, nullptr);
    REQUIRE(first.ok());
    REQUIRE((*first)->WriteStep(r).ok());
  }
  r.global_step = 6;
  {
    auto again = TaskOutputs::Open(Worker(dir, 1, false), nullptr, nullptr);
    REQUIRE(again.ok());
    REQUIRE((*again)->WriteStep(r).ok());
    EvalRecord e;
    e.global_step = 6;
    e.test_accuracy = 0.5;
    REQUIRE((*again)->WriteEval(e).ok());
  }
  const std::vector<std::string> lines = Lines(dir + "/worker-1.jsonl");
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Catch::Contains("\"step\":5"));
  CHECK_THAT(lines[1], Catch::Contains("\"step\":6"));
  CHECK_THAT(lines[2], Catch::Contains("\"kind\":\"eval\""));
  for (const std::string& line : lines) {
    INFO(line);
    CHECK_THAT(line, Catch::Contains("\"task\":\"worker:1\""));
  }
  // Without a client no bytes are counted, so none are written; without a
  // training set's size, no train_examples.
  CHECK_THAT(lines[0], !Catch::Contains("sent_bytes"));
  CHECK_THAT(lines[0], !Catch::Contains("train_examples"));
}

TEST_CASE("the training set's size goes on every step line") {
  const std::string dir = FreshDir("examples");
  TaskOutputsOptions o = Worker(dir, 0, false);
  o.train_examples = 600;
  auto outputs = TaskOutputs::Open(o, nullptr, nullptr);
  REQUIRE(outputs.ok());
  REQUIRE((*outputs)->WriteStep(StepRecord()).ok());
  REQUIRE((*outputs)->WriteStep(StepRecord()).ok());
  for (const std::string& line : Lines(dir + "/worker-0.jsonl")) {
    CHECK_THAT(line, Catch::Contains("\"train_examples\":600"));
  }
}

TEST_CASE("the chief writes events and the run's summary; the others not") {
  const std::string dir = FreshDir("chief");
  ClusterConfig config;
  config.set_name("outputs");
  ClusterWorkerResult result;
  result.final_global_step = 12;
  result.end_reason = "max_steps";
  {
    auto worker = TaskOutputs::Open(Worker(dir, 1, false), nullptr, nullptr);
    REQUIRE(worker.ok());
    REQUIRE((*worker)->WriteSummaries(config, result).ok());
  }
  CHECK(FilesStartingWith(dir, "events.out.tfevents.").empty());
  CHECK(std::filesystem::exists(dir + "/worker-1.summary.json"));
  CHECK_FALSE(std::filesystem::exists(dir + "/summary.json"));

  WorkerMetrics prometheus(0);
  auto chief = TaskOutputs::Open(Worker(dir, 0, true), nullptr, &prometheus);
  REQUIRE(chief.ok());
  StepRecord r;
  r.global_step = 12;
  REQUIRE((*chief)->WriteStep(r).ok());
  const std::vector<std::string> events =
      FilesStartingWith(dir, "events.out.tfevents.");
  REQUIRE(events.size() == 1);
  CHECK_THAT(events[0], Catch::EndsWith(".worker-0"));
  CHECK_THAT(prometheus.Text(), Catch::Contains("psgd_worker"));
  REQUIRE((*chief)->WriteSummaries(config, result).ok());
  absl::StatusOr<std::string> summary = ReadFileToString(dir + "/summary.json");
  REQUIRE(summary.ok());
  CHECK_THAT(*summary, Catch::Contains("\"cluster\":\"outputs\""));
  CHECK_THAT(*summary, Catch::Contains("\"final_global_step\":12"));
  absl::StatusOr<std::string> mine =
      ReadFileToString(dir + "/worker-0.summary.json");
  REQUIRE(mine.ok());
  CHECK_THAT(*mine, Catch::Contains("\"task\":\"worker:0\""));
  CHECK_THAT(*mine, Catch::Contains("\"end_reason\":\"max_steps\""));
}

TEST_CASE("a run directory that is not there is an error naming the file") {
  const std::string dir = FreshDir("missing") + "/not_made";
  auto outputs = TaskOutputs::Open(Worker(dir, 2, false), nullptr, nullptr);
  REQUIRE_FALSE(outputs.ok());
  CHECK_THAT(std::string(outputs.status().message()),
             Catch::Contains(dir + "/worker-2.jsonl"));
}

}  // namespace
}  // namespace psgd
