// Remote access: a TCP listener that requires TLS with client certificates,
// whose subjects map to tenants. Certificates are made with openssl per run.

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/internal/connection.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "hrx/v1/session.grpc.pb.h"
#include "hrx/v1/status.grpc.pb.h"
#include "shared/grpc_status.h"
#include "tests/client_fixture.h"

namespace hrx::testing {
namespace {

using ::hrx::shared::IsOk;
using ::hrx::shared::StatusIs;
using ::testing::HasSubstr;

// A CA, a server certificate for 127.0.0.1, and client certificates for
// CN=watcher (listed in the config) and CN=stranger (not listed).
constexpr char kMakeCertificates[] = R"(set -e
cd "$1"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=hrx-test-ca \
  -keyout ca.key -out ca.pem 2>/dev/null
for name in server watcher stranger worker empty; do
  subject=/CN=$name
  [ $name = empty ] && subject=/
  openssl req -newkey rsa:2048 -nodes -subj $subject -keyout $name.key \
    -out $name.csr 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > $name.ext
  openssl x509 -req -in $name.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -days 1 -extfile $name.ext -out $name.pem 2>/dev/null
done
)";

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class RemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeShortTempDir();
    const RunResult made =
        RunToCompletion({"/bin/sh", "-c", kMakeCertificates, "sh", dir_}, dir_);
    ASSERT_EQ(made.exit_code, 0) << made.err;
    std::ofstream(dir_ + "/hrxd.conf") << R"(
tenants {
  name: "remote-watch"
  certificate_subjects: "CN=watcher"
  role: ROLE_OBSERVER
}
tenants {
  name: "remote-work"
  certificate_subjects: "CN=worker"
}
tenants {
  name: "ops"
  uids: 0
  role: ROLE_ADMIN
}
)";
    address_ = absl::StrCat("127.0.0.1:", FreeLoopbackPort());
    auto daemon = TestDaemon::Start(
        {"--config=" + dir_ + "/hrxd.conf", "--listen=" + address_,
         "--tls_cert=" + dir_ + "/server.pem",
         "--tls_key=" + dir_ + "/server.key",
         "--tls_client_ca=" + dir_ + "/ca.pem",
         "--remote_session_lease_ms=500"},
        dir_);
    ASSERT_THAT(daemon.status(), IsOk());
    daemon_ = *std::move(daemon);
  }

  std::shared_ptr<grpc::Channel> Channel(const std::string& client) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = Read(dir_ + "/ca.pem");
    if (!client.empty()) {
      tls.pem_private_key = Read(dir_ + "/" + client + ".key");
      tls.pem_cert_chain = Read(dir_ + "/" + client + ".pem");
    }
    return grpc::CreateChannel(address_, grpc::SslCredentials(tls));
  }

  absl::Status ListTenants(const std::string& client,
                           hrx::v1::ListTenantsResponse* response) {
    auto stub = hrx::v1::Admin::NewStub(Channel(client));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    return shared::FromGrpcStatus(
        stub->ListTenants(&context, hrx::v1::ListTenantsRequest(), response));
  }

  std::string dir_;
  std::string address_;
  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(RemoteTest, AListedCertificateActsWithItsTenantsRole) {
  hrx::v1::ListTenantsResponse tenants;
  ASSERT_THAT(ListTenants("watcher", &tenants), IsOk());
  EXPECT_EQ(tenants.tenants(0).name(), "remote-watch");
  // An observer may not change budgets.
  auto stub = hrx::v1::Admin::NewStub(Channel("watcher"));
  grpc::ClientContext context;
  hrx::v1::SetBudgetRequest request;
  request.set_tenant("remote-watch");
  hrx::v1::SetBudgetResponse response;
  EXPECT_THAT(
      shared::FromGrpcStatus(stub->SetBudget(&context, request, &response)),
      StatusIs(absl::StatusCode::kPermissionDenied,
               HasSubstr("role_required")));
}

TEST_F(RemoteTest, AnUnlistedCertificateIsRefused) {
  {
    auto status_stub = hrx::v1::DaemonStatus::NewStub(Channel("stranger"));
    grpc::ClientContext context;
    hrx::v1::GetStatusResponse status;
    EXPECT_THAT(shared::FromGrpcStatus(status_stub->GetStatus(
                    &context, hrx::v1::GetStatusRequest(), &status)),
                StatusIs(absl::StatusCode::kPermissionDenied,
                         HasSubstr("unknown_certificate")));
  }
  hrx::v1::ListTenantsResponse tenants;
  EXPECT_THAT(ListTenants("stranger", &tenants),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("role_required")));
  auto stub = hrx::v1::Sessions::NewStub(Channel("stranger"));
  grpc::ClientContext context;
  hrx::v1::OpenSessionResponse opened;
  EXPECT_THAT(shared::FromGrpcStatus(stub->OpenSession(
                  &context, hrx::v1::OpenSessionRequest(), &opened)),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("unknown_certificate: open session: no tenant "
                                 "lists certificate subject \"CN=stranger\"")));
}

// A certificate with an empty subject names nobody: it never falls through
// to uid matching (a remote caller's uid reads 0, like root's).
TEST_F(RemoteTest, ACertificateWithAnEmptySubjectIsNobody) {
  auto admin = hrx::v1::Admin::NewStub(Channel("empty"));
  grpc::ClientContext context;
  hrx::v1::SetBudgetRequest request;
  request.set_tenant("ops");
  request.mutable_budget()->set_device_bytes(uint64_t{1} << 62);
  hrx::v1::SetBudgetResponse response;
  EXPECT_THAT(
      shared::FromGrpcStatus(admin->SetBudget(&context, request, &response)),
      StatusIs(absl::StatusCode::kPermissionDenied,
               HasSubstr("unknown_certificate: the client certificate "
                         "has an empty subject")));
  auto sessions = hrx::v1::Sessions::NewStub(Channel("empty"));
  grpc::ClientContext open_context;
  hrx::v1::OpenSessionResponse opened;
  EXPECT_THAT(shared::FromGrpcStatus(sessions->OpenSession(
                  &open_context, hrx::v1::OpenSessionRequest(), &opened)),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("unknown_certificate")));
}

// gRPC does not report a TCP client's disconnection: a remote session ends
// once its lease (here 500 ms) passes without a call naming it.
TEST_F(RemoteTest, ARemoteSessionEndsWhenItsLeaseLapses) {
  auto local = hrx::v1::Admin::NewStub(
      client::internal::MakeChannel(daemon_->socket_path()));
  auto remote_sessions = [&] {
    grpc::ClientContext context;
    hrx::v1::ListSessionsRequest request;
    request.set_tenant("remote-work");
    hrx::v1::ListSessionsResponse response;
    EXPECT_TRUE(local->ListSessions(&context, request, &response).ok());
    return response.sessions_size();
  };
  {
    auto sessions = hrx::v1::Sessions::NewStub(Channel("worker"));
    grpc::ClientContext context;
    hrx::v1::OpenSessionResponse opened;
    ASSERT_TRUE(
        sessions->OpenSession(&context, hrx::v1::OpenSessionRequest(), &opened)
            .ok());
  }
  EXPECT_EQ(remote_sessions(), 1);
  bool ended = false;
  for (int i = 0; i < 500 && !ended; ++i) {
    ended = remote_sessions() == 0;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ended);
}

TEST_F(RemoteTest, AConnectionWithoutAClientCertificateIsRejected) {
  hrx::v1::ListTenantsResponse tenants;
  EXPECT_THAT(ListTenants("", &tenants),
              StatusIs(absl::StatusCode::kUnavailable, ::testing::_));
}

TEST_F(RemoteTest, HrxctlInspectsARemoteDaemonWithAClientCertificate) {
  auto hrxctl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {
        RunfilePath("client/hrxctl"), "--remote=" + address_,
        "--tls_cert=" + dir_ + "/watcher.pem",
        "--tls_key=" + dir_ + "/watcher.key", "--tls_ca=" + dir_ + "/ca.pem"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunToCompletion(argv, dir_);
  };
  const RunResult tenants = hrxctl({"tenants", "--json"});
  EXPECT_EQ(tenants.exit_code, 0) << tenants.err;
  EXPECT_THAT(tenants.out, HasSubstr("\"name\": \"remote-watch\""));
  const RunResult status = hrxctl({"status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("backend"));
  const RunResult set = hrxctl({"budget", "set", "remote-watch", "streams=1"});
  EXPECT_EQ(set.exit_code, 3);
  EXPECT_THAT(set.err, HasSubstr("role_required"));
  const RunResult no_tls = RunToCompletion(
      {RunfilePath("client/hrxctl"), "--remote=" + address_, "status"}, dir_);
  EXPECT_EQ(no_tls.exit_code, 2);
}

TEST(RemoteListenTest, TcpWithoutTlsIsRefusedAtStartUp) {
  const std::string dir = MakeShortTempDir();
  const RunResult refused =
      RunToCompletion({DaemonPath(), "--socket=" + dir + "/hrxd.sock",
                       "--backend=cpu", "--listen=127.0.0.1:1"},
                      dir);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("tls_required"));
}

}  // namespace
}  // namespace hrx::testing
