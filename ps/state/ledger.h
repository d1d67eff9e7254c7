// The ledger file of a shard: one line per chunk whose gradient the shard
// applied (the format is data_queue.h's FormatLedgerLine), which
// scripts/ledger_check.py reads against the workers' own records.
//
// Lines are added under the shard's mutex, in the order the shard applies
// the steps, and written to the file later, outside it (Write, by the
// thread that applied them before it answers anyone): the shard's lock is
// never held across a write to disk. A checkpoint names the length Flush()
// returns, which writes what is pending first, so that it never names more
// bytes than the file holds. Truncate() cuts the file back to a
// checkpoint's length (a restore or rollback), writing what is pending
// first.
//
// Errors of the file (a full disk) are logged, never returned into a push:
// the ledger is a record for checking a run, not the training state.
//
// Thread-safety: thread-safe. Lines reach the file in the order Add was
// called, whichever threads write them.
#ifndef PSGD_PS_STATE_LEDGER_H_
#define PSGD_PS_STATE_LEDGER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace psgd {
namespace ps {

class Ledger {
 public:
  // Opens `path` for appending (its folder made where missing). `owner`
  // names the shard in messages ("shard 0"). FAILED_PRECONDITION, naming
  // the file, when its folder is not this user's own (MakeOwnDirectories:
  // a link, another user's, writable by others) or `path` is a link or not
  // this user's regular file: nothing is created or written then.
  // INTERNAL when a system call fails.
  static absl::StatusOr<std::unique_ptr<Ledger>> Open(const std::string& path,
                                                      const std::string& owner);
  // Writes what is pending and closes the file.
  ~Ledger();

  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // Adds one line (without its newline) to those pending.
  void Add(std::string line) ABSL_LOCKS_EXCLUDED(pending_mu_);
  // Writes the pending lines to the file, in order, and flushes it.
  void Write() ABSL_LOCKS_EXCLUDED(write_mu_, pending_mu_);
  // Write(), then the file's length in bytes.
  int64_t Flush() ABSL_LOCKS_EXCLUDED(write_mu_, pending_mu_);
  // Cuts the ledger back to `length` bytes, one that Flush() returned (what
  // is pending is written first).
  void Truncate(int64_t length) ABSL_LOCKS_EXCLUDED(write_mu_, pending_mu_);

  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  Ledger(std::string path, std::string owner, std::FILE* file);
  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_)
      ABSL_LOCKS_EXCLUDED(pending_mu_);

  const std::string path_;
  const std::string owner_;
  // Writers take write_mu_ and then pending_mu_ (never the other way):
  // Add, under the shard's lock, waits only for pending_mu_, which no one
  // holds across a write to disk.
  Mutex write_mu_;
  std::unique_ptr<std::FILE, Closer> file_ ABSL_GUARDED_BY(write_mu_);
  // The last write failed (its lines wait in pending_).
  bool failing_ ABSL_GUARDED_BY(write_mu_) = false;
  Mutex pending_mu_;
  std::vector<std::string> pending_ ABSL_GUARDED_BY(pending_mu_);
};

}  // namespace ps
}  // namespace psgd

#endif  // PSGD_PS_STATE_LEDGER_H_
