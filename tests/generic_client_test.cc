// A generic gRPC client, knowing nothing of hrx.v1 at compile time, checks
// the daemon's health, discovers its services through server reflection and
// calls one with messages built from the reflected descriptors.
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "client/internal/connection.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "shared/status_matchers.h"
#include "tests/test_daemon.h"

namespace hrx::testing {
namespace {

using ::grpc::reflection::v1alpha::ServerReflection;
using ::grpc::reflection::v1alpha::ServerReflectionRequest;
using ::grpc::reflection::v1alpha::ServerReflectionResponse;
using ::hrx::shared::IsOk;
using ::testing::Contains;

class GenericClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = TestDaemon::Start();
    ASSERT_THAT(daemon.status(), IsOk());
    daemon_ = *std::move(daemon);
    channel_ = client::internal::MakeChannel(daemon_->socket_path());
  }

  // One reflection exchange on a fresh stream.
  ServerReflectionResponse Reflect(const ServerReflectionRequest& request) {
    auto stub = ServerReflection::NewStub(channel_);
    grpc::ClientContext context;
    auto stream = stub->ServerReflectionInfo(&context);
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    ServerReflectionResponse response;
    EXPECT_TRUE(stream->Read(&response));
    ServerReflectionResponse extra;
    while (stream->Read(&extra)) {
    }
    EXPECT_TRUE(stream->Finish().ok());
    return response;
  }

  std::unique_ptr<TestDaemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GenericClientTest, HealthServiceReportsServing) {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;  // "" = the whole server
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(stub->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST_F(GenericClientTest, ReflectionListsEveryHrxService) {
  ServerReflectionRequest request;
  request.set_list_services("");
  const ServerReflectionResponse response = Reflect(request);
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) {
    names.push_back(service.name());
  }
  for (const char* expected :
       {"hrx.v1.Sessions", "hrx.v1.Devices", "hrx.v1.Buffers", "hrx.v1.Streams",
        "hrx.v1.DaemonStatus", "grpc.health.v1.Health"}) {
    EXPECT_THAT(names, Contains(expected));
  }
}

TEST_F(GenericClientTest, CallsGetStatusFromReflectedDescriptorsAlone) {
  // Fetch the file defining the service, with its dependencies.
  ServerReflectionRequest request;
  request.set_file_containing_symbol("hrx.v1.DaemonStatus");
  const ServerReflectionResponse response = Reflect(request);
  google::protobuf::DescriptorPool pool;
  // Dependencies may arrive after the files that import them: retry until
  // every file has been built.
  std::vector<google::protobuf::FileDescriptorProto> files;
  for (const std::string& bytes :
       response.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    files.push_back(file);
  }
  for (size_t pass = 0; pass < files.size(); ++pass) {
    for (const auto& file : files) {
      if (pool.FindFileByName(file.name()) == nullptr) pool.BuildFile(file);
    }
  }
  const google::protobuf::ServiceDescriptor* service =
      pool.FindServiceByName("hrx.v1.DaemonStatus");
  ASSERT_NE(service, nullptr);
  const google::protobuf::MethodDescriptor* method =
      service->FindMethodByName("GetStatus");
  ASSERT_NE(method, nullptr);

  google::protobuf::DynamicMessageFactory factory(&pool);
  std::unique_ptr<google::protobuf::Message> call_request(
      factory.GetPrototype(method->input_type())->New());
  const grpc::Slice request_slice(call_request->SerializeAsString());
  grpc::ByteBuffer request_bytes(&request_slice, 1);

  grpc::GenericStub stub(channel_);
  grpc::ClientContext context;
  grpc::ByteBuffer response_bytes;
  grpc::Status call_status;
  absl::Notification done;
  stub.UnaryCall(&context, "/hrx.v1.DaemonStatus/GetStatus",
                 grpc::StubOptions(), &request_bytes, &response_bytes,
                 [&](grpc::Status status) {
                   call_status = status;
                   done.Notify();
                 });
  done.WaitForNotification();
  ASSERT_TRUE(call_status.ok()) << call_status.error_message();

  std::unique_ptr<google::protobuf::Message> reply(
      factory.GetPrototype(method->output_type())->New());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response_bytes.Dump(&slices).ok());
  std::string reply_bytes;
  for (const grpc::Slice& slice : slices) {
    reply_bytes.append(reinterpret_cast<const char*>(slice.begin()),
                       slice.size());
  }
  ASSERT_TRUE(reply->ParseFromString(reply_bytes));
  const auto* device_field = reply->GetDescriptor()->FindFieldByName("device");
  ASSERT_NE(device_field, nullptr);
  const google::protobuf::Message& device =
      reply->GetReflection()->GetMessage(*reply, device_field);
  const auto* backend_field =
      device.GetDescriptor()->FindFieldByName("backend");
  ASSERT_NE(backend_field, nullptr);
  EXPECT_EQ(device.GetReflection()->GetString(device, backend_field),
            TestBackend());
}

}  // namespace
}  // namespace hrx::testing
