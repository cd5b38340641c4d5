// A client process of one tenant for multi-uid tests: reads whatever files
// it needs while still root, switches to --uid/--gid, connects, runs one
// scenario and prints what happened as "key: value" lines. Exit 0 when the
// scenario ran (its checks are the test's).
//
//   tenant_client --socket=PATH --uid=N --gid=N --scenario=NAME [options]
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/internal/connection.h"
#include "client/internal/fd_channel.h"
#include "hrx/client.h"
#include "hrx/v1/admin.grpc.pb.h"
#include "hrx/v1/buffer.grpc.pb.h"
#include "shared/socket_path.h"
#include "tests/program_io.h"

namespace {

using hrx::testing::Flag;
using hrx::testing::Number;
using hrx::testing::Say;

void SayStatus(const std::string& key, const absl::Status& status) {
  Say(key, hrx::testing::StatusText(status));
}

void WaitForFile(const std::string& path) {
  struct stat info {};
  while (stat(path.c_str(), &info) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// Loads add_f32 from `kernel_code` and adds `value` to the first `count`
// floats of `floats`; says "load" when the kernel is refused, else
// "dispatch". False when the kernel could not be loaded.
bool AddF32(hrx::Stream& stream, const std::string& kernel_code,
            const hrx::View& floats, uint32_t count, float value) {
  auto kernel = stream.LoadKernel(
      std::vector<uint8_t>(kernel_code.begin(), kernel_code.end()), "add_f32");
  if (!kernel.ok()) return SayStatus("load", kernel.status()), false;
  hrx::Constants constants;
  (void)constants.Push(count);
  (void)constants.Push(value);
  SayStatus("dispatch", stream.Dispatch(*kernel, {(count + 255) / 256, 1, 1},
                                        {256, 1, 1}, constants, {&floats, 1}));
  return true;
}

int Scenario(const std::string& name, hrx::Client& client, int argc,
             char** argv, const std::string& kernel_code) {
  auto device = client.OpenDevice(0);
  if (!device.ok()) {
    SayStatus("device", device.status());
    return 1;
  }
  if (name == "observer") {
    auto stream = device->CreateStream();
    SayStatus("create_stream", stream.status());
    return 0;
  }
  auto stream = device->CreateStream();
  if (!stream.ok()) {
    SayStatus("create_stream", stream.status());
    return name == "budget" ? 0 : 1;
  }
  if (name == "budget") {
    // Allocate --chunk bytes at a time until refused.
    const uint64_t chunk = Number(argc, argv, "chunk", 262144);
    std::vector<hrx::Buffer> held;
    while (held.size() < 1000) {
      auto buffer = stream->Allocate(chunk);
      if (!buffer.ok()) {
        Say("allocated", absl::StrCat(held.size()));
        SayStatus("refused", buffer.status());
        return 0;
      }
      held.push_back(*std::move(buffer));
    }
    Say("allocated", "1000 (never refused)");
    return 0;
  }
  if (name == "budget_edge") {
    // Exactly --bytes (the whole budget) fits, its bytes come back intact,
    // and one byte more is refused.
    const uint64_t bytes = Number(argc, argv, "bytes", 0);
    auto whole = stream->Allocate(bytes);
    SayStatus("exact", whole.status());
    if (!whole.ok()) return 1;
    SayStatus("one_more", stream->Allocate(1).status());
    const auto pattern =
        static_cast<uint8_t>(Number(argc, argv, "pattern", 0x5a));
    SayStatus("fill", stream->Fill(whole->Binding(), pattern));
    std::vector<uint8_t> back(bytes);
    const absl::Status read = stream->ReadBlocking(whole->Binding(), back);
    SayStatus("read", read);
    bool intact = read.ok();
    for (size_t i = 0; intact && i < back.size(); ++i) {
      intact = back[i] == pattern;
    }
    Say("intact", intact ? "yes" : "no");
    return 0;
  }
  if (name == "held_charge") {
    // A gate kernel holds this stream's queue; a fill behind it uses a buffer
    // that is then freed. Its reservation must stay until the fill has run.
    const uint64_t bytes = Number(argc, argv, "bytes", 0);
    auto gate_kernel = stream->LoadKernel(
        std::vector<uint8_t>(kernel_code.begin(), kernel_code.end()),
        "wait_flag");
    if (!gate_kernel.ok()) return SayStatus("load", gate_kernel.status()), 1;
    auto flag = stream->AllocateZeroed(1);
    auto big = stream->Allocate(bytes - 1);
    if (!flag.ok() || !big.ok()) return Say("allocate", "failed"), 1;
    const hrx::View flag_view = flag->Binding();
    if (!stream
             ->Dispatch(*gate_kernel, {1, 1, 1}, {1, 1, 1}, hrx::Constants(),
                        {&flag_view, 1})
             .ok() ||
        !stream->Fill(big->Binding(), 7).ok() || !stream->Flush().ok()) {
      return Say("enqueue", "failed"), 1;
    }
    SayStatus("free_big", big->Free());
    SayStatus("allocate_while_queued", stream->Allocate(1).status());
    // Open the gate from another stream, on another queue.
    auto opener = device->CreateStream();
    if (!opener.ok()) return SayStatus("opener", opener.status()), 1;
    SayStatus("open_gate", opener->Fill(flag_view, 1));
    SayStatus("opener_sync", opener->Synchronize());
    SayStatus("sync", stream->Synchronize());
    SayStatus("allocate_after_completion", stream->Allocate(1).status());
    return 0;
  }
  if (name == "hold") {
    // Queue lots of work, say so, then wait to be killed.
    auto buffer = stream->Allocate(Number(argc, argv, "bytes", 8 << 20));
    if (!buffer.ok()) return SayStatus("allocate", buffer.status()), 1;
    for (int i = 0; i < 200; ++i) (void)stream->Fill(buffer->Binding(), i);
    (void)stream->Flush();
    Say("ready", "yes");
    // Syncs now and then, and says once how the stream ended (an
    // eviction, say).
    absl::Status synced;
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!synced.ok()) continue;
      synced = stream->Synchronize();
      if (!synced.ok()) SayStatus("held_sync", synced);
    }
  }
  if (name == "stuck_uploads" || name == "fault" || name == "hog") {
    // A gate kernel holds the queues of --streams streams (all of this
    // tenant's); then each stream gets an inline upload past the daemon's
    // staging bound (its batch is suspended, not a thread), or, for "fault",
    // a kernel that fails; "hog" just keeps the gate closed.
    auto gate = stream->LoadKernel(
        std::vector<uint8_t>(kernel_code.begin(), kernel_code.end()),
        "wait_flag");
    if (!gate.ok()) return SayStatus("load", gate.status()), 1;
    auto flag = stream->AllocateZeroed(1);
    if (!flag.ok()) return SayStatus("allocate", flag.status()), 1;
    const hrx::View flag_view = flag->Binding();
    if (name == "fault") {
      auto empty = flag->Slice(0, 0);
      SayStatus("dispatch", stream->Dispatch(*gate, {1, 1, 1}, {1, 1, 1},
                                             hrx::Constants(), {&*empty, 1}));
      SayStatus("fault_sync", stream->Synchronize());
      return 0;
    }
    const uint64_t streams = Number(argc, argv, "streams", 4);
    const uint64_t bytes = Number(argc, argv, "bytes", 72 << 20);
    std::vector<hrx::Stream> held;
    std::vector<hrx::Buffer> targets;
    for (uint64_t i = 0; i < streams; ++i) {
      auto more = device->CreateStream();
      if (!more.ok()) return SayStatus("stream", more.status()), 1;
      held.push_back(*std::move(more));
      auto target = held.back().Allocate(bytes);
      if (!target.ok()) return SayStatus("allocate", target.status()), 1;
      targets.push_back(*std::move(target));
      if (!held.back()
               .Dispatch(*gate, {1, 1, 1}, {1, 1, 1}, hrx::Constants(),
                         {&flag_view, 1})
               .ok() ||
          !held.back().Flush().ok()) {
        return Say("gate", "failed"), 1;
      }
    }
    std::vector<absl::Status> results(name == "hog" ? 0 : streams);
    const std::vector<uint8_t> payload(bytes, 0x5c);
    std::vector<std::thread> uploads;
    // Every return joins them first: they write `results` and read
    // `payload` (declared before, so destroyed after).
    absl::Cleanup join_uploads = [&uploads] {
      for (auto& thread : uploads) thread.join();
    };
    for (uint64_t i = 0; i < results.size(); ++i) {
      uploads.emplace_back([&, i] {
        results[i] = held[i].Upload(targets[i].Binding(), payload);
        if (results[i].ok()) results[i] = held[i].Flush();
      });
    }
    Say("uploads_started", absl::StrCat(uploads.size()));
    WaitForFile(Flag(argc, argv, "go"));
    // Open the gate from a stream on a queue nobody waits on (queues are
    // assigned round-robin: this one follows the gated ones; --streams
    // stays below the pool's 8 queues).
    auto opener = device->CreateStream();
    if (!opener.ok()) return SayStatus("opener", opener.status()), 1;
    SayStatus("open_gate", opener->Fill(flag_view, 1));
    SayStatus("opener_sync", opener->Synchronize());
    std::move(join_uploads).Invoke();
    bool intact = true;
    for (uint64_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok()) SayStatus(absl::StrCat("upload_", i), results[i]);
      std::vector<uint8_t> tail(4096);
      auto view = targets[i].Slice(bytes - 4096, 4096);
      intact = intact && results[i].ok() &&
               held[i].ReadBlocking(*view, tail).ok() &&
               tail == std::vector<uint8_t>(4096, 0x5c);
    }
    Say("uploads_intact", intact ? "yes" : "no");
    return 0;
  }
  if (name == "grant") {
    // Share a buffer with --grantee, then wait for --go (a file).
    auto buffer = stream->Allocate(4096);
    if (!buffer.ok()) return SayStatus("allocate", buffer.status()), 1;
    (void)stream->Fill(buffer->Binding(), 0x6b);
    SayStatus("sync", stream->Synchronize());
    auto grant = buffer->GrantToTenant(Flag(argc, argv, "grantee"));
    if (!grant.ok()) return SayStatus("grant", grant.status()), 1;
    Say("grant", absl::StrFormat("%016x", *grant));
    WaitForFile(Flag(argc, argv, "go"));
    SayStatus("free", buffer->Free());
    return 0;
  }
  if (name == "import") {
    auto imported = stream->Import(Number(argc, argv, "grant", 0));
    if (!imported.ok()) return SayStatus("import", imported.status()), 0;
    std::vector<uint8_t> bytes(imported->bytes());
    SayStatus("read", stream->ReadBlocking(imported->Binding(), bytes));
    Say("first_byte", absl::StrCat(bytes.empty() ? -1 : int{bytes[0]}));
    WaitForFile(Flag(argc, argv, "go"));
    return 0;
  }
  if (name == "share_mapped") {
    // Write through a mapping, grant, wait; then check the grantee's device
    // fill shows through the same mapping.
    auto buffer = stream->AllocateShared(Number(argc, argv, "bytes", 65536));
    if (!buffer.ok()) return SayStatus("allocate", buffer.status()), 1;
    auto mapping = buffer->Map();
    if (!mapping.ok()) return SayStatus("map", mapping.status()), 1;
    for (size_t i = 0; i < mapping->size(); ++i) {
      mapping->bytes()[i] = static_cast<uint8_t>(i * 7 + 1);
    }
    auto grant = buffer->GrantToTenant(Flag(argc, argv, "grantee"));
    if (!grant.ok()) return SayStatus("grant", grant.status()), 1;
    Say("grant", absl::StrFormat("%016x", *grant));
    WaitForFile(Flag(argc, argv, "go"));
    // The grantee filled [0, 4096) with 0xee on the device and synchronized.
    bool filled = true;
    for (size_t i = 0; i < 4096; ++i)
      filled = filled && mapping->bytes()[i] == 0xee;
    Say("owner_sees_fill", filled ? "yes" : "no");
    Say("owner_tail_intact",
        mapping->bytes()[mapping->size() - 1] ==
                static_cast<uint8_t>((mapping->size() - 1) * 7 + 1)
            ? "yes"
            : "no");
    return 0;
  }
  if (name == "import_mapped") {
    auto imported = stream->Import(Number(argc, argv, "grant", 0));
    if (!imported.ok()) return SayStatus("import", imported.status()), 1;
    auto mapping = imported->Map();
    if (!mapping.ok()) return SayStatus("map", mapping.status()), 1;
    bool same = true;
    for (size_t i = 0; i < mapping->size(); ++i) {
      same = same && mapping->bytes()[i] == static_cast<uint8_t>(i * 7 + 1);
    }
    Say("grantee_sees_owner_bytes", same ? "yes" : "no");
    auto head = imported->Slice(0, 4096);
    SayStatus("fill", stream->Fill(*head, 0xee));
    SayStatus("sync", stream->Synchronize());
    Say("grantee_sees_fill",
        mapping->bytes()[0] == 0xee && mapping->bytes()[4095] == 0xee ? "yes"
                                                                      : "no");
    return 0;
  }
  if (name == "share_floats") {
    // --count floats 0, 1, 2, ... written through a mapping of a shared
    // buffer, granted to --grantee; after --go (the grantee's kernel added
    // 2.5), this tenant's kernel adds 1 and the bytes are checked from the
    // mapping and from a device read.
    const uint32_t count =
        static_cast<uint32_t>(Number(argc, argv, "count", 0));
    auto buffer = stream->AllocateShared(uint64_t{count} * sizeof(float));
    if (!buffer.ok()) return SayStatus("allocate", buffer.status()), 1;
    auto mapping = buffer->Map();
    if (!mapping.ok()) return SayStatus("map", mapping.status()), 1;
    auto floats = mapping->As<float>();
    if (!floats.ok()) return SayStatus("map", floats.status()), 1;
    for (uint32_t i = 0; i < count; ++i) (*floats)[i] = static_cast<float>(i);
    auto grant = buffer->GrantToTenant(Flag(argc, argv, "grantee"));
    if (!grant.ok()) return SayStatus("grant", grant.status()), 1;
    Say("grant", absl::StrFormat("%016x", *grant));
    WaitForFile(Flag(argc, argv, "go"));
    bool added = true;
    for (uint32_t i = 0; i < count; ++i) {
      added = added && (*floats)[i] == static_cast<float>(i) + 2.5f;
    }
    Say("owner_sees_grantee_kernel", added ? "yes" : "no");
    const hrx::View all = buffer->Binding();
    if (!AddF32(*stream, kernel_code, all, count, 1.0f)) return 1;
    std::vector<uint8_t> read(uint64_t{count} * sizeof(float));
    SayStatus("read", stream->ReadBlocking(all, read));
    bool both = true;
    for (uint32_t i = 0; i < count; ++i) {
      float value;
      std::memcpy(&value, read.data() + uint64_t{i} * sizeof(float),
                  sizeof(float));
      both = both && value == static_cast<float>(i) + 3.5f &&
             (*floats)[i] == value;
    }
    Say("owner_kernel_sees_both", both ? "yes" : "no");
    return 0;
  }
  if (name == "import_add") {
    // Imports --grant and adds 2.5 to its --count floats with this tenant's
    // own kernel.
    const uint32_t count =
        static_cast<uint32_t>(Number(argc, argv, "count", 0));
    auto imported = stream->Import(Number(argc, argv, "grant", 0));
    if (!imported.ok()) return SayStatus("import", imported.status()), 1;
    if (!AddF32(*stream, kernel_code, imported->Binding(), count, 2.5f)) {
      return 1;
    }
    SayStatus("sync", stream->Synchronize());
    return 0;
  }
  Say("error", "unknown scenario " + name);
  return 2;
}

// Calls the daemon with a session handle this process did not open.
int StealSession(const std::string& socket, const std::string& session) {
  auto stub =
      hrx::v1::Buffers::NewStub(hrx::client::internal::MakeChannel(socket));
  grpc::ClientContext context;
  context.AddMetadata(hrx::shared::kSessionMetadataKey, session);
  hrx::v1::AllocateRequest request;
  request.set_bytes(16);
  hrx::v1::AllocateResponse response;
  SayStatus("allocate_with_stolen_session",
            hrx::client::internal::CallStatus(
                stub->Allocate(&context, request, &response), socket));
  return 0;
}

// Redeems a ticket another process exported.
int Redeem(const std::string& fd_socket, const std::string& hex_ticket) {
  std::string ticket;
  for (size_t i = 0; i + 1 < hex_ticket.size(); i += 2) {
    ticket.push_back(
        static_cast<char>(std::stoi(hex_ticket.substr(i, 2), nullptr, 16)));
  }
  auto fd = hrx::client::internal::RedeemTicket(fd_socket, ticket);
  SayStatus("redeem", fd.status());
  return 0;
}

int AdminSetBudget(const std::string& socket) {
  auto stub =
      hrx::v1::Admin::NewStub(hrx::client::internal::MakeChannel(socket));
  grpc::ClientContext context;
  hrx::v1::SetBudgetRequest request;
  request.set_tenant("alpha");
  hrx::v1::SetBudgetResponse response;
  SayStatus("set_budget",
            hrx::client::internal::CallStatus(
                stub->SetBudget(&context, request, &response), socket));
  return 0;
}

// Admin calls on socket-bound tenants, as whoever this process is on
// whichever socket it was given: --action=create|remove|label, --name.
int AdminBound(const std::string& socket, const std::string& action,
               const std::string& name) {
  auto stub =
      hrx::v1::Admin::NewStub(hrx::client::internal::MakeChannel(socket));
  grpc::ClientContext context;
  grpc::Status status;
  if (action == "create") {
    hrx::v1::CreateBoundTenantRequest request;
    request.set_name(name);
    hrx::v1::CreateBoundTenantResponse response;
    status = stub->CreateBoundTenant(&context, request, &response);
  } else if (action == "remove") {
    hrx::v1::RemoveBoundTenantRequest request;
    request.set_name(name);
    hrx::v1::RemoveBoundTenantResponse response;
    status = stub->RemoveBoundTenant(&context, request, &response);
  } else {
    hrx::v1::SetBoundTenantLabelsRequest request;
    request.set_name(name);
    (*request.mutable_labels())["hrx.dev/pod"] = "forged/pod";
    hrx::v1::SetBoundTenantLabelsResponse response;
    status = stub->SetBoundTenantLabels(&context, request, &response);
  }
  SayStatus(action, hrx::client::internal::CallStatus(status, socket));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string socket = Flag(argc, argv, "socket");
  const std::string scenario = Flag(argc, argv, "scenario");
  const std::string kernel_path = Flag(argc, argv, "kernel");
  const std::string kernel_code =
      kernel_path.empty() ? std::string() : ReadFile(kernel_path);
  const uid_t uid = static_cast<uid_t>(Number(argc, argv, "uid", 0));
  const gid_t gid = static_cast<gid_t>(Number(argc, argv, "gid", uid));
  if (uid != 0 &&
      (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0)) {
    Say("error", "cannot switch to the requested uid (run as root)");
    return 2;
  }
  if (scenario == "steal_session") {
    return StealSession(socket, Flag(argc, argv, "session"));
  }
  if (scenario == "admin_set_budget") return AdminSetBudget(socket);
  if (scenario == "admin_bound") {
    return AdminBound(socket, Flag(argc, argv, "action"),
                      Flag(argc, argv, "name"));
  }
  if (scenario == "redeem") {
    return Redeem(Flag(argc, argv, "fd_socket"), Flag(argc, argv, "ticket"));
  }
  auto client = hrx::Client::Connect(socket, "tenant_client " + scenario);
  if (!client.ok()) {
    SayStatus("connect", client.status());
    return 1;
  }
  Say("session", absl::StrFormat("%016x", (*client)->session().session));
  return Scenario(scenario, **client, argc, argv, kernel_code);
}
