// train_local's loop on the synthetic set: it learns (more than 90% training
// accuracy within 300 steps), writes its metrics, evaluates on schedule, and
// refuses bad options. A generous budget: the model is the full tutorial
// network at batch 32.
#include "worker/train/local_trainer.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_split.h"

namespace psgd {
namespace {

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::filesystem::path dir =
      std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

LocalTrainerOptions SyntheticOptions() {
  LocalTrainerOptions o;
  o.data.name = "synthetic";
  o.data.synthetic_train = 2000;
  o.data.synthetic_test = 500;
  o.batch_size = 32;
  o.epochs = 0;
  o.steps = 300;
  o.eval_every = 150;
  o.log_every = 50;
  o.threads = 2;
  return o;
}

TEST_CASE("train_local learns the synthetic set within 300 steps") {
  const std::string dir = TempDir("trainer_synthetic");
  auto metrics = MetricsWriter::Open(dir + "/metrics.jsonl").value();
  const LocalTrainerOptions o = SyntheticOptions();
  absl::StatusOr<LocalTrainingResult> r = RunLocalTraining(o, metrics.get());
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  CHECK(r->steps == 300);
  INFO("recent training accuracy " << r->recent_train_accuracy);
  CHECK(r->recent_train_accuracy > 0.9);
  REQUIRE(r->evals.size() == 2);  // steps 150 and 300
  CHECK(r->evals[0].step == 150);
  CHECK(r->evals[1].step == 300);
  INFO("test accuracy " << r->evals[1].test_accuracy);
  CHECK(r->evals[1].test_accuracy > 0.9);

  metrics.reset();
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line;
  int train = 0, eval = 0;
  while (std::getline(in, line)) {
    if (line.find("\"kind\":\"train\"") != std::string::npos) {
      ++train;
      for (const char* field :
           {"\"step\":", "\"wall_time_s\":", "\"loss\":", "\"train_accuracy\":",
            "\"images_per_s\":", "\"compute_s\":", "\"batch_size\":32",
            "\"step_s\":"}) {
        CHECK(line.find(field) != std::string::npos);
      }
    } else if (line.find("\"kind\":\"eval\"") != std::string::npos) {
      ++eval;
      CHECK(line.find("\"test_accuracy\":") != std::string::npos);
    }
  }
  CHECK(train == 300);
  CHECK(eval == 2);

  JsonObject summary = SummaryOf(o, *r);
  CHECK(summary.ToString().find("\"final_test_accuracy\":") !=
        std::string::npos);
}

TEST_CASE("epochs end the run; a final evaluation follows the last step") {
  LocalTrainerOptions o = SyntheticOptions();
  o.data.synthetic_train = 100;
  o.data.synthetic_test = 40;
  o.steps = 0;
  o.epochs = 2;
  o.eval_every = 4;
  o.log_every = 0;
  absl::StatusOr<LocalTrainingResult> r = RunLocalTraining(o, nullptr);
  REQUIRE(r.ok());
  CHECK(r->steps == 6);           // 3 full batches of 32 per epoch
  REQUIRE(r->evals.size() == 2);  // at step 4 and after the last
  CHECK(r->evals[1].step == 6);
  CHECK(r->evals[1].epoch == Approx(2.0));
}

TEST_CASE("bad options are refused before anything runs") {
  LocalTrainerOptions o = SyntheticOptions();
  o.epochs = 3;  // and steps = 300
  CHECK(RunLocalTraining(o, nullptr).status().code() ==
        absl::StatusCode::kInvalidArgument);
  o = SyntheticOptions();
  o.batch_size = 0;
  CHECK(RunLocalTraining(o, nullptr).status().code() ==
        absl::StatusCode::kInvalidArgument);
  o = SyntheticOptions();
  o.optimizer.learning_rate = -1;
  CHECK(RunLocalTraining(o, nullptr).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // The schedule's factors, and a warmup longer than the run.
  o = SyntheticOptions();
  o.schedule.decay = LrSchedule::Decay::kCosine;
  o.schedule.final_factor = 2;
  CHECK_THAT(std::string(ValidateLocalTrainerOptions(o).message()),
             Catch::Contains("final_factor is 2"));
  o = SyntheticOptions();
  o.schedule.warmup_from = -0.5;
  CHECK_THAT(std::string(ValidateLocalTrainerOptions(o).message()),
             Catch::Contains("warmup_from is -0.5"));
  o = SyntheticOptions();
  o.schedule.warmup_epochs = 1000;
  CHECK_THAT(std::string(RunLocalTraining(o, nullptr).status().message()),
             Catch::Contains("goes past the last step"));
  o = SyntheticOptions();
  o.model = "nope";
  CHECK_THAT(std::string(RunLocalTraining(o, nullptr).status().message()),
             Catch::Contains("unknown model 'nope'"));
  o = SyntheticOptions();
  o.data.name = "cifar10";
  o.data.data_dir = "/nonexistent";
  CHECK(RunLocalTraining(o, nullptr).status().code() ==
        absl::StatusCode::kNotFound);
  o = SyntheticOptions();
  o.batch_size = 5000;  // more than the 2000 examples
  CHECK_THAT(std::string(RunLocalTraining(o, nullptr).status().message()),
             Catch::Contains("fewer than one batch"));
}

}  // namespace
}  // namespace psgd
