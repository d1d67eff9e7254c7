#include "ps/checkpoint/checkpoint.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/tensor.h"
#include "proto/checkpoint.pb.h"
#include "ps/wire/counters.h"
#include "ps/wire/data_queue.h"
#include "ps/wire/variables.h"

namespace psgd {
namespace ps {
namespace {

constexpr char kShardMagic[] = "PSGDCKPT";
constexpr char kManifestMagic[] = "PSGDMANI";

std::string FloatBytes(const float* data, size_t n) {
  return std::string(reinterpret_cast<const char*>(data), n * sizeof(float));
}

// DATA_LOSS "FILENAME: MESSAGE".
absl::Status Corrupt(absl::string_view filename, absl::string_view message) {
  return absl::DataLossError(absl::StrCat(filename, ": ", message));
}

// The float32 values of `bytes`, which must hold exactly `n`.
absl::StatusOr<std::vector<float>> Floats(const std::string& bytes, int64_t n,
                                          absl::string_view what,
                                          absl::string_view filename) {
  if (static_cast<int64_t>(bytes.size()) != n * 4) {
    return Corrupt(filename, absl::StrCat(what, " has ", bytes.size(),
                                          " bytes, expected ", n * 4));
  }
  std::vector<float> out(static_cast<size_t>(n));
  // An empty vector's data() may be null, and memcpy from or to null is
  // undefined even for 0 bytes (a running statistic's empty slots; found
  // by the fuzzer under clang's UBSan, docs/RELIABILITY.md "Fuzzing").
  if (n > 0) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

absl::Status DecodeVariables(const ckpt::ShardCheckpoint& p,
                             absl::string_view filename, ShardCheckpoint* out) {
  if (p.variables_size() == 0) return Corrupt(filename, "no variables");
  auto layout = std::make_shared<VariableLayout>();
  auto snapshot = std::make_shared<WeightsSnapshot>();
  for (const ckpt::Tensor& t : p.variables()) {
    VariableSpecRead read = VariableSpecFromProto(t.spec());
    const std::string& name = read.spec.name;
    const Shape& shape = read.spec.shape;
    if (absl::Status s = ValidateShape(shape); !s.ok()) {
      return Corrupt(filename,
                     absl::StrCat("variable '", name, "': ", s.message()));
    }
    if (!read.kind.has_value()) {
      return Corrupt(filename,
                     absl::StrCat("variable '", name, "' has no known kind (",
                                  static_cast<int>(t.spec().kind()), ")"));
    }
    if (absl::Status s =
            layout->Add(name, shape, *read.kind, std::move(read.spec.slice_of));
        !s.ok()) {
      return Corrupt(filename, s.message());
    }
    // The size the file holds, compared before anything is allocated for
    // the shape (which a corrupt file may make 2^40 floats).
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    const int64_t want = elements * static_cast<int64_t>(sizeof(float));
    if (static_cast<int64_t>(t.data().size()) != want) {
      return Corrupt(
          filename,
          absl::StrCat("variable '", name, "' of shape ", ShapeToString(shape),
                       " has ", t.data().size(), " bytes, expected ", want));
    }
    Tensor value(shape);
    std::memcpy(value.data(), t.data().data(), t.data().size());
    for (int64_t i = 0; i < value.size(); ++i) {
      if (!std::isfinite(value.data()[i])) {
        return Corrupt(filename,
                       absl::StrCat("variable '", name,
                                    "' has a non-finite value at element ", i));
      }
    }
    snapshot->weights.push_back(std::move(value));
  }
  snapshot->step = p.step();
  snapshot->layout = std::move(layout);
  out->weights = std::move(snapshot);
  return absl::OkStatus();
}

absl::Status DecodeOptimizer(const ckpt::ShardCheckpoint& p,
                             absl::string_view filename, ShardCheckpoint* out) {
  const VariableLayout& layout = *out->weights->layout;
  // No optimizer keeps slots for a running statistic (size 0 there).
  const std::vector<int64_t> sizes = layout.OptimizerSizes();
  OptimizerState& o = out->optimizer;
  absl::StatusOr<OptimizerOptions::Kind> kind =
      OptimizerKindFromProto(p.optimizer());
  if (!kind.ok()) return Corrupt(filename, kind.status().message());
  o.kind = *kind;
  o.step = p.optimizer_step();
  if (o.step < 0) {
    return Corrupt(filename, absl::StrCat("optimizer step ", o.step));
  }
  for (const ckpt::Slot& slot : p.slots()) {
    if (slot.values_size() != layout.size()) {
      return Corrupt(
          filename,
          absl::StrCat("slot '", slot.name(), "' has ", slot.values_size(),
                       " variables, expected ", layout.size()));
    }
    o.slot_names.push_back(slot.name());
    std::vector<std::vector<float>>& values = o.slots.emplace_back();
    for (int i = 0; i < layout.size(); ++i) {
      absl::StatusOr<std::vector<float>> v = Floats(
          slot.values(i), sizes[i],
          absl::StrCat("slot '", slot.name(), "' of '", layout.names[i], "'"),
          filename);
      if (!v.ok()) return v.status();
      values.push_back(*std::move(v));
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeBookkeeping(const ckpt::ShardCheckpoint& p,
                               absl::string_view filename,
                               ShardCheckpoint* out) {
  // One last push step per worker id the shard takes: the listed workers,
  // or more with elastic membership (max_workers).
  if (p.total_num_replicas() < 1 ||
      p.last_push_step_size() < p.total_num_replicas() ||
      p.last_push_step_size() > 4096) {
    return Corrupt(filename,
                   absl::StrCat(p.last_push_step_size(),
                                " last push steps for total_num_replicas ",
                                p.total_num_replicas()));
  }
  out->total_num_replicas = p.total_num_replicas();
  for (int64_t s : p.last_push_step()) {
    if (s < -1 || s >= p.step()) {
      return Corrupt(filename, absl::StrCat("a last push step of ", s,
                                            " at step ", p.step()));
    }
    out->last_push_step.push_back(s);
  }
  for (int w : p.live_workers()) {
    if (w < 0 || w >= p.last_push_step_size()) {
      return Corrupt(filename, absl::StrCat("live worker ", w));
    }
    out->live_workers.push_back(w);
  }
  out->counters = PushCountersFromProto(p.counters());
  out->staleness_histogram = StalenessFromProto(p.staleness());
  out->workers_expired = p.workers_expired();
  out->rollbacks = RollbacksFromProto(p.rollbacks());
  if (p.has_data_queue()) {
    out->data_queue = DataQueueStateFromProto(p.data_queue());
  }
  // A shard with a ledger saves its length, with or without a data queue.
  out->ledger_bytes = p.ledger_bytes();
  return absl::OkStatus();
}

}  // namespace

uint32_t StateDigest(const WeightsSnapshot& w, const OptimizerState& o) {
  uint32_t crc = 0;
  for (int i = 0; i < w.layout->size(); ++i) {
    crc = Crc32c(w.layout->names[i], crc);
    crc = Crc32c(FloatBytes(w.weights[i].data(), w.weights[i].size()), crc);
  }
  crc = Crc32c(OptimizerKindName(o.kind), crc);
  crc = Crc32c(absl::StrCat(o.step), crc);
  for (size_t k = 0; k < o.slots.size(); ++k) {
    crc = Crc32c(o.slot_names[k], crc);
    for (const std::vector<float>& v : o.slots[k]) {
      crc = Crc32c(FloatBytes(v.data(), v.size()), crc);
    }
  }
  return crc;
}

std::string EncodeShardCheckpoint(const ShardCheckpoint& c) {
  ckpt::ShardCheckpoint p;
  p.set_format_version(kCheckpointFormatVersion);
  p.set_cluster(c.cluster);
  p.set_shard_index(c.shard_index);
  p.set_num_shards(c.num_shards);
  p.set_label(c.label);
  p.set_generation(c.generation);
  p.set_mode(ModeToProto(c.mode));
  p.set_optimizer(OptimizerKindToProto(c.optimizer.kind));
  p.set_total_num_replicas(c.total_num_replicas);
  p.set_step(c.step);
  const WeightsSnapshot& w = *c.weights;
  for (int i = 0; i < w.layout->size(); ++i) {
    ckpt::Tensor* t = p.add_variables();
    VariableSpecToProto(w.layout->Spec(i), t->mutable_spec());
    t->set_data(FloatBytes(w.weights[i].data(), w.weights[i].size()));
  }
  p.set_optimizer_step(c.optimizer.step);
  for (size_t k = 0; k < c.optimizer.slots.size(); ++k) {
    ckpt::Slot* slot = p.add_slots();
    slot->set_name(c.optimizer.slot_names[k]);
    for (const std::vector<float>& v : c.optimizer.slots[k]) {
      slot->add_values(FloatBytes(v.data(), v.size()));
    }
  }
  p.mutable_last_push_step()->Assign(c.last_push_step.begin(),
                                     c.last_push_step.end());
  p.mutable_live_workers()->Assign(c.live_workers.begin(),
                                   c.live_workers.end());
  PushCountersToProto(c.counters, p.mutable_counters());
  StalenessToProto(c.staleness_histogram, p.mutable_staleness());
  p.set_workers_expired(c.workers_expired);
  RollbacksToProto(c.rollbacks, p.mutable_rollbacks());
  if (c.data_queue.has_value()) {
    DataQueueStateToProto(*c.data_queue, p.mutable_data_queue());
  }
  if (c.ledger_bytes >= 0) p.set_ledger_bytes(c.ledger_bytes);
  p.set_saved_micros(absl::ToUnixMicros(c.saved));
  return FrameChecksummed(kShardMagic, p.SerializeAsString());
}

absl::StatusOr<ShardCheckpoint> DecodeShardCheckpoint(
    absl::string_view bytes, absl::string_view filename) {
  absl::StatusOr<std::string> payload =
      UnframeChecksummed(kShardMagic, bytes, filename);
  if (!payload.ok()) return payload.status();
  ckpt::ShardCheckpoint p;
  if (!p.ParseFromString(*payload)) {
    return Corrupt(filename,
                   "the checksum matches but the contents do not "
                   "parse as a shard checkpoint");
  }
  if (p.format_version() == 1) {
    return Corrupt(
        filename,
        absl::StrCat(
            "format version 1, written before a checkpoint kept each "
            "variable's kind (parameter or running statistic); this build "
            "reads version ",
            kCheckpointFormatVersion,
            ". Restore it with the psgd that wrote it (commit 3d57e42 or "
            "older), or start the run again"));
  }
  if (p.format_version() == 2) {
    return Corrupt(
        filename,
        absl::StrCat(
            "format version 2, written before a checkpoint kept a "
            "variable's identity in one message and the mode, the optimizer "
            "and the data queue's counters as their own types; this build "
            "reads version ",
            kCheckpointFormatVersion,
            ". Restore it with the psgd that wrote it (commit 2c0c35f or "
            "older), or start the run again"));
  }
  if (p.format_version() != kCheckpointFormatVersion) {
    return Corrupt(filename, absl::StrCat("format version ", p.format_version(),
                                          "; this build reads version ",
                                          kCheckpointFormatVersion));
  }
  if (p.num_shards() < 1 || p.shard_index() < 0 ||
      p.shard_index() >= p.num_shards() || p.label() < 0 || p.step() < 0 ||
      p.generation() < 1) {
    return Corrupt(
        filename,
        absl::StrCat("shard ", p.shard_index(), " of ", p.num_shards(),
                     ", label ", p.label(), ", step ", p.step(),
                     ", generation ", p.generation(), " do not fit together"));
  }
  ShardCheckpoint c;
  c.cluster = p.cluster();
  c.shard_index = p.shard_index();
  c.num_shards = p.num_shards();
  c.label = p.label();
  c.generation = p.generation();
  absl::StatusOr<Mode> mode = ModeFromProto(p.mode());
  if (!mode.ok()) return Corrupt(filename, mode.status().message());
  c.mode = *mode;
  c.saved = absl::FromUnixMicros(p.saved_micros());
  c.step = p.step();
  if (absl::Status s = DecodeVariables(p, filename, &c); !s.ok()) return s;
  if (absl::Status s = DecodeOptimizer(p, filename, &c); !s.ok()) return s;
  if (absl::Status s = DecodeBookkeeping(p, filename, &c); !s.ok()) return s;
  return c;
}

std::string EncodeCheckpointManifest(const CheckpointManifest& m) {
  ckpt::Manifest p;
  p.set_format_version(kManifestFormatVersion);
  p.set_cluster(m.cluster);
  p.set_label(m.label);
  p.set_generation(m.generation);
  p.set_num_shards(m.num_shards);
  for (const CheckpointManifest::Entry& e : m.shards) {
    ckpt::Manifest::Entry* out = p.add_shards();
    out->set_shard_index(e.shard_index);
    out->set_file(e.file);
    out->set_bytes(e.bytes);
    out->set_crc32c(e.crc32c);
    out->set_step(e.step);
  }
  return FrameChecksummed(kManifestMagic, p.SerializeAsString());
}

absl::StatusOr<CheckpointManifest> DecodeCheckpointManifest(
    absl::string_view bytes, absl::string_view filename) {
  absl::StatusOr<std::string> payload =
      UnframeChecksummed(kManifestMagic, bytes, filename);
  if (!payload.ok()) return payload.status();
  ckpt::Manifest p;
  if (!p.ParseFromString(*payload)) {
    return Corrupt(filename, "the contents do not parse as a manifest");
  }
  if (p.format_version() != kManifestFormatVersion) {
    return Corrupt(filename, absl::StrCat("format version ", p.format_version(),
                                          "; this build reads version ",
                                          kManifestFormatVersion));
  }
  if (p.num_shards() < 1 || p.shards_size() != p.num_shards()) {
    return Corrupt(filename, absl::StrCat(p.shards_size(), " entries for ",
                                          p.num_shards(), " shards"));
  }
  CheckpointManifest m;
  m.cluster = p.cluster();
  m.label = p.label();
  m.generation = p.generation();
  m.num_shards = p.num_shards();
  for (int i = 0; i < p.shards_size(); ++i) {
    const ckpt::Manifest::Entry& e = p.shards(i);
    if (e.shard_index() != i || e.file().empty() ||
        e.file().find('/') != std::string::npos) {
      return Corrupt(filename,
                     absl::StrCat("entry ", i, " names shard ", e.shard_index(),
                                  " and file '", e.file(), "'"));
    }
    m.shards.push_back(
        {e.shard_index(), e.file(), e.bytes(), e.crc32c(), e.step()});
  }
  return m;
}

}  // namespace ps
}  // namespace psgd
