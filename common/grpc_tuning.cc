#include "common/grpc_tuning.h"

#include <grpc/grpc.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace psgd {
namespace {

// EXPERIMENT: name=value pairs from PSGD_GRPC_ARGS.
std::vector<std::pair<std::string, int>> Args() {
  std::vector<std::pair<std::string, int>> out;
  const char* env = std::getenv("PSGD_GRPC_ARGS");
  if (env == nullptr) return out;
  std::string s = env;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string kv = s.substr(pos, end - pos);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) {
      out.emplace_back(kv.substr(0, eq), std::atoi(kv.c_str() + eq + 1));
    }
    pos = end + 1;
  }
  return out;
}

}  // namespace

void SetLargeMessageArgs(grpc::ChannelArguments* args) {
  for (const auto& [k, v] : Args()) args->SetInt(k, v);
}

void SetLargeMessageArgs(grpc::ServerBuilder* builder) {
  for (const auto& [k, v] : Args()) builder->AddChannelArgument(k, v);
}

}  // namespace psgd
