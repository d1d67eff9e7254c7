#include "common/metrics.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"

namespace psgd {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("records hold numbers, strings and booleans in field order") {
  JsonObject o;
  o.Set("kind", "train")
      .Set("step", int64_t{42})
      .Set("epoch", 3)
      .Set("loss", 0.25)
      .Set("ok", true)
      .Set("name", std::string("a\"b\\c\nd\x01"));
  CHECK(o.ToString() ==
        "{\"kind\":\"train\",\"step\":42,\"epoch\":3,\"loss\":0.25,\"ok\":true,"
        "\"name\":\"a\\\"b\\\\c\\nd\\u0001\"}");
  // Setting a key again replaces its value where it stands.
  o.Set("step", int64_t{43});
  CHECK(o.ToString().find("\"step\":43,\"epoch\"") != std::string::npos);
  // JSON has no NaN or infinity.
  JsonObject n;
  n.Set("a", std::nan(""))
      .Set("b", 1.0 / 0.0)
      .Set("c", 1e-300)
      .Set("d", 123456789.0);
  CHECK(n.ToString() == "{\"a\":null,\"b\":null,\"c\":1e-300,\"d\":123456789}");
  // A Unix time keeps its microseconds; short decimals stay short.
  CHECK(JsonObject().Set("t", 1795459285.123456).ToString() ==
        "{\"t\":1795459285.123456}");
  CHECK(JsonObject().Set("x", 0.1).ToString() == "{\"x\":0.1}");
  CHECK(JsonObject().ToString() == "{}");
  CHECK(JsonObject().empty());
  // Arrays of integers.
  const std::vector<int64_t> ids = {7, -1, 12345678901};
  CHECK(JsonObject().SetArray("samples", ids).SetArray("none", {}).ToString() ==
        "{\"samples\":[7,-1,12345678901],\"none\":[]}");
}

TEST_CASE("each record is one line, readable before the writer closes") {
  const std::string dir = TempDir("metrics_lines");
  auto w = MetricsWriter::Open(dir + "/metrics.jsonl");
  REQUIRE(w.ok());
  REQUIRE((*w)->Write(JsonObject().Set("step", 1)).ok());
  CHECK(ReadAll(dir + "/metrics.jsonl") == "{\"step\":1}\n");  // flushed
  REQUIRE((*w)->Write(JsonObject().Set("kind", "eval").Set("step", 2)).ok());
  CHECK(ReadAll(dir + "/metrics.jsonl") ==
        "{\"step\":1}\n{\"kind\":\"eval\",\"step\":2}\n");
  CHECK((*w)->path() == dir + "/metrics.jsonl");
}

TEST_CASE("a restarted task appends, ending a line cut short first") {
  const std::string dir = TempDir("metrics_append");
  const std::string path = dir + "/m.jsonl";
  {
    auto w = MetricsWriter::Open(path).value();
    REQUIRE(w->Write(JsonObject().Set("step", 1)).ok());
  }
  {
    auto w = MetricsWriter::Open(path, /*append=*/true).value();
    REQUIRE(w->Write(JsonObject().Set("step", 2)).ok());
  }
  CHECK(ReadAll(path) == "{\"step\":1}\n{\"step\":2}\n");
  std::FILE* f = std::fopen(path.c_str(), "a");
  std::fputs("{\"st", f);  // a process killed mid-line
  std::fclose(f);
  auto w = MetricsWriter::Open(path, /*append=*/true).value();
  REQUIRE(w->Write(JsonObject().Set("step", 3)).ok());
  CHECK(ReadAll(path) == "{\"step\":1}\n{\"step\":2}\n{\"st\n{\"step\":3}\n");
  // A new file in append mode is just a new file.
  auto fresh = MetricsWriter::Open(dir + "/new.jsonl", true).value();
  REQUIRE(fresh->Write(JsonObject().Set("step", 0)).ok());
  CHECK(ReadAll(dir + "/new.jsonl") == "{\"step\":0}\n");
}

TEST_CASE("records written from several threads stay whole lines") {
  const std::string dir = TempDir("metrics_threads");
  auto w = MetricsWriter::Open(dir + "/m.jsonl").value();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};  // Catch2's CHECK is not thread-safe
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const absl::Status s = w->Write(JsonObject()
                                            .Set("thread", t)
                                            .Set("i", i)
                                            .Set("pad", std::string(100, 'x')));
        if (!s.ok()) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(failures == 0);
  w.reset();
  std::vector<std::string> lines =
      absl::StrSplit(ReadAll(dir + "/m.jsonl"), '\n');
  REQUIRE(lines.size() == 801);  // and an empty string after the last '\n'
  for (int i = 0; i < 800; ++i) {
    CHECK(lines[i].front() == '{');
    CHECK(lines[i].back() == '}');
  }
}

TEST_CASE("summary files are written whole; run directories are made") {
  const std::string dir = TempDir("metrics_summary");
  REQUIRE(WriteJsonFile(dir + "/summary.json",
                        JsonObject().Set("steps", 10).Set("accuracy", 0.5))
              .ok());
  CHECK(ReadAll(dir + "/summary.json") ==
        "{\n  \"steps\":10,\n  \"accuracy\":0.5\n}\n");
  CHECK(!fs::exists(dir + "/summary.json.tmp"));
  CHECK(WriteJsonFile(dir + "/no/such/dir/summary.json", JsonObject()).code() ==
        absl::StatusCode::kNotFound);

  const absl::Time t = absl::FromUnixSeconds(1795000000);
  absl::StatusOr<std::string> run =
      CreateRunDir("", dir + "/runs", "train_local", t);
  REQUIRE(run.ok());
  CHECK(fs::is_directory(*run));
  CHECK(run->find(dir + "/runs/train_local-20") == 0);
  CHECK(run->size() == (dir + "/runs/train_local-YYYYMMDD-HHMMSS").size());
  // Given explicitly; an existing directory is fine.
  CHECK(CreateRunDir(dir + "/mine", "runs", "x", t).value() == dir + "/mine");
  CHECK(CreateRunDir(dir + "/mine", "runs", "x", t).ok());
  absl::Status s = CreateRunDir(dir + "/summary.json", "runs", "x", t).status();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(MetricsWriter::Open(dir + "/missing/m.jsonl").status().code() ==
        absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psgd
