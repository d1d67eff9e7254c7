// A request to leave at the next step boundary, from outside the worker
// loop: SIGTERM (what Kubernetes, Slurm's scancel and a scale-down send
// first). The run that every front end drives (task_run.h) stops before its
// next step with kLeaveRequested as the reason: the step under way is
// finished (its push decided) or, with overlap before its push, given up,
// and the worker leaves the live set at once, as at any end (its data
// chunks go back to the servers' queue), instead of after its lease.
//
//   InstallLeaveOnSigterm();        // once, in main
//   ... LeaveRequested() ...        // anywhere
//
// Thread-safety: LeaveRequested and RequestLeave may be called from any
// thread; the handler only stores an atomic flag (async-signal-safe).
#ifndef PSGD_WORKER_SESSION_LEAVE_REQUEST_H_
#define PSGD_WORKER_SESSION_LEAVE_REQUEST_H_

namespace psgd {

// The stop reason of a run whose worker was asked to leave.
extern const char kLeaveRequested[];

// SIGTERM requests a leave instead of ending the process at once.
void InstallLeaveOnSigterm();
// As SIGTERM does; for tests.
void RequestLeave();
bool LeaveRequested();

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_LEAVE_REQUEST_H_
