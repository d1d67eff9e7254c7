#include "worker/data/cifar10_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

namespace fs = std::filesystem;

constexpr char kHowToGet[] =
    "run scripts/run/get_cifar10.sh, or train on the synthetic set instead "
    "(a cluster config: data { source: SYNTHETIC }; train_local: "
    "--data=synthetic)";

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

std::vector<std::string> Cifar10FileNames(Split split) {
  if (split == Split::kTest) return {"test_batch.bin"};
  return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
          "data_batch_4.bin", "data_batch_5.bin"};
}

absl::StatusOr<ImageSet> ReadCifar10File(const std::string& path,
                                         int64_t records) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) {
    const int err = errno;
    const std::string reason = std::strerror(err);
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(path, ": no such file; ", kHowToGet));
    }
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot open: ", reason));
  }
  const int64_t expected = records * kCifar10RecordBytes;
  ImageSet set;
  set.pixels.resize(records * ImageSet::kImageBytes);
  set.labels.resize(records);
  std::vector<uint8_t> record(kCifar10RecordBytes);
  for (int64_t r = 0; r < records; ++r) {
    const int64_t offset = r * kCifar10RecordBytes;
    const size_t got = std::fread(record.data(), 1, record.size(), file.get());
    if (got != record.size()) {
      if (std::ferror(file.get())) {
        return absl::DataLossError(
            absl::StrCat(path, ": read error at offset ", offset + got));
      }
      return absl::DataLossError(absl::StrCat(
          path, ": truncated: ends at offset ", offset + got, " inside record ",
          r, "; a CIFAR-10 batch file is ", expected, " bytes (", records,
          " records of ", kCifar10RecordBytes, ")"));
    }
    if (record[0] >= ImageSet::kClasses) {
      return absl::DataLossError(
          absl::StrCat(path, ": record ", r, " at offset ", offset,
                       " has label ", int{record[0]}, ", expected 0..9"));
    }
    set.labels[r] = record[0];
    std::memcpy(set.pixels.data() + r * ImageSet::kImageBytes,
                record.data() + 1, ImageSet::kImageBytes);
  }
  if (std::fgetc(file.get()) != EOF) {
    return absl::DataLossError(
        absl::StrCat(path, ": oversized: data continues past offset ", expected,
                     ", where its ", records, " records of ",
                     kCifar10RecordBytes, " bytes end"));
  }
  return set;
}

absl::StatusOr<ImageSet> LoadCifar10(const std::string& dir, Split split,
                                     int64_t records_per_file) {
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CIFAR-10 directory given; ", kHowToGet));
  }
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": no such directory; ", kHowToGet));
  }
  if (!fs::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": not a directory"));
  }
  fs::path base(dir);
  const std::vector<std::string> names = Cifar10FileNames(split);
  if (!fs::exists(base / names[0], ec) &&
      fs::exists(base / "cifar-10-batches-bin" / names[0], ec)) {
    base /= "cifar-10-batches-bin";
  }
  ImageSet all;
  for (const std::string& name : names) {
    const std::string path = (base / name).string();
    if (!fs::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat(
          path, ": missing (", dir,
          " should hold CIFAR-10's binary version: data_batch_1.bin .. "
          "data_batch_5.bin and test_batch.bin); ",
          kHowToGet));
    }
    ASSIGN_OR_RETURN(ImageSet part, ReadCifar10File(path, records_per_file));
    all.pixels.insert(all.pixels.end(), part.pixels.begin(), part.pixels.end());
    all.labels.insert(all.labels.end(), part.labels.begin(), part.labels.end());
  }
  return all;
}

}  // namespace psgd
