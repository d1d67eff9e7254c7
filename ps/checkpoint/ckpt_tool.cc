// Reads a shard's checkpoint file (ps/checkpoint/checkpoint.h), every
// checksum and field checked as a restore checks them:
//
//   ckpt_tool digest DIR/step-50/shard-0-of-2.ckpt   # the state digest, hex
//   ckpt_tool show   DIR/step-50/shard-0-of-2.ckpt   # what it holds
//
// `digest` prints StateDigest of the file's weights, running statistics and
// optimizer slots: the number a restarted ps_server logs for the state it
// restored ("state digest ..."), so that the two can be compared bit for
// bit (tests/fault_matrix.py). Exit status 1 with the reason for a file
// that does not decode, 2 for bad usage.
//
//   ckpt_tool tensors DIR/step-50/shard-0-of-2.ckpt  # the weights, for export
//
// `tensors` writes one JSON line, {"step":S,"shard":I,"num_shards":N,
// "tensors":[{"name","shape","statistic","slice_of","part","row_begin"},
// ...]}, then each tensor's float32 values (little-endian, layout order):
// what `psgd ckpt export` reads.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "ps/checkpoint/checkpoint.h"

namespace {

using psgd::ps::ShardCheckpoint;

// A JSON string: the names are the model's (letters, digits, '.', '/',
// '_'), escaped all the same.
std::string JsonQuoted(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", ch));
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// `tensors`: the JSON line, then the values. The exit status.
int PrintTensors(const ShardCheckpoint& c) {
  const psgd::ps::VariableLayout& layout = *c.weights->layout;
  std::vector<std::string> items;
  for (int i = 0; i < layout.size(); ++i) {
    const auto& slice = layout.slices[i];
    items.push_back(absl::StrCat(
        "{\"name\":", JsonQuoted(layout.names[i]), ",\"shape\":[",
        absl::StrJoin(layout.shapes[i], ","), "],\"statistic\":",
        layout.statistic[i] ? "true" : "false", ",\"slice_of\":",
        slice.has_value() ? JsonQuoted(slice->variable) : "null",
        ",\"part\":", slice.has_value() ? slice->part : 0,
        ",\"row_begin\":", slice.has_value() ? slice->row_begin : 0, "}"));
  }
  std::printf(
      "{\"step\":%lld,\"shard\":%d,\"num_shards\":%d,"
      "\"tensors\":[%s]}\n",
      static_cast<long long>(c.step), c.shard_index, c.num_shards,
      absl::StrJoin(items, ",").c_str());
  for (const psgd::Tensor& t : c.weights->weights) {
    if (t.size() > 0 && std::fwrite(t.data(), sizeof(float), t.size(),
                                    stdout) != static_cast<size_t>(t.size())) {
      std::fprintf(stderr, "ckpt_tool: writing the values failed\n");
      return 1;
    }
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

// `show`: what the file holds, one line per tensor.
void PrintShow(const ShardCheckpoint& c, uint32_t digest) {
  const psgd::ps::VariableLayout& layout = *c.weights->layout;
  std::printf(
      "cluster %s, shard %d of %d, label %lld, generation %lld, step %lld, "
      "%s, %d workers\n",
      c.cluster.c_str(), c.shard_index, c.num_shards,
      static_cast<long long>(c.label), static_cast<long long>(c.generation),
      static_cast<long long>(c.step),
      std::string(psgd::ps::ModeName(c.mode)).c_str(), c.total_num_replicas);
  std::printf(
      "optimizer %s at step %lld, %zu slots; state digest %08x\n",
      std::string(psgd::ps::OptimizerKindName(c.optimizer.kind)).c_str(),
      static_cast<long long>(c.optimizer.step), c.optimizer.slots.size(),
      digest);
  for (int i = 0; i < layout.size(); ++i) {
    std::printf("  %s %s%s\n", layout.names[i].c_str(),
                psgd::ShapeToString(layout.shapes[i]).c_str(),
                layout.statistic[i] ? " (running statistic)" : "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: ckpt_tool digest|show|tensors FILE\n";
  if (argc != 3) {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }
  const std::string verb = argv[1], path = argv[2];
  if (verb != "digest" && verb != "show" && verb != "tensors") {
    std::fprintf(stderr, "ckpt_tool: unknown command '%s'\n%s", verb.c_str(),
                 usage.c_str());
    return 2;
  }
  absl::StatusOr<std::string> bytes = psgd::ReadFileToString(path);
  if (!bytes.ok()) {
    std::fprintf(stderr, "ckpt_tool: %s\n", bytes.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<ShardCheckpoint> c =
      psgd::ps::DecodeShardCheckpoint(*bytes, path);
  if (!c.ok()) {
    std::fprintf(stderr, "ckpt_tool: %s\n", c.status().ToString().c_str());
    return 1;
  }
  const uint32_t digest = psgd::ps::StateDigest(*c->weights, c->optimizer);
  if (verb == "digest") {
    std::printf("%08x\n", digest);
    return 0;
  }
  if (verb == "tensors") return PrintTensors(*c);
  PrintShow(*c, digest);
  return 0;
}
