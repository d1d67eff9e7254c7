#include "worker/bench/peer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <regex>

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
       absl::StrCat("--steps ", o.steps), std::string(o.lrn ? "" : "--no-lrn"),
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
  static const std::regex kRate("images_per_s=([0-9.]+)");
  std::smatch m;
  if (status != 0 || !std::regex_search(output, m, kRate)) {
    const std::string tail =
        output.size() > 600 ? output.substr(output.size() - 600) : output;
    return absl::UnavailableError(absl::StrCat(
        "the peer failed (exit status ", WEXITSTATUS(status), "): ", tail));
  }
  PeerResult r;
  r.images_per_s = std::stod(m[1].str());
  const size_t end = output.find('\n', m.position(0));
  const size_t begin = output.rfind('\n', m.position(0));
  r.line =
      output.substr(begin == std::string::npos ? 0 : begin + 1,
                    end == std::string::npos
                        ? std::string::npos
                        : end - (begin == std::string::npos ? 0 : begin + 1));
  return r;
}

}  // namespace psgd
