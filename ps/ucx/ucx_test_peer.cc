// A UCX messenger in a process of its own, for messenger_test's faults: it
// listens on 127.0.0.1, prints "port N" and then serves until killed.
//
//   ucx_test_peer --mode=hold    takes requests and never answers them;
//                                prints "held N" as it takes the Nth
//   ucx_test_peer --mode=echo    answers each with its own header and payload
//
// It accepts any key (the keys are messenger_test's other cases).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "ps/ucx/messenger.h"

int main(int argc, char** argv) {
  std::string mode = "hold";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mode=", 7) == 0) {
      mode = argv[i] + 7;
    } else {
      std::fprintf(stderr, "ucx_test_peer: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (mode != "hold" && mode != "echo") {
    std::fprintf(stderr, "ucx_test_peer: --mode='%s': hold or echo\n",
                 mode.c_str());
    return 2;
  }
  auto messenger =
      psgd::ps::ucx::Messenger::Create(psgd::ps::ucx::MessengerOptions());
  if (!messenger.ok()) {
    std::fprintf(stderr, "ucx_test_peer: %s\n",
                 messenger.status().ToString().c_str());
    return 1;
  }
  psgd::ps::ucx::Messenger* m = messenger->get();
  // Requests held (mode hold) stay here until the process is killed.
  auto held = std::make_shared<std::deque<psgd::ps::ucx::Request>>();
  auto port = m->Listen(
      "127.0.0.1", 0,
      [m, mode, held](psgd::ps::ucx::Request request) {
        if (mode == "hold") {
          held->push_back(std::move(request));
          std::printf("held %zu\n", held->size());
          std::fflush(stdout);
          return;
        }
        auto kept =
            std::make_shared<psgd::ps::ucx::Request>(std::move(request));
        m->Respond(kept->peer, kept->call, absl::OkStatus(),
                   std::string(kept->header),
                   {{kept->payload.data(), kept->payload.size()}}, kept);
      },
      /*require_key=*/false);
  if (!port.ok()) {
    std::fprintf(stderr, "ucx_test_peer: %s\n",
                 port.status().ToString().c_str());
    return 1;
  }
  std::printf("port %d\n", *port);
  std::fflush(stdout);
  for (;;) pause();
}
