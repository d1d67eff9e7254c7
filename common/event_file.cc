#include "common/event_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_io.h"

namespace psgd {
namespace {

std::string Record(absl::string_view data) {
  std::string out;
  std::string length;
  PutLe(&length, data.size(), 8);
  out += length;
  PutLe(&out, MaskedCrc32c(length), 4);
  out.append(data.data(), data.size());
  PutLe(&out, MaskedCrc32c(data), 4);
  return out;
}

}  // namespace

uint32_t MaskedCrc32c(absl::string_view data) {
  const uint32_t crc = Crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Create(
    const std::string& dir, absl::string_view suffix) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("event file: cannot create ", dir, ": ", ec.message()));
  }
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  std::string path = absl::StrCat(dir, "/events.out.tfevents.",
                                  absl::ToUnixSeconds(absl::Now()), ".", host,
                                  suffix.empty() ? "" : ".", suffix);
  const int fd =
      open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
           0644);
  std::FILE* f = fd < 0 ? nullptr : fdopen(fd, "ab");
  if (f == nullptr) {
    if (fd >= 0) close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "event file: cannot open ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<EventFileWriter> w(new EventFileWriter(path, f));
  tensorboard::Event version;
  version.set_wall_time(absl::ToUnixMicros(absl::Now()) / 1e6);
  version.set_file_version("brain.Event:2");
  if (absl::Status s = w->Write(version); !s.ok()) return s;
  if (absl::Status s = w->Flush(); !s.ok()) return s;
  return w;
}

EventFileWriter::~EventFileWriter() { std::fclose(file_); }

absl::Status EventFileWriter::Write(const tensorboard::Event& event) {
  const std::string record = Record(event.SerializeAsString());
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return absl::DataLossError(absl::StrCat(
        "event file ", path_, ": write failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status EventFileWriter::WriteScalar(absl::string_view tag, int64_t step,
                                          double value, double wall_time) {
  tensorboard::Event e;
  e.set_wall_time(wall_time);
  e.set_step(step);
  tensorboard::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(static_cast<float>(value));
  return Write(e);
}

absl::Status EventFileWriter::Flush() {
  if (std::fflush(file_) != 0) {
    return absl::DataLossError(absl::StrCat(
        "event file ", path_, ": flush failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<tensorboard::Event>> ReadEventFile(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("event file ", path, ": cannot open"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string data = buffer.str();
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  auto bad = [&](size_t offset, absl::string_view why) {
    return absl::DataLossError(absl::StrCat(
        "event file ", path, ": record at byte ", offset, ": ", why));
  };
  while (at < data.size()) {
    if (data.size() - at < 12) return bad(at, "truncated length header");
    const absl::string_view length_bytes(data.data() + at, 8);
    const uint64_t length = GetLe(absl::string_view(data).substr(at), 8);
    if (GetLe(absl::string_view(data).substr(at + 8), 4) !=
        MaskedCrc32c(length_bytes)) {
      return bad(at, "the length's CRC differs (corrupt)");
    }
    if (length > data.size() - at - 12 || data.size() - at - 12 - length < 4) {
      return bad(
          at, absl::StrCat("truncated: ", length, " bytes of data announced"));
    }
    const absl::string_view body(data.data() + at + 12, length);
    if (GetLe(absl::string_view(data).substr(at + 12 + length), 4) !=
        MaskedCrc32c(body)) {
      return bad(at, "the data's CRC differs (corrupt)");
    }
    tensorboard::Event e;
    if (!e.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      return bad(at, "not an Event");
    }
    events.push_back(std::move(e));
    at += 12 + length + 4;
  }
  return events;
}

}  // namespace psgd
