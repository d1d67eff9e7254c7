// Paths given on a command line are relative to where the user ran it. Under
// `bazel run` the program runs in its runfiles tree and Bazel passes the
// user's directory in BUILD_WORKING_DIRECTORY and the workspace root in
// BUILD_WORKSPACE_DIRECTORY (facts of how the program was started, not
// settings), so relative paths are resolved against them there.
//
// Thread-safety: pure function (reads the environment).
#ifndef PSGD_WORKER_PATHS_H_
#define PSGD_WORKER_PATHS_H_

#include <string>

namespace psgd {

// `path` unchanged when empty or absolute or outside `bazel run`; else
// BUILD_WORKING_DIRECTORY/path.
std::string ResolveUserPath(const std::string& path);

// The same against the workspace root (BUILD_WORKSPACE_DIRECTORY under
// `bazel run`), for defaults that name files beside the workspace.
std::string ResolveWorkspacePath(const std::string& path);

}  // namespace psgd

#endif  // PSGD_WORKER_PATHS_H_
