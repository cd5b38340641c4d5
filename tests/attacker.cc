// A hostile client for the adversarial suite (hostile_test.cc): switches to
// --uid, runs one attack through the raw protocol (no libhrx checks in the
// way), prints what happened as "key: value" lines, then holds everything
// it took until --hold names a file that exists (or until it is killed).
//
//   attacker --socket=PATH --uid=N --attack=NAME [--count=N] [--hold=FILE]
#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/internal/connection.h"
#include "client/internal/fd_channel.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "hrx/v1/buffer.grpc.pb.h"
#include "hrx/v1/kernel.grpc.pb.h"
#include "hrx/v1/session.grpc.pb.h"
#include "hrx/v1/stream.grpc.pb.h"
#include "shared/grpc_status.h"
#include "shared/socket_path.h"
#include "shared/unique_fd.h"
#include "tests/program_io.h"
#include "tests/raw_session.h"

namespace {

using hrx::testing::Flag;
using hrx::testing::Number;
using hrx::testing::RawSession;
using hrx::testing::Say;
using hrx::testing::StatusText;

void Hold(const std::string& file) {
  Say("holding", "yes");
  struct stat info {};
  while (file.empty() || stat(file.c_str(), &info) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A channel of its own (not shared with other channels of this process), so
// each RawSession is its own connection.
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& socket) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  arguments.SetMaxReceiveMessageSize(64 << 20);
  arguments.SetMaxSendMessageSize(64 << 20);
  return grpc::CreateCustomChannel(absl::StrCat("unix:", socket),
                                   grpc::InsecureChannelCredentials(),
                                   arguments);
}

absl::Status RawCall(const std::shared_ptr<grpc::Channel>& channel,
                     const std::string& method, const std::string& session,
                     const std::string& bytes) {
  grpc::ClientContext context;
  context.AddMetadata(hrx::shared::kSessionMetadataKey, session);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  return hrx::shared::FromGrpcStatus(
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(),
          grpc::internal::RpcMethod(method.c_str(),
                                    grpc::internal::RpcMethod::NORMAL_RPC),
          &context, request, &response));
}

// Sessions (and so connections) an attack holds until the hold file exists.
std::vector<std::unique_ptr<RawSession>>& Held() {
  static auto* held = new std::vector<std::unique_ptr<RawSession>>();
  return *held;
}
RawSession& Keep(const std::string& socket) {
  Held().push_back(std::make_unique<RawSession>(socket));
  return *Held().back();
}

std::string SessionText(const RawSession& raw) {
  return hrx::shared::FormatWireHandle(
      hrx::client::internal::FromProto(raw.session));
}

// Opens up to --count sessions, each on its own connection.
int Sessions(const std::string& socket, uint64_t count) {
  std::vector<std::unique_ptr<RawSession>> held;
  absl::Status refused;
  for (uint64_t i = 0; i < count; ++i) {
    auto raw = std::make_unique<RawSession>(socket);
    if (!raw->open_status.ok()) {
      refused = raw->open_status;
      break;
    }
    held.push_back(std::move(raw));
  }
  Say("opened", absl::StrCat(held.size()));
  for (auto& session : held) Held().push_back(std::move(session));
  Say("refusal", StatusText(refused));
  return 0;
}

// Bare connections that never say a word.
int Connections(const std::string& socket, uint64_t count) {
  std::vector<int> fds;
  for (uint64_t i = 0; i < count; ++i) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s",
                  socket.c_str());
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address),
                          sizeof(address)) != 0) {
      break;
    }
    fds.push_back(fd);
  }
  Say("connected", absl::StrCat(fds.size()));
  // One more, as libhrx makes it: the refusal it reports must say why.
  auto past = hrx::client::internal::Connection::Open(
      socket, "past-limit", absl::Seconds(10), hrx::Transport::kGrpc);
  Say("past_limit", StatusText(past.status()));
  return 0;
}

// Takes objects of one kind until refused.
int Objects(const std::string& socket, const std::string& kind,
            uint64_t count) {
  RawSession& raw = Keep(socket);
  if (!raw.open_status.ok()) return Say("open", StatusText(raw.open_status)), 1;
  auto buffer = raw.Allocate(1);
  uint64_t taken = 0;
  absl::Status refused;
  for (; taken < count && refused.ok(); ++taken) {
    if (kind == "buffers") {
      refused = raw.Allocate(1).status();
    } else if (kind == "streams") {
      refused = raw.CreateStream().status();
    } else if (kind == "grants") {
      if (!buffer.ok()) return Say("allocate", StatusText(buffer.status())), 1;
      auto context = raw.Context();
      hrx::v1::GrantRequest request;
      *request.mutable_buffer() = *buffer;
      request.set_tenant("mallory");
      hrx::v1::GrantResponse response;
      refused = hrx::shared::FromGrpcStatus(
          raw.buffers->Grant(context.get(), request, &response));
    } else if (kind == "events") {
      static auto stream = raw.CreateStream();
      if (!stream.ok()) return Say("stream", StatusText(stream.status())), 1;
      hrx::v1::SubmitRequest request;
      *request.mutable_stream() = *stream;
      request.add_commands()->mutable_record_event()->set_event(taken + 1);
      refused = raw.Submit(request);
    } else if (kind == "exports") {
      if (!buffer.ok()) return Say("allocate", StatusText(buffer.status())), 1;
      auto context = raw.Context();
      hrx::v1::ExportRequest request;
      *request.mutable_buffer() = *buffer;
      request.set_kind(hrx::v1::HANDLE_KIND_SHM);
      hrx::v1::ExportResponse response;
      refused = hrx::shared::FromGrpcStatus(
          raw.buffers->Export(context.get(), request, &response));
    }
  }
  Say("taken", absl::StrCat(refused.ok() ? taken : taken - 1));
  Say("refusal", StatusText(refused));
  return 0;
}

// Loads `code` (read from --kernel while still root); prints the answer.
int LoadKernel(const std::string& socket, const std::string& code) {
  RawSession& raw = Keep(socket);
  if (!raw.open_status.ok()) return Say("open", StatusText(raw.open_status)), 1;
  hrx::v1::LoadKernelRequest request;
  request.set_code(code);
  request.set_entry("wait_flag");
  auto kernels = hrx::v1::Kernels::NewStub(raw.channel);
  auto context = raw.Context();
  hrx::v1::LoadKernelResponse response;
  Say("load_kernel", StatusText(hrx::shared::FromGrpcStatus(kernels->LoadKernel(
                         context.get(), request, &response))));
  return 0;
}

// Side-channel connections that drip one byte every 500 ms.
int Drip(const std::string& fd_socket, uint64_t count,
         const std::string& hold) {
  std::vector<int> fds;
  for (uint64_t i = 0; i < count; ++i) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s",
                  fd_socket.c_str());
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) ==
        0) {
      fds.push_back(fd);
    } else {
      close(fd);
    }
  }
  Say("dripping", absl::StrCat(fds.size()));
  struct stat info {};
  while (stat(hold.c_str(), &info) != 0) {
    for (int fd : fds) (void)!send(fd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return 0;
}

// One Submit of --count empty commands (2 bytes each on the wire).
int BigBatch(const std::string& socket, uint64_t count) {
  RawSession& raw = Keep(socket);
  if (!raw.open_status.ok()) return Say("open", StatusText(raw.open_status)), 1;
  auto stream = raw.CreateStream();
  if (!stream.ok()) return Say("stream", StatusText(stream.status())), 1;
  hrx::v1::SubmitRequest head;
  *head.mutable_stream() = *stream;
  std::string bytes = head.SerializeAsString();
  bytes.reserve(bytes.size() + 2 * count);
  for (uint64_t i = 0; i < count; ++i) bytes.append("\x12\x00", 2);
  Say("request_bytes", absl::StrCat(bytes.size()));
  Say("submit", StatusText(RawCall(raw.channel, "/hrx.v1.Streams/Submit",
                                   SessionText(raw), bytes)));
  return 0;
}

// On each of --calls Streams.Open calls, asks for --count reads of 8 MiB
// and never reads a reply.
int UnreadReplies(const std::string& socket, uint64_t calls, uint64_t count) {
  RawSession& raw = Keep(socket);
  if (!raw.open_status.ok()) return Say("open", StatusText(raw.open_status)), 1;
  auto buffer = raw.Allocate(8 << 20);
  if (!buffer.ok()) return Say("allocate", StatusText(buffer.status())), 1;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<
      grpc::ClientReaderWriter<hrx::v1::StreamRequest, hrx::v1::StreamReply>>>
      open_calls;
  uint64_t wrote = 0;
  for (uint64_t c = 0; c < calls; ++c) {
    contexts.push_back(raw.Context());
    open_calls.push_back(raw.streams->Open(contexts.back().get()));
    auto& call = *open_calls.back();
    hrx::v1::StreamRequest open;
    open.mutable_open();
    call.Write(open);
    for (uint64_t i = 0; i < count; ++i) {
      hrx::v1::StreamRequest read;
      read.set_token(i + 1);
      *read.mutable_read()->mutable_buffer() = *buffer;
      read.mutable_read()->set_length(8 << 20);
      if (!call.Write(read)) break;
      ++wrote;
    }
  }
  Say("wrote", absl::StrCat(wrote));
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Forged, foreign, stale and overflowing handles; counts each answer.
int Forge(const std::string& socket, uint64_t count) {
  RawSession mine(socket);
  RawSession other(socket);
  if (!mine.open_status.ok() || !other.open_status.ok()) return 1;
  std::map<std::string, int> answers;
  auto tally = [&](const std::string& what, const absl::Status& status) {
    const std::string message(status.message());
    answers[what + ":" + message.substr(0, message.find(':'))]++;
  };
  auto stream = *mine.CreateStream();
  const hrx::v1::Handle genuine = *mine.Allocate(16);
  std::mt19937_64 random(7);
  for (uint64_t i = 0; i < count; ++i) {
    hrx::v1::Handle forged = genuine;
    forged.set_tag(random());
    tally("forged",
          mine.Submit(hrx::testing::FillRequest(stream, forged, 0, 16, 1)));
  }
  const hrx::v1::Handle foreign = *other.Allocate(16);
  tally("foreign",
        mine.Submit(hrx::testing::FillRequest(stream, foreign, 0, 16, 1)));
  const hrx::v1::Handle stale = *mine.Allocate(16);
  {
    auto context = mine.Context();
    hrx::v1::FreeRequest request;
    *request.mutable_buffer() = stale;
    hrx::v1::FreeResponse response;
    (void)mine.buffers->Free(context.get(), request, &response);
  }
  tally("stale",
        mine.Submit(hrx::testing::FillRequest(stream, stale, 0, 16, 1)));
  const hrx::v1::Handle live = *mine.Allocate(4096);
  tally("overflow", mine.Submit(hrx::testing::FillRequest(
                        stream, live, ~uint64_t{0} - 7, 16, 1)));
  for (const auto& [answer, n] : answers) Say(answer, absl::StrCat(n));
  return 0;
}

// Opens a session with a client name carrying terminal control bytes.
int EvilName(const std::string& socket) {
  auto sessions = hrx::v1::Sessions::NewStub(OwnChannel(socket));
  grpc::ClientContext context;
  hrx::v1::OpenSessionRequest request;
  request.set_client_name("x\x1b[2J\r\nforged-row\x07");
  hrx::v1::OpenSessionResponse response;
  Say("open", StatusText(hrx::shared::FromGrpcStatus(
                  sessions->OpenSession(&context, request, &response))));
  return 0;
}

// Imports --grant (an observer must be refused).
int Import(const std::string& socket, uint64_t grant) {
  RawSession& raw = Keep(socket);
  if (!raw.open_status.ok()) return Say("open", StatusText(raw.open_status)), 1;
  auto context = raw.Context();
  hrx::v1::ImportRequest request;
  request.set_grant(grant);
  hrx::v1::ImportResponse response;
  Say("import", StatusText(hrx::shared::FromGrpcStatus(
                    raw.buffers->Import(context.get(), request, &response))));
  return 0;
}

// A shared buffer of `bytes`, exported as shm and redeemed on the side
// channel; nullopt (having said what failed) when any step is refused.
struct Redeemed {
  hrx::v1::ExportResponse exported;
  hrx::shared::UniqueFd fd;
};
std::optional<Redeemed> AllocateAndRedeem(RawSession& raw, uint64_t bytes) {
  if (!raw.open_status.ok())
    return Say("open", StatusText(raw.open_status)), std::nullopt;
  auto buffer = raw.Allocate(bytes, hrx::v1::PLACEMENT_SHARED);
  if (!buffer.ok())
    return Say("allocate", StatusText(buffer.status())), std::nullopt;
  Redeemed redeemed;
  auto context = raw.Context();
  hrx::v1::ExportRequest request;
  *request.mutable_buffer() = *buffer;
  request.set_kind(hrx::v1::HANDLE_KIND_SHM);
  const absl::Status status = hrx::shared::FromGrpcStatus(
      raw.buffers->Export(context.get(), request, &redeemed.exported));
  if (!status.ok()) return Say("export", StatusText(status)), std::nullopt;
  auto fd = hrx::client::internal::RedeemTicket(redeemed.exported.fd_socket(),
                                                redeemed.exported.ticket());
  if (!fd.ok()) return Say("redeem", StatusText(fd.status())), std::nullopt;
  redeemed.fd = *std::move(fd);
  return redeemed;
}

absl::Status ReleaseExport(RawSession& raw, uint64_t export_id) {
  auto context = raw.Context();
  hrx::v1::ReleaseExportRequest request;
  request.set_export_id(export_id);
  hrx::v1::ReleaseExportResponse response;
  return hrx::shared::FromGrpcStatus(
      raw.buffers->ReleaseExport(context.get(), request, &response));
}

// Maps a shared buffer through the side channel, then closes its session
// and keeps the mapping (the memory stays charged while this process lives).
int KeepMapping(const std::string& socket, uint64_t bytes) {
  RawSession& raw = Keep(socket);
  auto redeemed = AllocateAndRedeem(raw, bytes);
  if (!redeemed) return 1;
  const hrx::v1::ExportResponse& exported = redeemed->exported;
  void* mapped =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
           redeemed->fd.get(), static_cast<off_t>(exported.offset()));
  if (mapped == MAP_FAILED) return Say("map", "failed"), 1;
  static_cast<volatile uint8_t*>(mapped)[0] = 1;
  auto context = raw.Context();
  hrx::v1::CloseSessionResponse closed;
  Say("close",
      StatusText(hrx::shared::FromGrpcStatus(raw.sessions->CloseSession(
          context.get(), hrx::v1::CloseSessionRequest(), &closed))));
  return 0;  // holds the mapping (and the descriptor) until released
}

// Maps a shared buffer, tells the daemon it released the mapping (a lie),
// forks a child that keeps the descriptor and the mapping until the hold
// file exists, and exits: the redeeming process and its session are gone,
// the pages are not.
int ForkHolder(const std::string& socket, uint64_t bytes,
               const std::string& hold) {
  RawSession& raw = Keep(socket);
  auto redeemed = AllocateAndRedeem(raw, bytes);
  if (!redeemed) return 1;
  const hrx::v1::ExportResponse& exported = redeemed->exported;
  void* mapped =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
           redeemed->fd.get(), static_cast<off_t>(exported.offset()));
  if (mapped == MAP_FAILED) return Say("map", "failed"), 1;
  Say("release", StatusText(ReleaseExport(raw, exported.export_id())));
  const pid_t child = fork();
  if (child == 0) {
    static_cast<volatile uint8_t*>(mapped)[0] = 7;  // still writable
    struct stat info {};
    while (stat(hold.c_str(), &info) != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    _exit(0);
  }
  Say("child", absl::StrCat(child));
  _exit(0);  // the redeeming process is gone at once
}

// Keeps only an O_PATH reference to a redeemed descriptor, releases
// everything, then tries to reopen the file for writing through /proc.
int OpathHolder(const std::string& socket, uint64_t bytes) {
  RawSession& raw = Keep(socket);
  auto redeemed = AllocateAndRedeem(raw, bytes);
  if (!redeemed) return 1;
  const hrx::v1::ExportResponse& exported = redeemed->exported;
  const int path_only =
      open(absl::StrCat("/proc/self/fd/", redeemed->fd.get()).c_str(), O_PATH);
  redeemed->fd.Reset();
  (void)ReleaseExport(raw, exported.export_id());
  const int reopened =
      open(absl::StrCat("/proc/self/fd/", path_only).c_str(), O_RDWR);
  Say("reopen", reopened >= 0 ? "OK" : std::strerror(errno));
  return 0;  // holds the O_PATH reference until released
}

}  // namespace

int main(int argc, char** argv) {
  const std::string socket = Flag(argc, argv, "socket");
  const std::string attack = Flag(argc, argv, "attack");
  const std::string hold = Flag(argc, argv, "hold");
  const uint64_t count = Number(argc, argv, "count", 100);
  const uid_t uid = static_cast<uid_t>(Number(argc, argv, "uid", 0));
  std::ifstream kernel(Flag(argc, argv, "kernel"), std::ios::binary);
  const std::string kernel_code((std::istreambuf_iterator<char>(kernel)),
                                std::istreambuf_iterator<char>());
  if (uid != 0 &&
      (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0)) {
    Say("error", "cannot switch to the requested uid (run as root)");
    return 2;
  }
  int code = 2;
  if (attack == "sessions") code = Sessions(socket, count);
  if (attack == "connections") code = Connections(socket, count);
  if (attack == "buffers" || attack == "streams" || attack == "exports" ||
      attack == "events" || attack == "grants") {
    code = Objects(socket, attack, count);
  }
  if (attack == "kernel") code = LoadKernel(socket, kernel_code);
  if (attack == "drip") return Drip(socket + ".fds", count, hold);
  if (attack == "big_batch") code = BigBatch(socket, count);
  if (attack == "unread_replies") {
    code = UnreadReplies(socket, Number(argc, argv, "calls", 1), count);
  }
  if (attack == "forge") code = Forge(socket, count);
  if (attack == "evil_name") code = EvilName(socket);
  if (attack == "import") code = Import(socket, Number(argc, argv, "grant", 0));
  if (attack == "keep_mapping") code = KeepMapping(socket, count);
  if (attack == "fork_holder") return ForkHolder(socket, count, hold);
  if (attack == "opath_holder") code = OpathHolder(socket, count);
  if (code == 2) Say("error", "unknown attack " + attack);
  if (code == 0 && !hold.empty()) Hold(hold);
  return code;
}
