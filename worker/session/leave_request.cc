#include "worker/session/leave_request.h"

#include <signal.h>

#include <atomic>

namespace psgd {
namespace {

std::atomic<bool> leave_requested{false};

void OnSigterm(int) { leave_requested.store(true); }

}  // namespace

const char kLeaveRequested[] =
    "asked to leave (SIGTERM): left at a step boundary";

void InstallLeaveOnSigterm() {
  struct sigaction action = {};
  action.sa_handler = OnSigterm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

void RequestLeave() { leave_requested.store(true); }

bool LeaveRequested() { return leave_requested.load(); }

}  // namespace psgd
