// The metric sinks: a step's and an evaluation's JSONL lines as
// scripts/run/compare.py reads them, with the context's fields only where
// known, for the cluster worker and the local trainer alike.
#include "worker/session/metric_sinks.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "common/file_io.h"

namespace psgd {
namespace {

std::string TempFile(const std::string& name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

TEST_CASE("a step line: the record, the outcome's name, the context") {
  const std::string path = TempFile("metric_sinks_test_step.jsonl");
  std::filesystem::remove(path);
  {
    auto writer = MetricsWriter::Open(path);
    REQUIRE(writer.ok());
    WorkerMetrics prometheus(2);
    MetricSinks sinks("worker:2", writer->get(), nullptr, &prometheus);
    StepRecord r;
    r.local_step = 4;
    r.global_step = 17;
    r.loss = 1.5;
    r.staleness = 3;
    r.outcome = StepOutcome::kDroppedStale;
    StepContext c;
    c.sent_bytes = 1000;
    c.received_bytes = 2000;
    c.train_examples = 600;
    REQUIRE(sinks.WriteStep(r, c).ok());
    // A local trainer's step: no bytes counted.
    REQUIRE(sinks.WriteStep(r, StepContext()).ok());
    CHECK_THAT(prometheus.Text(), Catch::Contains("dropped_stale"));
  }
  absl::StatusOr<std::string> text = ReadFileToString(path);
  REQUIRE(text.ok());
  const std::string first = text->substr(0, text->find('\n'));
  const std::string second = text->substr(text->find('\n') + 1);
  for (const char* field :
       {"\"kind\":\"train\"", "\"task\":\"worker:2\"", "\"step\":17",
        "\"local_step\":4", "\"staleness\":3", "\"outcome\":\"dropped_stale\"",
        "\"sent_bytes\":1000", "\"received_bytes\":2000",
        "\"train_examples\":600", "\"unix_time\":"}) {
    INFO(field);
    CHECK_THAT(first, Catch::Contains(field));
  }
  CHECK_THAT(second, !Catch::Contains("sent_bytes"));
  CHECK_THAT(second, !Catch::Contains("train_examples"));
  std::filesystem::remove(path);
}

TEST_CASE("an eval line carries the epoch only where the trainer knows it") {
  const std::string path = TempFile("metric_sinks_test_eval.jsonl");
  std::filesystem::remove(path);
  {
    auto writer = MetricsWriter::Open(path);
    REQUIRE(writer.ok());
    MetricSinks sinks("local", writer->get(), nullptr, nullptr);
    EvalRecord e;
    e.global_step = 50;
    e.test_accuracy = 0.25;
    e.final = true;
    REQUIRE(sinks.WriteEval(e).ok());  // a cluster's: epoch unknown
    e.epoch = 1.5;
    REQUIRE(sinks.WriteEval(e).ok());
  }
  absl::StatusOr<std::string> text = ReadFileToString(path);
  REQUIRE(text.ok());
  const std::string first = text->substr(0, text->find('\n'));
  const std::string second = text->substr(text->find('\n') + 1);
  CHECK_THAT(first, Catch::Contains("\"kind\":\"eval\""));
  CHECK_THAT(first, Catch::Contains("\"final\":true"));
  CHECK_THAT(first, !Catch::Contains("epoch"));
  CHECK_THAT(second, Catch::Contains("\"epoch\":1.5"));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace psgd
