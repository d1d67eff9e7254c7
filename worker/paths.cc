#include "worker/paths.h"

#include <cstdlib>
#include <filesystem>

namespace psgd {

namespace {

std::string ResolveAgainst(const char* variable, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  const char* dir = std::getenv(variable);
  if (dir == nullptr || *dir == '\0') return path;
  return (std::filesystem::path(dir) / path).string();
}

}  // namespace

std::string ResolveUserPath(const std::string& path) {
  return ResolveAgainst("BUILD_WORKING_DIRECTORY", path);
}

std::string ResolveWorkspacePath(const std::string& path) {
  return ResolveAgainst("BUILD_WORKSPACE_DIRECTORY", path);
}

}  // namespace psgd
