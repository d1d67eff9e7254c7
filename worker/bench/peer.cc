#include "worker/bench/peer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psgd {
namespace {

// Single-quotes `s` for /bin/sh.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

absl::StatusOr<PeerResult> RunTorchPeer(const PeerOptions& o) {
  if (access(o.python.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat(o.python, ": no Python interpreter"));
  }
  if (access(o.script.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(o.script, ": no peer script"));
  }
  std::string command = absl::StrJoin(
      {ShellQuote(o.python), ShellQuote(o.script), std::string("--device cpu"),
       absl::StrCat("--threads ", o.threads), absl::StrCat("--batch ", o.batch),
       absl::StrCat("--steps ", o.steps),
       o.model.empty() ? std::string(o.lrn ? "" : "--no-lrn")
                       : absl::StrCat("--model ", ShellQuote(o.model)),
       std::string(o.channels_last ? "--channels_last" : ""),
       std::string(o.bf16_autocast ? "--bf16_autocast" : ""),
       std::string("2>&1")},
      " ");
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot run: ", command));
  }
  std::string output;
  std::array<char, 4096> buffer;
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) {
    output += buffer.data();
  }
  const int status = pclose(pipe);
  const std::string kKey = "images_per_s=";
  const size_t at = output.find(kKey);
  char* parsed_end = nullptr;
  const double rate =
      at == std::string::npos
          ? 0.0
          : std::strtod(output.c_str() + at + kKey.size(), &parsed_end);
  if (status != 0 || at == std::string::npos || !(rate > 0.0)) {
    const std::string tail =
        output.size() > 600 ? output.substr(output.size() - 600) : output;
    return absl::UnavailableError(absl::StrCat(
        "the peer failed (exit status ", WEXITSTATUS(status), "): ", tail));
  }
  PeerResult r;
  r.images_per_s = rate;
  // The peer's line holding the figure.
  const size_t line_begin = output.rfind('\n', at);
  const size_t begin = line_begin == std::string::npos ? 0 : line_begin + 1;
  const size_t end = output.find('\n', at);
  r.line = output.substr(
      begin, end == std::string::npos ? std::string::npos : end - begin);
  return r;
}

}  // namespace psgd
