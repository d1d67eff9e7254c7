// Checks //third_party/system:ucx: UCP links, a context with active
// messages and wakeup starts on the transports selected through
// ucp_config_modify (as UCX_TLS would, without the environment), and a
// worker reports how large an active message's header may be (the
// messenger's request header must fit in it).
#include <ucp/api/ucp.h>

#include <catch2/catch.hpp>
#include <string>

namespace {

// Starts a context and a worker on `transports` and returns the worker's
// largest active-message header, or 0 when UCX refused.
size_t MaxAmHeader(const char* transports) {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return 0;
  if (ucp_config_modify(config, "TLS", transports) != UCS_OK) {
    ucp_config_release(config);
    return 0;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucp_context_h context = nullptr;
  const ucs_status_t init = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (init != UCS_OK) return 0;
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  size_t max_header = 0;
  if (ucp_worker_create(context, &worker_params, &worker) == UCS_OK) {
    ucp_worker_attr_t attr{};
    attr.field_mask = UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER;
    if (ucp_worker_query(worker, &attr) == UCS_OK) {
      max_header = attr.max_am_header;
    }
    int efd = -1;
    // The wakeup feature gives a file descriptor to sleep on when idle.
    if (ucp_worker_get_efd(worker, &efd) != UCS_OK || efd < 0) max_header = 0;
    ucp_worker_destroy(worker);
  }
  ucp_cleanup(context);
  return max_header;
}

TEST_CASE("UCP starts with active messages over tcp and shared memory") {
  const char* transports = GENERATE("tcp", "posix,cma,tcp");
  INFO("transports " << transports);
  CHECK(MaxAmHeader(transports) >= 64);
}

// UCX 1.13 keeps a key it does not know (it may belong to a transport
// loaded later) but parses a known key's value at once: the messenger must
// validate its own option names, and can rely on UCX for the values.
TEST_CASE("ucp_config_modify parses known values, keeps unknown keys") {
  ucp_config_t* config = nullptr;
  REQUIRE(ucp_config_read(nullptr, nullptr, &config) == UCS_OK);
  CHECK(ucp_config_modify(config, "RNDV_THRESH", "65536") == UCS_OK);
  CHECK(ucp_config_modify(config, "RNDV_THRESH", "not-a-size") != UCS_OK);
  CHECK(ucp_config_modify(config, "NO_SUCH_SETTING", "1") == UCS_OK);
  ucp_config_release(config);
}

}  // namespace
