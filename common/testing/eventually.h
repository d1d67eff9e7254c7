// Eventually: for tests that wait on something seen only through another
// thread's or process's state (a counter, a file), with no event to wait
// on. Polls `done` until it holds or `limit` passes and returns whether it
// held. No timing is asserted: the limit only turns a hang into a failure
// with a message, so it is generous.
//
// Thread-safety: as `done`.
#ifndef PSGD_COMMON_TESTING_EVENTUALLY_H_
#define PSGD_COMMON_TESTING_EVENTUALLY_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace psgd {

template <typename Predicate>
bool Eventually(Predicate done, absl::Duration limit = absl::Seconds(60)) {
  const absl::Time give_up = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

}  // namespace psgd

#endif  // PSGD_COMMON_TESTING_EVENTUALLY_H_
