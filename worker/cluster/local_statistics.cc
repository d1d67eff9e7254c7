#include "worker/cluster/local_statistics.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"

namespace psgd {
namespace {

constexpr char kMagic[] = "PSGDBNS1";  // 8 bytes

}  // namespace

absl::Status SaveLocalStatistics(const std::string& path,
                                 const std::vector<VariableSpec>& specs,
                                 const NamedTensors& state) {
  std::string payload;
  PutLe(&payload, specs.size(), 4);
  for (const VariableSpec& s : specs) {
    auto it = state.find(s.name);
    if (it == state.end() || it->second.shape() != s.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch norm statistics: no tensor '", s.name,
                       "' of shape ", ShapeToString(s.shape)));
    }
    PutLe(&payload, s.name.size(), 4);
    payload += s.name;
    const Tensor& t = it->second;
    PutLe(&payload, static_cast<uint64_t>(t.size()), 8);
    payload.append(reinterpret_cast<const char*>(t.data()),
                   t.size() * sizeof(float));
  }
  return WriteFileAtomically(path, FrameChecksummed(kMagic, payload));
}

absl::StatusOr<std::optional<NamedTensors>> LoadLocalStatistics(
    const std::string& path, const std::vector<VariableSpec>& specs) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (absl::IsNotFound(bytes.status())) return std::nullopt;
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::string> payload =
      UnframeChecksummed(kMagic, *bytes, path);
  if (!payload.ok()) return payload.status();
  absl::string_view in = *payload;
  auto other = [&](const std::string& what) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " holds the batch norm statistics of another "
                     "model: ",
                     what));
  };
  auto take = [&](size_t n) -> std::optional<absl::string_view> {
    if (in.size() < n) return std::nullopt;
    absl::string_view head = in.substr(0, n);
    in.remove_prefix(n);
    return head;
  };
  // The checksum held: a short read is a file of another layout.
  std::optional<absl::string_view> count = take(4);
  if (!count || GetLe(*count, 4) != specs.size()) {
    return other(absl::StrCat("expected ", specs.size(), " tensors"));
  }
  NamedTensors out;
  for (const VariableSpec& s : specs) {
    std::optional<absl::string_view> len = take(4);
    std::optional<absl::string_view> name =
        len ? take(GetLe(*len, 4)) : std::nullopt;
    if (!name || *name != s.name) {
      return other(absl::StrCat("expected '", s.name, "' next"));
    }
    std::optional<absl::string_view> n = take(8);
    const int64_t elements = NumElements(s.shape);
    if (!n || GetLe(*n, 8) != static_cast<uint64_t>(elements)) {
      return other(
          absl::StrCat("'", s.name, "' is not of ", elements, " elements"));
    }
    std::optional<absl::string_view> data = take(elements * sizeof(float));
    if (!data) return other(absl::StrCat("'", s.name, "' is cut short"));
    Tensor t(s.shape);
    std::memcpy(t.data(), data->data(), data->size());
    out.emplace(s.name, std::move(t));
  }
  if (!in.empty()) return other("tensors beyond the model's");
  return out;
}

}  // namespace psgd
