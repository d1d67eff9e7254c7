// TensorBoard event files: scalars a run writes as it goes, so that
// `tensorboard --logdir RUN_DIR` shows them (loss, accuracy, images/s, the
// step's phases, staleness, outcomes, bytes). The standard record format:
//
//   uint64 length (little-endian)
//   uint32 masked CRC-32C of the 8 length bytes
//   length bytes: a serialized Event (proto/tensorboard_event.proto)
//   uint32 masked CRC-32C of those bytes
//
// where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. A file is
// named events.out.tfevents.<unix seconds>.<host>[.<suffix>] and starts with
// a file_version event ("brain.Event:2").
//
// Thread-safety: EventFileWriter is not thread-safe (one writer per task,
// called from its loop); ReadEventFile is a pure function of the file.
#ifndef PSGD_COMMON_EVENT_FILE_H_
#define PSGD_COMMON_EVENT_FILE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/tensorboard_event.pb.h"

namespace psgd {

// The mask TensorFlow's records put over their CRC-32C.
uint32_t MaskedCrc32c(absl::string_view data);

class EventFileWriter {
 public:
  // Creates DIR/events.out.tfevents.<now>.<host>.<suffix> (the directory
  // too) and writes the file_version event. Errors name the path.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Create(
      const std::string& dir, absl::string_view suffix);
  ~EventFileWriter();

  // One scalar at `step`; wall_time: seconds since the epoch.
  absl::Status WriteScalar(absl::string_view tag, int64_t step, double value,
                           double wall_time);
  absl::Status Write(const tensorboard::Event& event);
  absl::Status Flush();

  const std::string& path() const { return path_; }

 private:
  EventFileWriter(std::string path, std::FILE* file)
      : path_(std::move(path)), file_(file) {}
  const std::string path_;
  std::FILE* const file_;
};

// Every event of `path`, each record's two CRCs checked. DATA_LOSS naming
// the file and the byte offset of the first bad record (a truncated one, a
// CRC that differs, an Event that does not parse).
absl::StatusOr<std::vector<tensorboard::Event>> ReadEventFile(
    const std::string& path);

}  // namespace psgd

#endif  // PSGD_COMMON_EVENT_FILE_H_
