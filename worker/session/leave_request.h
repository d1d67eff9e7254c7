// A request to leave at the next step boundary, from outside the worker
// loop: SIGTERM (what Kubernetes, Slurm's scancel and a scale-down send
// first). The run that every front end drives (task_run.h) stops before its
// next step with kLeaveRequested as the reason: the step under way is
// finished (its push decided) or, with overlap before its push, given up,
// and the worker leaves the live set at once, as at any end (its data
// chunks go back to the servers' queue), instead of after its lease.
//
//   InstallLeaveOnSigterm();        // first in main, before any thread
//   ... LeaveRequested() ...        // anywhere
//
// SIGTERM never interrupts a thread that computes: it is blocked in the
// calling thread and so in every thread started after it (they inherit the
// mask), and taken by a thread of its own (sigwait). A signal handler runs
// on whichever thread the signal lands on, and one that lands in oneDNN's
// JIT gemm (which points the stack pointer into the heap) writes its frame
// over the heap (oneDNN issue 4845; seen as glibc's "corrupted size vs.
// prev_size" in workers asked to leave during a step). Threads started
// before (OpenBLAS's pool, started when the library is loaded) keep SIGTERM
// unblocked; for them a handler that only stores an atomic flag is
// installed too.
//
// Thread-safety: LeaveRequested and RequestLeave may be called from any
// thread.
#ifndef PSGD_WORKER_SESSION_LEAVE_REQUEST_H_
#define PSGD_WORKER_SESSION_LEAVE_REQUEST_H_

namespace psgd {

// The stop reason of a run whose worker was asked to leave.
extern const char kLeaveRequested[];

// SIGTERM requests a leave instead of ending the process at once. Idempotent.
void InstallLeaveOnSigterm();
// As SIGTERM does; for tests.
void RequestLeave();
bool LeaveRequested();
// Tests: forgets a request, so that the next one is seen as new.
void ResetLeaveRequestForTesting();

}  // namespace psgd

#endif  // PSGD_WORKER_SESSION_LEAVE_REQUEST_H_
