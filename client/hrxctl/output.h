// What every hrxctl command shares: exit codes, refusals and usage errors,
// the admin stub, and output (JSON strings, tables safe for a terminal).
#ifndef HRX_CLIENT_HRXCTL_OUTPUT_H_
#define HRX_CLIENT_HRXCTL_OUTPUT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/hrxctl/target.h"
#include "google/protobuf/message.h"
#include "grpcpp/client_context.h"
#include "hrx/v1/admin.grpc.pb.h"

namespace hrxctl {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;
constexpr int kExitRefused = 3;
constexpr int kExitUnreachable = 4;

// A JSON string literal of `text`.
std::string JsonString(const std::string& text);
// Prints the refusal; kExitUnreachable when no daemon answered, else
// kExitRefused.
int Fail(const absl::Status& status);
// Prints `error` and the usage `text`; kExitUsage.
int Usage(const char* text, const std::string& error);
// The Admin stub, with a 5 s deadline set on `context`.
std::unique_ptr<hrx::v1::Admin::Stub> ConnectAdmin(
    const Target& target, grpc::ClientContext& context);
// Every field of a Usage or Budget as a JSON object (an absent budget field
// is null: unlimited).
std::string FieldsJson(const google::protobuf::Message& message);
// Applies FIELD=VALUE (a Budget field; VALUE a number or "unlimited") to
// `budget`; false when it cannot be read.
bool ApplyBudgetField(const std::string& assignment, hrx::v1::Budget* budget);
// An aligned table; control bytes in cells are shown as \xNN.
void PrintTable(std::vector<std::vector<std::string>> rows);

}  // namespace hrxctl

#endif  // HRX_CLIENT_HRXCTL_OUTPUT_H_
