#include "client/hrxctl/target.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "client/internal/connection.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "shared/grpc_status.h"
#include "shared/refusal.h"

namespace hrxctl {
using ::hrx::Reason;
using ::hrx::Refusal;
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::shared_ptr<grpc::Channel> Target::Channel() const {
  if (remote.empty()) return hrx::client::internal::MakeChannel(socket_path);
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = Read(tls_ca);
  tls.pem_private_key = Read(tls_key);
  tls.pem_cert_chain = Read(tls_cert);
  return grpc::CreateChannel(remote, grpc::SslCredentials(tls));
}

absl::Status Target::Check(const grpc::Status& status) const {
  if (remote.empty()) {
    return hrx::client::internal::CallStatus(status, socket_path);
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return Refusal(
        Reason::kDaemonUnreachable,
        absl::StrFormat(
            "no hrxd answers at %s over TLS (%s). Fix: check "
            "the address, that hrxd runs with --listen there, and that "
            "--tls_cert/--tls_key/--tls_ca are the right files.",
            remote, status.error_message()));
  }
  return hrx::shared::FromGrpcStatus(status);
}

}  // namespace hrxctl
