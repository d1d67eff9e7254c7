#include "common/grpc_security.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/support/client_interceptor.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace psgd {
namespace {

using grpc::experimental::ClientInterceptorFactoryInterface;
using grpc::experimental::ClientRpcInfo;
using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::Interceptor;
using grpc::experimental::InterceptorBatchMethods;

// Adds the authorization metadata to a call's initial metadata.
class TokenInterceptor final : public Interceptor {
 public:
  explicit TokenInterceptor(const std::string* value) : value_(value) {}

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAuthorizationKey, *value_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const value_;  // Owned by the factory.
};

// One per channel; outlives the channel's calls.
class TokenInterceptorFactory final : public ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : value_(absl::StrCat(kBearerPrefix, token)) {}

  Interceptor* CreateClientInterceptor(ClientRpcInfo* info) override {
    return new TokenInterceptor(&value_);
  }

 private:
  const std::string value_;
};

// The contents of a PEM file named by `field` of the security options.
absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    absl::string_view field) {
  absl::StatusOr<std::string> pem = ReadFileToString(path);
  if (!pem.ok()) return Annotate(pem.status(), absl::StrCat(field, ": "));
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& options) {
  if (!options.tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(
      GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key,
                   ReadPem(options.tls_key_file, "tls key_file"));
  ASSIGN_OR_RETURN(pair.cert_chain,
                   ReadPem(options.tls_cert_file, "tls cert_file"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<ClientCredentials> MakeClientCredentials(
    const SecurityOptions& options) {
  ClientCredentials c;
  c.token = options.token;
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_root_certs,
                       ReadPem(options.tls_ca_file, "tls ca_file"));
    }
    c.channel = grpc::SslCredentials(ssl);
  }
  return c;
}

grpc::ChannelArguments PeerChannelArguments() {
  grpc::ChannelArguments args;
  // The minimum is also how long a connection attempt may take until the
  // server's HTTP/2 SETTINGS arrive: at 100 ms, attempts on a loaded
  // machine (load average 8 and more, as when other builds run) timed out
  // and calls failed with UNAVAILABLE "timed out before receiving SETTINGS
  // frame".
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

std::shared_ptr<grpc::Channel> CreateChannel(
    const std::string& address, const ClientCredentials& credentials,
    const grpc::ChannelArguments& args) {
  std::vector<std::unique_ptr<ClientInterceptorFactoryInterface>> interceptors;
  if (!credentials.token.empty()) {
    interceptors.push_back(
        std::make_unique<TokenInterceptorFactory>(credentials.token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials.channel, args, std::move(interceptors));
}

CallAuthenticator::CallAuthenticator(std::string token,
                                     absl::string_view refusal)
    : expected_(token.empty() ? "" : absl::StrCat(kBearerPrefix, token)),
      refusal_(refusal) {}

grpc::Status CallAuthenticator::Check(const grpc::ServerContextBase& context) {
  if (expected_.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  // Exactly one authorization entry, equal to the expected one.
  auto [first, last] = metadata.equal_range(kAuthorizationKey);
  if (first != last && std::next(first) == last &&
      ConstantTimeEquals(
          absl::string_view(first->second.data(), first->second.size()),
          expected_)) {
    return grpc::Status::OK;
  }
  refused_.fetch_add(1, std::memory_order_relaxed);
  // The same words for every refusal (never which of the two), and where
  // a member that meets it by mistake looks: its tasks read other files.
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, refusal_);
}

}  // namespace psgd
