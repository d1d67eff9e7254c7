#include "worker/session/lease_keeper.h"

namespace psgd {

LeaseKeeper::LeaseKeeper(ps::PsClient* client, absl::Duration period)
    : thread_([this, client, period]() {
        while (!stop_.WaitForNotificationWithTimeout(period)) {
          client->Join().IgnoreError();
          ++renewals_;
        }
      }) {}

LeaseKeeper::~LeaseKeeper() {
  stop_.Notify();
  thread_.join();
}

}  // namespace psgd
