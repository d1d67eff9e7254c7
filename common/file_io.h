// Files that are either whole or absent: atomic writes (temporary file,
// fsync, rename, fsync of the directory) and checksummed framing, so that a
// reader detects a truncated or corrupt file instead of using it.
//
// A checksummed file is:
//   magic   8 bytes, chosen by the caller (e.g. "PSGDCKPT")
//   length  8 bytes, little-endian payload length
//   crc     4 bytes, little-endian CRC-32C of the payload
//   payload
//
// Thread-safety: free functions; concurrent writers of one path each leave a
// whole file (the last rename wins).
#ifndef PSGD_COMMON_FILE_IO_H_
#define PSGD_COMMON_FILE_IO_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psgd {

// The low `bytes` bytes of `v`, little-endian, appended to *out; and back
// from the first `bytes` bytes of `in` (which must hold them).
void PutLe(std::string* out, uint64_t v, int bytes);
uint64_t GetLe(absl::string_view in, int bytes);

// CRC-32C (Castagnoli) of `data`, continuing from `crc` (0 to start).
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

// Writes `data` to `path` so that the file is either the old one or the new
// one, never partial, also across a crash. Creates no directories. INTERNAL
// (naming the path and errno text) when a system call fails; nothing at
// `path` changes then. The temporary file, PATH.tmp.<pid>.<n>.<random>, is
// unique per call, so several threads may write one path at once (the last
// rename wins; every call succeeds); it is made with O_EXCL | O_NOFOLLOW,
// and the rename replaces a link at `path` rather than following it, so no
// file is written through a planted link. The caller checks the directory
// (CheckTrustedDirectory) where another user might write into it.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data);

// The whole file. NOT_FOUND when absent, INTERNAL for other failures.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Creates `path` and its missing parents (mode 0755). INTERNAL on failure.
absl::Status MakeDirectories(const std::string& path);

// As MakeDirectories, for a directory this process writes files into that
// must survive a crash and that nobody else may have chosen: each directory
// it creates is made durable in its parent (fsync of the parent), and
// `path` itself must be a directory, not a symbolic link, owned by this
// process's user and writable by neither its group nor others
// (FAILED_PRECONDITION naming it and what is wrong otherwise).
absl::Status MakeOwnDirectories(const std::string& path);

// The directory part of `path`: "." for a bare name, "/" for "/name".
std::string DirectoryOf(const std::string& path);

// OK when only this process's user (or root) can change what the directory
// open at `dir_fd` holds: it is owned by this user or by root, and neither
// its group nor others may write it (a sticky bit is not enough: others
// could still add a file of their own). FAILED_PRECONDITION naming `dir`
// (the name it was opened by), its owner or mode, and the fix otherwise;
// INTERNAL when it cannot be examined. For a directory a file is read from
// or written into that another user must not have placed there.
absl::Status CheckTrustedDirectoryFd(int dir_fd, const std::string& dir);

// CheckTrustedDirectoryFd for the directory at `dir` (links on the way
// followed). NOT_FOUND when there is no such directory, FAILED_PRECONDITION
// when `dir` is not a directory.
absl::Status CheckTrustedDirectory(const std::string& dir);

// magic + length + crc + payload. `magic` must be 8 bytes.
std::string FrameChecksummed(absl::string_view magic,
                             absl::string_view payload);

// The payload of a framed file's bytes. DATA_LOSS naming `filename` and what
// is wrong (wrong magic, truncated, oversized, checksum mismatch).
absl::StatusOr<std::string> UnframeChecksummed(absl::string_view magic,
                                               absl::string_view bytes,
                                               absl::string_view filename);

}  // namespace psgd

#endif  // PSGD_COMMON_FILE_IO_H_
