#include "ps/checkpoint/checkpoint_store.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace psgd {
namespace ps {
namespace {

namespace fs = std::filesystem;

constexpr char kStepPrefix[] = "step-";
constexpr char kManifest[] = "MANIFEST";

absl::Status FsError(absl::string_view what, const std::string& path,
                     const std::error_code& ec) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", ec.message()));
}

// Removes `path` if it is there.
absl::Status RemoveIfThere(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return FsError("cannot delete", path, ec);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::Open(
    CheckpointStoreOptions options) {
  if (options.dir.empty() || options.num_shards < 1 ||
      options.shard_index < 0 || options.shard_index >= options.num_shards ||
      options.keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint store: dir '", options.dir, "', shard ",
                     options.shard_index, " of ", options.num_shards, ", keep ",
                     options.keep, " do not fit together"));
  }
  RETURN_IF_ERROR(MakeOwnDirectories(options.dir));
  return std::unique_ptr<CheckpointStore>(
      new CheckpointStore(std::move(options)));
}

std::string CheckpointStore::StepDir(int64_t label) const {
  return absl::StrCat(options_.dir, "/", kStepPrefix, label);
}

std::string CheckpointStore::ShardFileName(int shard_index) const {
  return absl::StrCat("shard-", shard_index, "-of-", options_.num_shards,
                      ".ckpt");
}

std::vector<int64_t> CheckpointStore::Labels() const {
  MutexLock lock(&mu_);
  return LabelsLocked();
}

std::vector<int64_t> CheckpointStore::LabelsLocked() const {
  std::vector<int64_t> labels;
  std::error_code ec;
  for (fs::directory_iterator it(options_.dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int64_t label;
    if (absl::StartsWith(name, kStepPrefix) &&
        absl::SimpleAtoi(absl::string_view(name).substr(strlen(kStepPrefix)),
                         &label) &&
        label >= 0) {
      labels.push_back(label);
    }
  }
  std::sort(labels.begin(), labels.end());
  return labels;
}

absl::StatusOr<ShardCheckpoint> CheckpointStore::VerifyLocked(
    int64_t label) const {
  const std::string dir = StepDir(label);
  if (options_.per_host) {
    const std::string path =
        absl::StrCat(dir, "/", ShardFileName(options_.shard_index));
    absl::StatusOr<std::string> file = ReadFileToString(path);
    if (absl::IsNotFound(file.status())) {
      return absl::DataLossError(absl::StrCat(path, " is missing"));
    }
    RETURN_IF_ERROR(file.status());
    ASSIGN_OR_RETURN(ShardCheckpoint c, DecodeShardCheckpoint(*file, path));
    if (c.cluster != options_.cluster ||
        c.shard_index != options_.shard_index ||
        c.num_shards != options_.num_shards || c.label != label) {
      return absl::DataLossError(absl::StrCat(
          path, " holds shard ", c.shard_index, " of ", c.num_shards,
          " of cluster '", c.cluster, "', label ", c.label,
          ", which is not this shard's file of that label"));
    }
    return c;
  }
  const std::string manifest_path = absl::StrCat(dir, "/", kManifest);
  absl::StatusOr<std::string> bytes = ReadFileToString(manifest_path);
  if (absl::IsNotFound(bytes.status())) {
    return absl::DataLossError(
        absl::StrCat(manifest_path,
                     " is missing: not every shard's file was written "
                     "(a partial checkpoint)"));
  }
  RETURN_IF_ERROR(bytes.status());
  ASSIGN_OR_RETURN(CheckpointManifest manifest,
                   DecodeCheckpointManifest(*bytes, manifest_path));
  if (manifest.cluster != options_.cluster || manifest.label != label ||
      manifest.num_shards != options_.num_shards) {
    return absl::DataLossError(absl::StrCat(
        manifest_path, ": a checkpoint of cluster '", manifest.cluster,
        "', label ", manifest.label, ", ", manifest.num_shards,
        " shards; expected cluster '", options_.cluster, "', label ", label,
        ", ", options_.num_shards, " shards"));
  }
  ShardCheckpoint own;
  for (const CheckpointManifest::Entry& e : manifest.shards) {
    const std::string path = absl::StrCat(dir, "/", e.file);
    absl::StatusOr<std::string> file = ReadFileToString(path);
    if (absl::IsNotFound(file.status())) {
      return absl::DataLossError(absl::StrCat(path, " is missing"));
    }
    RETURN_IF_ERROR(file.status());
    if (static_cast<int64_t>(file->size()) != e.bytes) {
      return absl::DataLossError(absl::StrCat(path, " has ", file->size(),
                                              " bytes; the manifest says ",
                                              e.bytes, " (truncated?)"));
    }
    if (Crc32c(*file) != e.crc32c) {
      return absl::DataLossError(absl::StrCat(
          path, ": its checksum differs from the manifest's (corrupt)"));
    }
    ASSIGN_OR_RETURN(ShardCheckpoint c, DecodeShardCheckpoint(*file, path));
    if (c.cluster != options_.cluster || c.shard_index != e.shard_index ||
        c.num_shards != options_.num_shards || c.label != label ||
        c.generation != manifest.generation || c.step != e.step) {
      return absl::DataLossError(
          absl::StrCat(path, " holds shard ", c.shard_index, " of ",
                       c.num_shards, " of cluster '", c.cluster, "', label ",
                       c.label, ", generation ", c.generation, ", step ",
                       c.step, ", which does not match the manifest"));
    }
    if (e.shard_index == options_.shard_index) own = std::move(c);
  }
  return own;
}

absl::StatusOr<ShardCheckpoint> CheckpointStore::ReadNewestComplete(
    std::vector<std::string>* refused) {
  MutexLock lock(&mu_);
  std::vector<int64_t> labels = LabelsLocked();
  for (auto it = labels.rbegin(); it != labels.rend(); ++it) {
    absl::StatusOr<ShardCheckpoint> c = VerifyLocked(*it);
    if (c.ok()) return c;
    refused->push_back(absl::StrCat("checkpoint step-", *it,
                                    " refused: ", c.status().message()));
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint in ",
                                          options_.dir, " (", labels.size(),
                                          " refused)"));
}

std::vector<CompleteCheckpointInfo> CheckpointStore::ListComplete() {
  MutexLock lock(&mu_);
  std::vector<CompleteCheckpointInfo> out;
  std::vector<int64_t> labels = LabelsLocked();
  for (auto it = labels.rbegin(); it != labels.rend(); ++it) {
    absl::StatusOr<ShardCheckpoint> c = VerifyLocked(*it);
    if (c.ok()) out.push_back({c->label, c->generation, c->step});
  }
  return out;
}

absl::StatusOr<ShardCheckpoint> CheckpointStore::Read(int64_t label) {
  MutexLock lock(&mu_);
  std::error_code ec;
  if (!fs::exists(StepDir(label), ec)) {
    return absl::NotFoundError(absl::StrCat("no checkpoint ", StepDir(label)));
  }
  return VerifyLocked(label);
}

absl::Status CheckpointStore::Write(const ShardCheckpoint& c) {
  if (c.cluster != options_.cluster || c.shard_index != options_.shard_index ||
      c.num_shards != options_.num_shards || c.weights == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint of shard ", c.shard_index, " of ", c.num_shards,
        " of cluster '", c.cluster, "' given to the store of shard ",
        options_.shard_index, " of ", options_.num_shards, " of '",
        options_.cluster, "'"));
  }
  const std::string bytes = EncodeShardCheckpoint(c);
  MutexLock lock(&mu_);
  const std::string dir = StepDir(c.label);
  // Another shard's store of this directory removes the step's directory
  // when it is left empty (a rollback deleting that shard's own files,
  // RemoveOwnLocked): between this shard making it and creating its file,
  // it may be gone. Made again, and written again.
  absl::Status written;
  for (int attempt = 0; attempt < 3; ++attempt) {
    RETURN_IF_ERROR(MakeOwnDirectories(dir));
    const std::string path =
        absl::StrCat(dir, "/", ShardFileName(options_.shard_index));
    written = options_.write_file ? options_.write_file(path, bytes)
                                  : WriteFileAtomically(path, bytes);
    std::error_code ec;
    if (written.ok() || fs::exists(dir, ec)) break;
  }
  RETURN_IF_ERROR(written);
  if (!options_.per_host) {
    RETURN_IF_ERROR(MaybeWriteManifestLocked(c.label, c.generation));
  }
  return PruneLocked();
}

absl::Status CheckpointStore::MaybeWriteManifestLocked(int64_t label,
                                                       int64_t generation) {
  const std::string dir = StepDir(label);
  CheckpointManifest m;
  m.cluster = options_.cluster;
  m.label = label;
  m.generation = generation;
  m.num_shards = options_.num_shards;
  for (int i = 0; i < options_.num_shards; ++i) {
    const std::string name = ShardFileName(i);
    const std::string path = absl::StrCat(dir, "/", name);
    absl::StatusOr<std::string> file = ReadFileToString(path);
    // Not there yet: the last shard to write completes the set.
    if (absl::IsNotFound(file.status())) return absl::OkStatus();
    RETURN_IF_ERROR(file.status());
    absl::StatusOr<ShardCheckpoint> c = DecodeShardCheckpoint(*file, path);
    // A file that does not decode can never complete this checkpoint: that
    // is a failure, not a checkpoint in progress (this shard's own file,
    // just written, among them).
    if (!c.ok()) {
      return absl::DataLossError(
          absl::StrCat("checkpoint step-", label,
                       " cannot be completed: ", c.status().message()));
    }
    // One of another generation (an abandoned history) leaves the
    // checkpoint incomplete until its shard writes it again.
    if (c->generation != generation || c->label != label) {
      return absl::OkStatus();
    }
    m.shards.push_back(
        {i, name, static_cast<int64_t>(file->size()), Crc32c(*file), c->step});
  }
  return WriteFileAtomically(absl::StrCat(dir, "/", kManifest),
                             EncodeCheckpointManifest(m));
}

absl::Status CheckpointStore::RemoveOwnLocked(int64_t label) {
  const std::string dir = StepDir(label);
  const std::string own = ShardFileName(options_.shard_index);
  std::error_code ec;
  std::vector<std::string> doomed = {absl::StrCat(dir, "/", kManifest)};
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    // The file and temporary files a killed writer left ("<own>.tmp.<pid>").
    if (absl::StartsWith(it->path().filename().string(), own)) {
      doomed.push_back(it->path().string());
    }
  }
  for (const std::string& path : doomed) RETURN_IF_ERROR(RemoveIfThere(path));
  fs::remove(dir, ec);  // fails while another shard's file is there
  return absl::OkStatus();
}

bool CheckpointStore::IsMarkedComplete(int64_t label) const {
  MutexLock lock(&mu_);
  return IsMarkedCompleteLocked(label);
}

bool CheckpointStore::IsMarkedCompleteLocked(int64_t label) const {
  // Per host, this shard's file stands for the manifest (the agreement on
  // restart needs the newest `keep` that each shard has).
  const std::string marker =
      options_.per_host ? ShardFileName(options_.shard_index) : kManifest;
  std::error_code ec;
  return fs::exists(absl::StrCat(StepDir(label), "/", marker), ec);
}

absl::Status CheckpointStore::PruneLocked() {
  std::vector<int64_t> labels = LabelsLocked();
  std::vector<int64_t> complete;
  for (int64_t label : labels) {
    if (IsMarkedCompleteLocked(label)) complete.push_back(label);
  }
  if (static_cast<int>(complete.size()) < options_.keep) {
    return absl::OkStatus();
  }
  const int64_t oldest_kept = complete[complete.size() - options_.keep];
  for (int64_t label : labels) {
    if (label < oldest_kept) RETURN_IF_ERROR(RemoveOwnLocked(label));
  }
  return absl::OkStatus();
}

absl::Status CheckpointStore::DeleteNewerThan(int64_t label) {
  MutexLock lock(&mu_);
  for (int64_t l : LabelsLocked()) {
    if (l > label) RETURN_IF_ERROR(RemoveOwnLocked(l));
  }
  return absl::OkStatus();
}

}  // namespace ps
}  // namespace psgd
