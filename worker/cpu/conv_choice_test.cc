// The per-shape choice between Winograd and the direct kernel (conv=auto,
// conv_choice.h): the faster by the measure wins, the choice is cached per
// key and noted, a failed measurement chooses nothing; and the CPU
// backend's default runs, bit for bit, the kernel its note names, in
// float32 and in bfloat16 compute (its own key).
#include "worker/cpu/conv_choice.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "common/file_io.h"
#include "worker/backend/op_shapes.h"
#include "worker/backend_factory/factory.h"
#include "worker/cpu/conv_winograd.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/testing/gradcheck.h"

namespace psgd {
namespace {

using testing::Download;
using testing::Unwrap;
using testing::Upload;
using testing::Zeros;

// The default backend and one of each kernel's.
struct ThreeBackends {
  std::tuple<std::unique_ptr<Backend>, std::unique_ptr<Backend>,
             std::unique_ptr<Backend>>
      backends = {testing::MakeBackend("cpu"),
                  testing::MakeBackend("cpu:conv=winograd"),
                  testing::MakeBackend("cpu:conv=onednn")};
  // Pads `s` by 1 in the largest channel block of at most the default
  // backend's that divides both sides' channels (8 for 16 in and 24 out on
  // an AVX-512 CPU, whose block is 16); whether Winograd applies to it on
  // this CPU (it says SKIP where not).
  bool WinogradApplies(Conv2dShape* s) const {
    s->padding = 1;
    const int64_t block = std::get<0>(backends)->ChannelBlock();
    s->in_block = s->out_block =
        std::min(LargestChannelBlock(s->in_channels, block),
                 LargestChannelBlock(s->out_channels, block));
    if (WinogradConv2dApplies(*s)) return true;
    std::cout << "SKIP: Winograd does not apply on this CPU\n";
    return false;
  }
};

// The forward of a convolution of shape `s` made by `be` on the host
// values x, w and b, read back.
std::vector<float> ForwardOn(Backend* be, const Conv2dShape& s,
                             const std::vector<float>& x,
                             const std::vector<float>& w,
                             const std::vector<float>& b) {
  auto op = Unwrap(be->CreateConv2d(s));
  DeviceTensor tx = Upload(be, x, s.input());
  DeviceTensor tw = Upload(be, w, s.filter());
  DeviceTensor tb = Upload(be, b, s.bias());
  DeviceTensor y = Zeros(be, s.output());
  REQUIRE_OK(op->Forward(tx.view(), tw.view(), tb.view(), y.view()));
  return Download(be, y.view());
}

TEST_CASE("the faster op by the measure is chosen, once per key") {
  auto backend = testing::MakeBackend("cpu:conv=onednn");
  Conv2dShape s{2, 8, 6, 6, 8, 3, 3};
  s.padding = 1;
  auto a = Unwrap(backend->CreateConv2d(s));
  auto b = Unwrap(backend->CreateConv2d(s));
  std::map<Conv2dOp*, double> ms = {{a.get(), 5.0}, {b.get(), 7.0}};
  int measured = 0;
  ConvChooser chooser([&](Conv2dOp* op) -> absl::StatusOr<double> {
    ++measured;
    return ms.at(op);
  });
  CHECK_FALSE(chooser.Cached("k").has_value());
  // a as Winograd, faster: Winograd.
  CHECK(Unwrap(chooser.Choose("k", a.get(), b.get())));
  CHECK(measured == 2);
  // Cached: not measured again, even were the times to turn.
  ms[a.get()] = 9.0;
  CHECK(Unwrap(chooser.Choose("k", a.get(), b.get())));
  CHECK(measured == 2);
  CHECK(chooser.Cached("k") == std::optional<bool>(true));
  // Another key, the direct one faster.
  CHECK_FALSE(Unwrap(chooser.Choose("j", a.get(), b.get())));
  const std::vector<std::string> notes = chooser.Notes();
  REQUIRE(notes.size() == 2);
  CHECK(notes[0] == "k: Winograd 5.00 ms, direct 7.00 ms: Winograd");
  CHECK(notes[1] == "j: Winograd 9.00 ms, direct 7.00 ms: direct");
  // A measurement that fails chooses nothing.
  ConvChooser failing([](Conv2dOp*) -> absl::StatusOr<double> {
    return absl::InternalError("no clock");
  });
  CHECK(failing.Choose("k", a.get(), b.get()).status().message() == "no clock");
  CHECK_FALSE(failing.Cached("k").has_value());
}

std::string TempDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(t != nullptr ? t : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::string FileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_CASE(
    "a second chooser takes the first one's choices from the cache file") {
  auto backend = testing::MakeBackend("cpu:conv=onednn");
  Conv2dShape s{2, 8, 6, 6, 8, 3, 3};
  s.padding = 1;
  auto a = Unwrap(backend->CreateConv2d(s));
  auto b = Unwrap(backend->CreateConv2d(s));
  // a is faster first; then b is, which only a measurement would see.
  std::map<Conv2dOp*, double> ms = {{a.get(), 5.0}, {b.get(), 7.0}};
  int measured = 0;
  auto measure = [&](Conv2dOp* op) -> absl::StatusOr<double> {
    ++measured;
    return ms.at(op);
  };
  const std::string path = TempDir("cache_a") + "/psgd/choices.tsv";
  ConvChooser first(measure);
  CHECK(first.UseCacheFile(path, "CPU X; family 1 model 2; avx2") == 0);
  CHECK(Unwrap(first.Choose("k", a.get(), b.get())));
  CHECK(measured == 2);
  // The file the chooser wrote, read here: one line, this CPU's.
  CHECK(FileText(path) ==
        "CPU X; family 1 model 2; avx2\tk\tWinograd\t5.000\t7.000\n");
  // The directory is this user's alone.
  CHECK((std::filesystem::status(DirectoryOf(path)).permissions() &
         (std::filesystem::perms::group_write |
          std::filesystem::perms::others_write)) ==
        std::filesystem::perms::none);

  ms = {{a.get(), 9.0}, {b.get(), 1.0}};
  ConvChooser second(measure);  // as in the next process
  CHECK(second.UseCacheFile(path, "CPU X; family 1 model 2; avx2") == 1);
  CHECK(Unwrap(second.Choose("k", a.get(), b.get())));  // the file's choice
  CHECK(measured == 2);                                 // not timed again
  REQUIRE(second.Notes().size() == 1);
  CHECK(second.Notes()[0] ==
        "k: Winograd 5.00 ms, direct 7.00 ms (measured before, " + path +
            "): Winograd");

  // Another CPU's line is not this CPU's choice: measured, and appended.
  ConvChooser other(measure);
  CHECK(other.UseCacheFile(path, "CPU Y; family 3 model 4; avx512f") == 0);
  CHECK_FALSE(Unwrap(other.Choose("k", a.get(), b.get())));
  CHECK(measured == 4);
  CHECK(FileText(path) ==
        "CPU X; family 1 model 2; avx2\tk\tWinograd\t5.000\t7.000\n"
        "CPU Y; family 3 model 4; avx512f\tk\tdirect\t9.000\t1.000\n");
}

TEST_CASE("a cache file the chooser cannot use is passed over, left as it is") {
  auto backend = testing::MakeBackend("cpu:conv=onednn");
  Conv2dShape s{2, 8, 6, 6, 8, 3, 3};
  s.padding = 1;
  auto a = Unwrap(backend->CreateConv2d(s));
  auto b = Unwrap(backend->CreateConv2d(s));
  int measured = 0;
  auto measure = [&](Conv2dOp* op) -> absl::StatusOr<double> {
    ++measured;
    return op == a.get() ? 5.0 : 7.0;
  };
  const std::string dir = TempDir("cache_b");
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  // A line it cannot parse: passed over; the good line is taken, and the
  // file keeps both when a new choice is appended.
  const std::string bad = dir + "/bad.tsv";
  const std::string text = "not a line of choices\nC\tj\tdirect\t2\t1\n";
  std::ofstream(bad) << text;
  ConvChooser parsing(measure);
  CHECK(parsing.UseCacheFile(bad, "C") == 1);
  CHECK_FALSE(Unwrap(parsing.Choose("j", a.get(), b.get())));
  CHECK(measured == 0);
  CHECK(Unwrap(parsing.Choose("k", a.get(), b.get())));
  CHECK(measured == 2);
  CHECK(FileText(bad) == text + "C\tk\tWinograd\t5.000\t7.000\n");

  // A link at the path: not followed, neither read nor written.
  const std::string target = dir + "/target.tsv", link = dir + "/link.tsv";
  std::ofstream(target) << "C\tk\tdirect\t1\t2\n";
  std::filesystem::create_symlink(target, link);
  ConvChooser linked(measure);
  CHECK(linked.UseCacheFile(link, "C") == 0);
  CHECK(Unwrap(linked.Choose("k", a.get(), b.get())));  // measured
  CHECK(measured == 4);
  CHECK(FileText(target) == "C\tk\tdirect\t1\t2\n");

  // A directory others may write: not used at all.
  const std::string open_dir = dir + "/open";
  std::filesystem::create_directories(open_dir);
  std::filesystem::permissions(open_dir, std::filesystem::perms::all);
  std::ofstream(open_dir + "/c.tsv") << "C\tk\tdirect\t1\t2\n";
  ConvChooser untrusted(measure);
  CHECK(untrusted.UseCacheFile(open_dir + "/c.tsv", "C") == 0);
  CHECK(Unwrap(untrusted.Choose("k", a.get(), b.get())));
  CHECK(FileText(open_dir + "/c.tsv") == "C\tk\tdirect\t1\t2\n");
}

TEST_CASE("the CPU's identity names its model and instruction sets") {
  const std::string id = CpuIdentity();
  INFO(id);
  CHECK(id.find("; family ") != std::string::npos);
  CHECK(id.find('\t') == std::string::npos);
  if (__builtin_cpu_supports("avx512f")) {
    CHECK(id.find("avx512f") != std::string::npos);
  }
}

TEST_CASE("TimeConvPasses times the three passes of a real op") {
  auto backend = testing::MakeBackend("cpu:conv=onednn");
  Conv2dShape s{2, 8, 6, 6, 8, 3, 3};
  s.padding = 1;
  auto op = Unwrap(backend->CreateConv2d(s));
  CHECK(Unwrap(TimeConvPasses(op.get())) > 0.0);
}

TEST_CASE("the default backend runs the kernel its choice names") {
  CHECK(Unwrap(ParseCpuBackendName("cpu", 1)).conv == ConvAlgorithm::kAuto);
  CHECK(Unwrap(ParseCpuBackendName("cpu:conv=auto", 1)).conv ==
        ConvAlgorithm::kAuto);
  ThreeBackends be;
  Conv2dShape s{4, 16, 16, 16, 16, 3, 3};
  if (!be.WinogradApplies(&s)) return;
  auto& [by_default, winograd, direct] = be.backends;
  const auto x = testing::RandomValues(NumElements(s.input()), 1, -1, 1);
  const auto w = testing::RandomValues(NumElements(s.filter()), 2, -1, 1);
  const auto b = testing::RandomValues(NumElements(s.bias()), 3, -1, 1);
  auto run = [&](Backend* on) { return ForwardOn(on, s, x, w, b); };
  const std::vector<float> got = run(by_default.get());
  // The choice for this shape, noted once.
  std::string note;
  for (const std::string& n : CpuConvChoices()) {
    if (n.find(s.ToString()) != std::string::npos) {
      CHECK(note.empty());
      note = n;
    }
  }
  INFO(note);
  REQUIRE_FALSE(note.empty());
  // (It read the note's last 9 characters for the 10 of ": Winograd", so
  // took every choice for the direct kernel's, and failed whenever the
  // measurement chose Winograd.)
  const bool chose_winograd = absl::EndsWith(note, ": Winograd");
  REQUIRE((chose_winograd || absl::EndsWith(note, ": direct")));
  const std::vector<float> want =
      run(chose_winograd ? winograd.get() : direct.get());
  CHECK(got == want);
  CHECK_FALSE(run(winograd.get()) == run(direct.get()));  // they differ
  // Another backend of the process makes the same choice, unmeasured.
  auto again = testing::MakeBackend("cpu");
  CHECK(run(again.get()) == got);
  CHECK(CpuConvChoices().size() >= 1);
}

TEST_CASE("an op with a fused ReLU and no bias takes its shape's choice") {
  // As the inference op of a convolution with its batch norm folded in
  // (network_model.cc) does: the kernel of the training op's choice, not
  // measured again.
  ThreeBackends be;
  Conv2dShape s{2, 16, 12, 12, 24, 3, 3};
  if (!be.WinogradApplies(&s)) return;
  auto& [by_default, winograd, direct] = be.backends;
  Conv2dShape fused = s;
  fused.has_bias = false;
  fused.relu = true;
  const size_t notes_before = CpuConvChoices().size();
  Unwrap(by_default->CreateConv2d(s));
  const std::vector<std::string> notes = CpuConvChoices();
  REQUIRE(notes.size() == notes_before + 1);
  const bool chose_winograd = absl::EndsWith(notes.back(), ": Winograd");
  INFO(notes.back());
  const auto x = testing::RandomValues(NumElements(s.input()), 4, -1, 1);
  const auto w = testing::RandomValues(NumElements(s.filter()), 5, -1, 1);
  auto run = [&](Backend* be) {
    auto op = Unwrap(be->CreateConv2d(fused));
    DeviceTensor tx = Upload(be, x, fused.input());
    DeviceTensor tw = Upload(be, w, fused.filter());
    DeviceTensor y = Zeros(be, fused.output());
    REQUIRE_OK(op->Forward(tx.view(), tw.view(), ConstDeviceView(), y.view()));
    return Download(be, y.view());
  };
  const std::vector<float> got = run(by_default.get());
  CHECK(CpuConvChoices().size() == notes_before + 1);  // no new measurement
  CHECK(got == run(chose_winograd ? winograd.get() : direct.get()));
}

TEST_CASE(
    "in bfloat16 compute conv=auto weighs Winograd against the bfloat16 "
    "direct kernel, under a key of its own") {
  BackendOptions options;
  options.threads = 2;
  absl::StatusOr<std::unique_ptr<Backend>> made =
      CreateBackend("cpu:compute=bf16", options);
  if (!made.ok()) {
    CHECK(made.status().code() == absl::StatusCode::kFailedPrecondition);
    WARN("no AVX-512 BF16 here: " << made.status().ToString());
    return;
  }
  ThreeBackends be;
  Conv2dShape s{2, 16, 10, 10, 32, 3, 3};
  if (!be.WinogradApplies(&s)) return;
  Backend* bf16 = made->get();
  Backend* f32 = std::get<0>(be.backends).get();
  Backend* winograd = std::get<1>(be.backends).get();
  auto direct_bf16 = testing::MakeBackend("cpu:compute=bf16,conv=onednn");
  // The float32 backend's choice for the shape first: the bfloat16 one
  // must not take it (its direct kernel is another kernel).
  const size_t notes_before = CpuConvChoices().size();
  Unwrap(f32->CreateConv2d(s));
  Unwrap(bf16->CreateConv2d(s));
  const std::vector<std::string> notes = CpuConvChoices();
  REQUIRE(notes.size() == notes_before + 2);
  const std::string& note = notes.back();
  INFO(note);
  CHECK(note.find(s.ToString()) != std::string::npos);
  CHECK(note.find("direct in bfloat16") != std::string::npos);
  CHECK(notes[notes.size() - 2].find("bfloat16") == std::string::npos);
  const bool chose_winograd = absl::EndsWith(note, ": Winograd");
  REQUIRE((chose_winograd || absl::EndsWith(note, ": direct")));
  const auto x = testing::RandomValues(NumElements(s.input()), 6, -1, 1);
  const auto w = testing::RandomValues(NumElements(s.filter()), 7, -1, 1);
  const auto b = testing::RandomValues(NumElements(s.bias()), 8, -1, 1);
  auto run = [&](Backend* on) { return ForwardOn(on, s, x, w, b); };
  const std::vector<float> got = run(bf16);
  CHECK(CpuConvChoices().size() == notes_before + 2);  // taken, not timed
  // The kernel the note names, bit for bit: float32 Winograd, or the
  // direct kernel in bfloat16 (which rounds: not the float32 result).
  CHECK(got == run(chose_winograd ? winograd : direct_bf16.get()));
  CHECK_FALSE(run(winograd) == run(direct_bf16.get()));
}

}  // namespace
}  // namespace psgd
