// hrxctl bound ...: socket-bound tenants (docs/kubernetes.md), and hrxctl
// health, the probe a service manager or Kubernetes runs.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/hrxctl/output.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "shared/bytes.h"

namespace hrxctl {
namespace {

constexpr char kBoundUsage[] =
    "usage: hrxctl [target] bound [list] [--json]\n"
    "       hrxctl [target] bound create NAME [FIELD=VALUE...] "
    "[load_kernels=true] [label:KEY=VALUE...]\n"
    "       hrxctl [target] bound label NAME [KEY=VALUE...]\n"
    "       hrxctl [target] bound remove NAME\n"
    "\n"
    "Socket-bound tenants: each has a socket of its own,\n"
    "<tenant_socket_dir>/NAME/hrxd.sock, and whoever connects through it is\n"
    "that tenant whatever its uid. The Kubernetes device plugin makes one per\n"
    "container; POD is the pod it recorded. create (admins) takes budget\n"
    "fields as budget set does; label replaces the labels; remove (admins)\n"
    "closes the tenant's connections and sessions and returns its budget.\n";

// The labels hrx-device-plugin records (docs/kubernetes.md).
constexpr char kPodLabel[] = "hrx.dev/pod";
constexpr char kContainerLabel[] = "hrx.dev/container";

std::string Label(const hrx::v1::BoundTenant& tenant, const char* key) {
  auto it = tenant.labels().find(key);
  return it == tenant.labels().end() ? "" : it->second;
}

std::string LabelsJson(const hrx::v1::BoundTenant& tenant) {
  std::vector<std::string> pairs;
  for (const auto& [key, value] : tenant.labels()) {
    pairs.push_back(absl::StrCat(JsonString(key), ": ", JsonString(value)));
  }
  std::sort(pairs.begin(), pairs.end());
  return absl::StrCat("{", absl::StrJoin(pairs, ", "), "}");
}

std::string BoundJson(const hrx::v1::BoundTenant& t) {
  return absl::StrFormat(
      "{\"name\": %s, \"socket_path\": %s, \"pod\": %s, \"container\": %s, "
      "\"labels\": %s, \"sessions\": %u, \"load_kernels\": %s, "
      "\"created_unix_ms\": %d, \"budget\": %s, \"usage\": %s}",
      JsonString(t.name()), JsonString(t.socket_path()),
      JsonString(Label(t, kPodLabel)), JsonString(Label(t, kContainerLabel)),
      LabelsJson(t), t.sessions(), t.load_kernels() ? "true" : "false",
      t.created_unix_ms(), FieldsJson(t.budget()), FieldsJson(t.usage()));
}

int List(const Target& target, bool json) {
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  hrx::v1::ListBoundTenantsResponse response;
  const grpc::Status status = stub->ListBoundTenants(
      &context, hrx::v1::ListBoundTenantsRequest(), &response);
  if (!status.ok()) return Fail(target.Check(status));
  if (json) {
    std::vector<std::string> tenants;
    for (const auto& t : response.tenants()) tenants.push_back(BoundJson(t));
    absl::PrintF(
        "{\"tenant_socket_dir\": %s, \"max_bound_tenants\": %u, "
        "\"tenants\": [%s]}\n",
        JsonString(response.tenant_socket_dir()).c_str(),
        response.max_bound_tenants(), absl::StrJoin(tenants, ", ").c_str());
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "POD", "CONTAINER",
                                                 "DEVICE BYTES", "SESSIONS",
                                                 "AGE", "SOCKET"}};
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (const auto& t : response.tenants()) {
    const std::string pod = Label(t, kPodLabel);
    rows.push_back(
        {t.name(), pod.empty() ? "-" : pod,
         Label(t, kContainerLabel).empty() ? "-" : Label(t, kContainerLabel),
         absl::StrCat(hrx::shared::FormatBytes(t.usage().device_bytes()), " / ",
                      t.budget().has_device_bytes()
                          ? hrx::shared::FormatBytes(t.budget().device_bytes())
                          : std::string("unlimited")),
         absl::StrCat(t.sessions()),
         absl::FormatDuration(
             absl::Seconds((now_ms - t.created_unix_ms()) / 1000)),
         t.socket_path()});
  }
  PrintTable(rows);
  absl::PrintF("%d of at most %u bound tenants, in %s\n",
               response.tenants_size(), response.max_bound_tenants(),
               response.tenant_socket_dir().c_str());
  return kExitOk;
}

// KEY=VALUE into `labels`; false when there is no '='.
bool ParseLabel(const std::string& text,
                google::protobuf::Map<std::string, std::string>* labels) {
  std::vector<std::string> parts =
      absl::StrSplit(text, absl::MaxSplits('=', 1));
  if (parts.size() != 2) return false;
  (*labels)[parts[0]] = parts[1];
  return true;
}

int Create(const Target& target, const std::vector<std::string>& args,
           bool json) {
  hrx::v1::CreateBoundTenantRequest request;
  request.set_name(args[0]);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "load_kernels=true" || arg == "load_kernels=false") {
      request.set_load_kernels(arg == "load_kernels=true");
    } else if (arg.rfind("label:", 0) == 0) {
      if (!ParseLabel(arg.substr(6), request.mutable_labels())) {
        return Usage(kBoundUsage, absl::StrCat("bound create: cannot read ",
                                               arg, " (label:KEY=VALUE)"));
      }
    } else if (!ApplyBudgetField(arg, request.mutable_budget())) {
      return Usage(kBoundUsage,
                   absl::StrCat("bound create: cannot read ", arg));
    }
  }
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  hrx::v1::CreateBoundTenantResponse response;
  const grpc::Status status =
      stub->CreateBoundTenant(&context, request, &response);
  if (!status.ok()) return Fail(target.Check(status));
  if (json) {
    absl::PrintF("%s\n", BoundJson(response.tenant()).c_str());
  } else {
    absl::PrintF("bound tenant %s: socket %s\n",
                 response.tenant().name().c_str(),
                 response.tenant().socket_path().c_str());
  }
  return kExitOk;
}

int Relabel(const Target& target, const std::vector<std::string>& args) {
  hrx::v1::SetBoundTenantLabelsRequest request;
  request.set_name(args[0]);
  for (size_t i = 1; i < args.size(); ++i) {
    if (!ParseLabel(args[i], request.mutable_labels())) {
      return Usage(kBoundUsage, absl::StrCat("bound label: cannot read ",
                                             args[i], " (KEY=VALUE)"));
    }
  }
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  hrx::v1::SetBoundTenantLabelsResponse response;
  const grpc::Status status =
      stub->SetBoundTenantLabels(&context, request, &response);
  if (!status.ok()) return Fail(target.Check(status));
  return kExitOk;
}

int Remove(const Target& target, const std::string& name, bool json) {
  grpc::ClientContext context;
  auto stub = ConnectAdmin(target, context);
  // Closing sessions waits for their queued work: more than the usual 5 s.
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  hrx::v1::RemoveBoundTenantRequest request;
  request.set_name(name);
  hrx::v1::RemoveBoundTenantResponse response;
  const grpc::Status status =
      stub->RemoveBoundTenant(&context, request, &response);
  if (!status.ok()) return Fail(target.Check(status));
  if (json) {
    absl::PrintF(
        "{\"removed\": %s, \"closed_sessions\": %u, "
        "\"closed_connections\": %u}\n",
        JsonString(name).c_str(), response.closed_sessions(),
        response.closed_connections());
  } else {
    absl::PrintF(
        "bound tenant %s removed: %u sessions, %u connections closed\n",
        name.c_str(), response.closed_sessions(),
        response.closed_connections());
  }
  return kExitOk;
}

}  // namespace

const char* BoundUsage() { return kBoundUsage; }

int Bound(const Target& target, const std::vector<std::string>& args,
          bool json) {
  if (args.empty() || (args[0] == "list" && args.size() == 1)) {
    return List(target, json);
  }
  if (args[0] == "create" && args.size() >= 2) {
    return Create(target, {args.begin() + 1, args.end()}, json);
  }
  if (args[0] == "label" && args.size() >= 2) {
    return Relabel(target, {args.begin() + 1, args.end()});
  }
  if (args[0] == "remove" && args.size() == 2) {
    return Remove(target, args[1], json);
  }
  return Usage(kBoundUsage, "bound: unexpected arguments");
}

int Health(const Target& target) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  auto stub = grpc::health::v1::Health::NewStub(target.Channel());
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return Fail(target.Check(status));
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    absl::PrintF("not serving\n");
    return kExitRefused;
  }
  absl::PrintF("serving\n");
  return kExitOk;
}

}  // namespace hrxctl
