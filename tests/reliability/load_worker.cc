// A load client for the reliability tests. It connects with libhrx (after
// switching to --uid), then runs a deterministic mix of commands (its PRNG is
// seeded with --seed) on two streams of one session, and checks every byte
// it reads back against a model of every buffer that it keeps on the host:
//
//   fill, copy, upload (inline and through the shared staging region),
//   ReadBlocking, queued Read + Readback::Wait, a write_pattern dispatch
//   (with --kernel), a graph replay (fill, copy, dispatch, join), events
//   recorded on one stream and waited on by the other (both directions),
//   freeing and reallocating buffers, synchronizing.
//
// With --share, two workers of one tenant share buffers: every --share_every
// operations the owner allocates a shared buffer, writes a pattern through
// its mapping and grants it to the tenant; the importer imports and maps it,
// checks the pattern through its mapping and the device, fills and uploads
// on the device; the owner then checks those bytes through its own mapping
// and the device. They meet through files in --pair_dir.
//
//   load_worker --socket=PATH --seed=N [--uid=N] [--kernel=PATH]
//               (--ops=N | --until=FILE) [--warm=N]
//               [--share=owner|importer --pair_dir=DIR --tenant=NAME
//                --share_every=N]     (--share needs --ops)
//               [--hold_events=true]
//
// Output: "warm: yes" once --warm operations ran; at the end
// "load_worker seed=N commands=N bytes_verified=N shares=N".
// Exit codes: 0 every byte matched; 1 a byte differed from the model (the
// first mismatch is named); 3 a libhrx call failed ("error_code:" and
// "error_reason:" lines name its code and reason token); 4 the share partner
// did not answer within 60 s; 2 bad usage or setup.
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "hrx/client.h"
#include "shared/refusal.h"
#include "tests/program_io.h"

namespace {

using hrx::testing::Flag;
using hrx::testing::Number;
using hrx::testing::Say;

constexpr int kSlots = 6;                       // 0 and 1 are the graph's
constexpr uint64_t kGraphSlotBytes = 64 << 10;  // slots 0 and 1
constexpr uint64_t kMaxPiece = 256 << 10;       // longest fill/copy/read
constexpr size_t kMaxPendingReadbacks = 4;      // queued Reads in flight
constexpr auto kPartnerTimeout = std::chrono::seconds(60);

bool Exists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

// Writes `text` to `path` at once (a reader never sees half of it).
bool WriteAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary);
    out << text;
    if (!out) return false;
  }
  return std::rename(temporary.c_str(), path.c_str()) == 0;
}

// Bytes both share partners compute the same way.
std::vector<uint8_t> PatternBytes(uint64_t seed, uint64_t length) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(length);
  for (uint64_t i = 0; i < length; i += 8) {
    const uint64_t word = rng();
    std::memcpy(bytes.data() + i, &word, std::min<uint64_t>(8, length - i));
  }
  return bytes;
}

struct Slot {
  std::optional<hrx::Buffer> buffer;
  std::vector<uint8_t> model;  // what the device must hold
};

struct PendingRead {
  hrx::Readback readback;
  std::vector<uint8_t> expected;
  std::string what;
};

struct Options {
  std::string socket;
  uint64_t seed = 1;
  uint64_t ops = 1000;
  std::string until;
  uint64_t warm = 0;
  std::string kernel_code;
  std::string share;  // "", "owner" or "importer"
  std::string pair_dir;
  std::string tenant;
  uint64_t share_every = 500;
  bool hold_events = false;
};

class Worker {
 public:
  explicit Worker(Options options)
      : options_(std::move(options)),
        rng_(options_.seed * 0x9e3779b97f4a7c15) {}

  int Run();

 private:
  // --- failures -----------------------------------------------------------
  int Fail(const std::string& what, const absl::Status& status) {
    std::fprintf(stderr, "load_worker seed %lu: %s failed at command %lu: %s\n",
                 static_cast<unsigned long>(options_.seed), what.c_str(),
                 static_cast<unsigned long>(commands_),
                 status.ToString().c_str());
    Say("failed", what);
    Say("error_code", absl::StatusCodeToString(status.code()));
    Say("error_reason", std::string(hrx::ReasonToken(status)));
    Say("error_message", std::string(status.message()));
    return 3;
  }
  // 0 when `got` equals `expected`; else names the first differing byte.
  int Check(const std::string& what, std::span<const uint8_t> got,
            std::span<const uint8_t> expected) {
    if (got.size() != expected.size()) {
      std::fprintf(stderr,
                   "load_worker seed %lu: %s at command %lu: got %zu bytes, "
                   "expected %zu\n",
                   static_cast<unsigned long>(options_.seed), what.c_str(),
                   static_cast<unsigned long>(commands_), got.size(),
                   expected.size());
      Say("mismatch", what);
      return 1;
    }
    const auto [g, e] = std::mismatch(got.begin(), got.end(), expected.begin());
    if (g != got.end()) {
      const size_t at = static_cast<size_t>(g - got.begin());
      std::fprintf(stderr,
                   "load_worker seed %lu: MISMATCH in %s at command %lu: byte "
                   "%zu is 0x%02x, expected 0x%02x\n",
                   static_cast<unsigned long>(options_.seed), what.c_str(),
                   static_cast<unsigned long>(commands_), at, *g, *e);
      Say("mismatch", absl::StrCat(what, " byte ", at));
      return 1;
    }
    bytes_verified_ += got.size();
    return 0;
  }

  // --- randomness ---------------------------------------------------------
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  uint8_t Byte() { return static_cast<uint8_t>(rng_()); }
  // A random non-empty range of at most `max_length` bytes in `size`.
  std::pair<uint64_t, uint64_t> Range(uint64_t size, uint64_t max_length) {
    const uint64_t length = 1 + Below(std::min(size, max_length));
    return {Below(size - length + 1), length};
  }
  std::vector<uint8_t> RandomBytes(uint64_t length) {
    std::vector<uint8_t> bytes(length);
    for (uint64_t i = 0; i < length; i += 8) {
      const uint64_t word = rng_();
      std::memcpy(bytes.data() + i, &word, std::min<uint64_t>(8, length - i));
    }
    return bytes;
  }
  uint64_t RandomSlotBytes() {
    // Mostly up to 256 KiB; one in eight between 1 and 3 MiB (uploads and
    // reads of those go through the shared staging region).
    if (Below(8) == 0) return (1 << 20) + Below(2 << 20);
    return 4096 + Below(252 << 10);
  }

  absl::StatusOr<hrx::View> ViewOf(int slot, uint64_t offset,
                                   uint64_t length) const {
    return slots_[slot].buffer->Slice(offset, length);
  }

  // --- operations (each returns 0 to go on, else the exit code) -----------
  int Setup();
  int OpFill(hrx::Stream& stream, const char* name);
  int OpCopy(hrx::Stream& stream, const char* name);
  int OpUpload(hrx::Stream& stream, uint64_t max_length);
  int OpReadBlocking();
  int OpReadQueued();
  int WaitOldestRead();
  int OpDispatch();
  int OpGraph();
  int OpEvents();
  int OpRealloc();
  int OpSync();
  int Share(uint64_t round);
  int ShareAsOwner(uint64_t round);
  int ShareAsImporter(uint64_t round);
  int VerifyAll(const std::string& when);
  void ApplyPattern(std::vector<uint8_t>& model, uint64_t offset, uint64_t n,
                    uint32_t seed) {
    for (uint64_t i = 0; i < n; ++i)
      model[offset + i] = static_cast<uint8_t>(i * 31 + seed);
  }
  void ApplyGraph();
  int WaitForFile(const std::string& path);

  Options options_;
  std::mt19937_64 rng_;
  std::unique_ptr<hrx::Client> client_;
  std::optional<hrx::Device> device_;
  std::optional<hrx::Stream> a_;  // the main stream
  std::optional<hrx::Stream> b_;  // ordered against a_ only through events
  std::optional<hrx::Kernel> kernel_;
  std::optional<hrx::GraphExec> graph_;
  uint8_t graph_values_[3] = {};
  uint32_t graph_seed_ = 0;
  Slot slots_[kSlots];
  std::deque<PendingRead> pending_;
  // Events whose wait may still sit in a_'s unsent batch: kept until a_ has
  // sent it (see OpEvents).
  std::vector<hrx::Event> held_events_;
  uint64_t commands_ = 0;
  uint64_t bytes_verified_ = 0;
  uint64_t shares_ = 0;
};

int Worker::Setup() {
  auto client = hrx::Client::Connect(
      options_.socket, absl::StrCat("load_worker ", options_.seed));
  if (!client.ok()) return Fail("connect", client.status());
  client_ = *std::move(client);
  auto device = client_->OpenDevice(0);
  if (!device.ok()) return Fail("open device", device.status());
  device_.emplace(*std::move(device));
  for (auto* stream : {&a_, &b_}) {
    auto created = device_->CreateStream();
    if (!created.ok()) return Fail("create stream", created.status());
    stream->emplace(*std::move(created));
  }
  if (!options_.kernel_code.empty()) {
    const std::vector<uint8_t> code(options_.kernel_code.begin(),
                                    options_.kernel_code.end());
    auto kernel = a_->LoadKernel(code, "write_pattern");
    if (!kernel.ok()) return Fail("load kernel", kernel.status());
    kernel_.emplace(*std::move(kernel));
  }
  for (int i = 0; i < kSlots; ++i) {
    const uint64_t bytes = i < 2 ? kGraphSlotBytes : RandomSlotBytes();
    auto buffer = a_->AllocateZeroed(bytes);
    if (!buffer.ok()) return Fail("allocate", buffer.status());
    slots_[i].buffer.emplace(*std::move(buffer));
    slots_[i].model.assign(bytes, 0);
    ++commands_;
  }
  // The graph: fill slot 0's head and, independently, a middle piece of
  // slot 1; copy slot 0's head into slot 1's head after the first fill;
  // write a pattern into slot 0 after the copy (a fill without a kernel);
  // join; fill slot 0's tail.
  hrx::Graph graph = a_->BeginGraph();
  for (uint8_t& value : graph_values_) value = Byte();
  graph_seed_ = static_cast<uint32_t>(rng_());
  auto head = ViewOf(0, 0, 16 << 10);
  auto middle = ViewOf(1, 32 << 10, 16 << 10);
  auto copy_dst = ViewOf(1, 0, 16 << 10);
  auto pattern = ViewOf(0, 16 << 10, 4096);
  auto tail = ViewOf(0, 60 << 10, 4096);
  if (!head.ok() || !middle.ok() || !copy_dst.ok() || !pattern.ok() ||
      !tail.ok()) {
    return Fail("graph views", absl::InternalError("slice"));
  }
  auto n0 = graph.Fill({}, *head, graph_values_[0]);
  auto n1 = graph.Fill({}, *middle, graph_values_[1]);
  if (!n0.ok()) return Fail("graph fill", n0.status());
  if (!n1.ok()) return Fail("graph fill", n1.status());
  const hrx::Node after_n0[] = {*n0};
  auto n2 = graph.Copy(after_n0, *copy_dst, *head);
  if (!n2.ok()) return Fail("graph copy", n2.status());
  const hrx::Node after_n2[] = {*n2};
  absl::StatusOr<hrx::Node> n3;
  if (kernel_) {
    hrx::Constants constants;
    (void)constants.Push(uint64_t{4096});
    (void)constants.Push(graph_seed_);
    n3 = graph.Dispatch(after_n2, *kernel_, {4096 / 64, 1, 1}, {64, 1, 1},
                        constants, {&*pattern, 1});
  } else {
    n3 = graph.Fill(after_n2, *pattern, static_cast<uint8_t>(graph_seed_));
  }
  if (!n3.ok()) return Fail("graph pattern", n3.status());
  const hrx::Node joined[] = {*n1, *n3};
  auto n4 = graph.Join(joined);
  if (!n4.ok()) return Fail("graph join", n4.status());
  const hrx::Node after_n4[] = {*n4};
  auto n5 = graph.Fill(after_n4, *tail, graph_values_[2]);
  if (!n5.ok()) return Fail("graph fill", n5.status());
  auto exec = graph.Finish();
  if (!exec.ok()) return Fail("graph finish", exec.status());
  graph_.emplace(*std::move(exec));
  return 0;
}

void Worker::ApplyGraph() {
  std::vector<uint8_t>& s0 = slots_[0].model;
  std::vector<uint8_t>& s1 = slots_[1].model;
  std::fill(s0.begin(), s0.begin() + (16 << 10), graph_values_[0]);
  std::fill(s1.begin() + (32 << 10), s1.begin() + (48 << 10), graph_values_[1]);
  std::copy(s0.begin(), s0.begin() + (16 << 10), s1.begin());
  if (kernel_) {
    ApplyPattern(s0, 16 << 10, 4096, graph_seed_);
  } else {
    std::fill(s0.begin() + (16 << 10), s0.begin() + (20 << 10),
              static_cast<uint8_t>(graph_seed_));
  }
  std::fill(s0.begin() + (60 << 10), s0.begin() + (64 << 10), graph_values_[2]);
}

int Worker::OpFill(hrx::Stream& stream, const char* name) {
  const int slot = static_cast<int>(Below(kSlots));
  const auto [offset, length] = Range(slots_[slot].model.size(), kMaxPiece);
  const uint8_t value = Byte();
  auto view = ViewOf(slot, offset, length);
  if (!view.ok()) return Fail(name, view.status());
  if (absl::Status s = stream.Fill(*view, value); !s.ok()) return Fail(name, s);
  std::fill_n(slots_[slot].model.begin() + offset, length, value);
  ++commands_;
  return 0;
}

int Worker::OpCopy(hrx::Stream& stream, const char* name) {
  const int src = static_cast<int>(Below(kSlots));
  const int dst = static_cast<int>(Below(kSlots));
  const uint64_t src_size = slots_[src].model.size();
  const uint64_t dst_size = slots_[dst].model.size();
  uint64_t length, src_offset, dst_offset;
  if (src == dst) {
    // Two halves of one buffer: equal and never overlapping.
    const uint64_t half = src_size / 2;
    length = 1 + Below(std::min(half, kMaxPiece));
    const uint64_t low = Below(half - length + 1);
    const uint64_t high = half + Below(src_size - half - length + 1);
    const bool up = Below(2) == 0;
    src_offset = up ? low : high;
    dst_offset = up ? high : low;
  } else {
    length = 1 + Below(std::min({src_size, dst_size, kMaxPiece}));
    src_offset = Below(src_size - length + 1);
    dst_offset = Below(dst_size - length + 1);
  }
  auto from = ViewOf(src, src_offset, length);
  auto to = ViewOf(dst, dst_offset, length);
  if (!from.ok()) return Fail(name, from.status());
  if (!to.ok()) return Fail(name, to.status());
  if (absl::Status s = stream.Copy(*to, *from); !s.ok()) return Fail(name, s);
  std::vector<uint8_t>& to_model = slots_[dst].model;
  const std::vector<uint8_t>& from_model = slots_[src].model;
  std::memmove(to_model.data() + dst_offset, from_model.data() + src_offset,
               length);
  ++commands_;
  return 0;
}

int Worker::OpUpload(hrx::Stream& stream, uint64_t max_length) {
  const int slot = static_cast<int>(Below(kSlots));
  const uint64_t size = slots_[slot].model.size();
  // One upload in six covers the whole buffer (up to 3 MiB).
  const auto [offset, length] = Below(6) == 0 && size <= max_length * 16
                                    ? std::pair<uint64_t, uint64_t>{0, size}
                                    : Range(size, max_length);
  const std::vector<uint8_t> bytes = RandomBytes(length);
  auto view = ViewOf(slot, offset, length);
  if (!view.ok()) return Fail("upload", view.status());
  if (absl::Status s = stream.Upload(*view, bytes); !s.ok())
    return Fail("upload", s);
  std::copy(bytes.begin(), bytes.end(), slots_[slot].model.begin() + offset);
  ++commands_;
  return 0;
}

int Worker::OpReadBlocking() {
  const int slot = static_cast<int>(Below(kSlots));
  const uint64_t size = slots_[slot].model.size();
  const auto [offset, length] = Below(4) == 0
                                    ? std::pair<uint64_t, uint64_t>{0, size}
                                    : Range(size, kMaxPiece);
  auto view = ViewOf(slot, offset, length);
  if (!view.ok()) return Fail("read_blocking", view.status());
  std::vector<uint8_t> got(length);
  if (absl::Status s = a_->ReadBlocking(*view, got); !s.ok())
    return Fail("read_blocking", s);
  held_events_.clear();  // a_ sent its batch
  ++commands_;
  return Check(
      absl::StrCat("read_blocking slot ", slot, " [", offset, ", +", length,
                   ")"),
      got,
      std::span<const uint8_t>(slots_[slot].model).subspan(offset, length));
}

int Worker::OpReadQueued() {
  const int slot = static_cast<int>(Below(kSlots));
  const auto [offset, length] = Range(slots_[slot].model.size(), kMaxPiece);
  auto view = ViewOf(slot, offset, length);
  if (!view.ok()) return Fail("read", view.status());
  auto readback = a_->Read(*view);
  if (!readback.ok()) return Fail("read", readback.status());
  const auto& model = slots_[slot].model;
  pending_.push_back(
      PendingRead{*std::move(readback),
                  std::vector<uint8_t>(model.begin() + offset,
                                       model.begin() + offset + length),
                  absl::StrCat("queued read slot ", slot, " [", offset, ", +",
                               length, ") at command ", commands_)});
  ++commands_;
  if (pending_.size() > kMaxPendingReadbacks) return WaitOldestRead();
  return 0;
}

int Worker::WaitOldestRead() {
  PendingRead read = std::move(pending_.front());
  pending_.pop_front();
  auto bytes = read.readback.Wait(*a_);
  if (!bytes.ok()) return Fail("readback wait", bytes.status());
  held_events_.clear();  // a_ sent its batch
  return Check(read.what, *bytes, read.expected);
}

int Worker::OpDispatch() {
  if (!kernel_) return OpFill(*a_, "fill");
  const int slot = static_cast<int>(Below(kSlots));
  const auto [offset, length] = Range(slots_[slot].model.size(), 64 << 10);
  const uint64_t n = 1 + Below(length);
  const uint32_t seed = static_cast<uint32_t>(rng_());
  auto view = ViewOf(slot, offset, length);
  if (!view.ok()) return Fail("dispatch", view.status());
  hrx::Constants constants;
  if (absl::Status s = constants.Push(n); !s.ok()) return Fail("constants", s);
  if (absl::Status s = constants.Push(seed); !s.ok())
    return Fail("constants", s);
  const uint32_t groups = static_cast<uint32_t>((n + 63) / 64);
  if (absl::Status s = a_->Dispatch(*kernel_, {groups, 1, 1}, {64, 1, 1},
                                    constants, {&*view, 1});
      !s.ok()) {
    return Fail("dispatch", s);
  }
  ApplyPattern(slots_[slot].model, offset, n, seed);
  ++commands_;
  return 0;
}

int Worker::OpGraph() {
  if (absl::Status s = a_->Launch(*graph_); !s.ok())
    return Fail("graph launch", s);
  ApplyGraph();
  ++commands_;
  return 0;
}

int Worker::OpEvents() {
  // a -> b: b runs after everything a issued so far; then a -> after b.
  auto issued = a_->RecordEvent();
  if (!issued.ok()) return Fail("record event", issued.status());
  if (absl::Status s = b_->WaitEvent(*issued); !s.ok())
    return Fail("wait event", s);
  commands_ += 2;
  const int steps = 1 + static_cast<int>(Below(3));
  for (int i = 0; i < steps; ++i) {
    const uint64_t kind = Below(3);
    const int failed = kind == 0   ? OpFill(*b_, "fill on b")
                       : kind == 1 ? OpCopy(*b_, "copy on b")
                                   : OpUpload(*b_, 16 << 10);
    if (failed != 0) return failed;
  }
  auto done = b_->RecordEvent();
  if (!done.ok()) return Fail("record event on b", done.status());
  if (absl::Status s = a_->WaitEvent(*done); !s.ok())
    return Fail("wait event on a", s);
  commands_ += 2;
  // a_'s wait on `done` is still in a_'s unsent batch. Releasing the last
  // copy of the Event must send it first (libhrx once sent only b_'s, and
  // the daemon refused a_'s whole batch as "unknown_event"); by default the
  // event goes at once, which checks that. --hold_events keeps it until a_
  // has sent its batch instead.
  if (options_.hold_events) held_events_.push_back(*done);
  const uint64_t observe = Below(4);
  if (observe == 0) {
    if (absl::Status s = done->Synchronize(); !s.ok())
      return Fail("event synchronize", s);
    auto complete = done->IsComplete();
    if (!complete.ok()) return Fail("event is_complete", complete.status());
    if (!*complete) {
      return Fail("event is_complete",
                  absl::InternalError("an event was not complete after its "
                                      "Synchronize returned OK"));
    }
  } else if (observe == 1) {
    auto complete = done->IsComplete();
    if (!complete.ok()) return Fail("event is_complete", complete.status());
  }
  return 0;
}

int Worker::OpRealloc() {
  const int slot = 2 + static_cast<int>(Below(kSlots - 2));
  if (absl::Status s = slots_[slot].buffer->Free(); !s.ok())
    return Fail("free", s);
  slots_[slot].buffer.reset();
  const uint64_t bytes = RandomSlotBytes();
  if (Below(2) == 0) {
    auto buffer = a_->AllocateZeroed(bytes);
    if (!buffer.ok()) return Fail("allocate zeroed", buffer.status());
    slots_[slot].buffer.emplace(*std::move(buffer));
    slots_[slot].model.assign(bytes, 0);
  } else {
    // Unspecified contents until the fill.
    auto buffer = a_->Allocate(bytes);
    if (!buffer.ok()) return Fail("allocate", buffer.status());
    const uint8_t value = Byte();
    if (absl::Status s = a_->Fill(buffer->Binding(), value); !s.ok())
      return Fail("fill new buffer", s);
    slots_[slot].buffer.emplace(*std::move(buffer));
    slots_[slot].model.assign(bytes, value);
    ++commands_;
  }
  commands_ += 2;
  return 0;
}

int Worker::OpSync() {
  const uint64_t kind = Below(3);
  if (kind == 0) {
    if (absl::Status s = a_->Synchronize(); !s.ok())
      return Fail("synchronize", s);
    held_events_.clear();  // a_ sent its batch
  } else if (kind == 1) {
    if (absl::Status s = b_->Synchronize(); !s.ok())
      return Fail("synchronize b", s);
  } else {
    auto idle = a_->IsIdle();
    if (!idle.ok()) return Fail("is_idle", idle.status());
  }
  ++commands_;
  return 0;
}

int Worker::WaitForFile(const std::string& path) {
  const auto give_up = std::chrono::steady_clock::now() + kPartnerTimeout;
  while (!Exists(path)) {
    if (std::chrono::steady_clock::now() > give_up) {
      std::fprintf(stderr,
                   "load_worker seed %lu: the share partner wrote no %s "
                   "within 60 s\n",
                   static_cast<unsigned long>(options_.seed), path.c_str());
      Say("error_code", "PARTNER_TIMEOUT");
      return 4;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return 0;
}

// What a shared buffer of round `round` holds at each step.
struct ShareRound {
  uint64_t bytes;
  std::vector<uint8_t> owner_pattern;  // written through the owner's map
  uint8_t fill;                        // the importer's device fill
  uint64_t upload_bytes;               // the importer's device upload
  std::vector<uint8_t> upload;
  std::vector<uint8_t> Final() const {
    std::vector<uint8_t> bytes_now = owner_pattern;
    std::fill_n(bytes_now.begin(), 4096, fill);
    std::copy(upload.begin(), upload.end(), bytes_now.begin() + 4096);
    return bytes_now;
  }
};

ShareRound RoundOf(uint64_t pair_seed, uint64_t round) {
  ShareRound r;
  r.bytes = (128 << 10) + 4096 * (round % 8);
  r.owner_pattern = PatternBytes(pair_seed * 1000003 + round, r.bytes);
  r.fill = static_cast<uint8_t>(0xa0 + round % 16);
  // Alternately inline and through the shared staging region (>= 64 KiB).
  r.upload_bytes = round % 2 == 0 ? 8192 : 65536;
  r.upload = PatternBytes(pair_seed * 7919 + round + 1, r.upload_bytes);
  return r;
}

int Worker::Share(uint64_t round) {
  const int failed =
      options_.share == "owner" ? ShareAsOwner(round) : ShareAsImporter(round);
  if (failed == 0) ++shares_;
  return failed;
}

int Worker::ShareAsOwner(uint64_t round) {
  // Both partners derive the round's bytes from their common --pair_dir.
  const uint64_t pair_seed = std::hash<std::string>()(options_.pair_dir);
  const ShareRound r = RoundOf(pair_seed, round);
  auto buffer = a_->AllocateShared(r.bytes);
  if (!buffer.ok()) return Fail("share allocate", buffer.status());
  ++commands_;
  {
    auto mapping = buffer->Map();
    if (!mapping.ok()) return Fail("share map (owner)", mapping.status());
    ++commands_;
    if (mapping->size() < r.bytes) {
      return Fail("share map (owner)",
                  absl::InternalError(
                      absl::StrCat("mapping of ", mapping->size(),
                                   " bytes for a ", r.bytes, "-byte buffer")));
    }
    std::memcpy(mapping->bytes().data(), r.owner_pattern.data(), r.bytes);
    auto grant = buffer->GrantToTenant(options_.tenant);
    if (!grant.ok()) return Fail("share grant", grant.status());
    ++commands_;
    const std::string prefix = absl::StrCat(options_.pair_dir, "/", round);
    if (!WriteAtomically(prefix + ".grant", absl::StrCat(*grant))) {
      return Fail("share grant file", absl::InternalError(prefix + ".grant"));
    }
    if (int failed = WaitForFile(prefix + ".ack"); failed != 0) return failed;
    // The importer's device writes show through the owner's mapping...
    const std::vector<uint8_t> expected = r.Final();
    if (int failed = Check(absl::StrCat("owner mapping after the importer's "
                                        "writes, round ",
                                        round),
                           mapping->bytes().subspan(0, r.bytes), expected);
        failed != 0) {
      return failed;
    }
    // ...and through the device.
    std::vector<uint8_t> got(r.bytes);
    if (absl::Status s = a_->ReadBlocking(buffer->Binding(), got); !s.ok())
      return Fail("share read (owner)", s);
    ++commands_;
    if (int failed = Check(absl::StrCat("owner device read of the shared "
                                        "buffer, round ",
                                        round),
                           got, expected);
        failed != 0) {
      return failed;
    }
  }  // unmapped
  if (absl::Status s = buffer->Free(); !s.ok()) return Fail("share free", s);
  ++commands_;
  return 0;
}

int Worker::ShareAsImporter(uint64_t round) {
  const uint64_t pair_seed = std::hash<std::string>()(options_.pair_dir);
  const ShareRound r = RoundOf(pair_seed, round);
  const std::string prefix = absl::StrCat(options_.pair_dir, "/", round);
  if (int failed = WaitForFile(prefix + ".grant"); failed != 0) return failed;
  uint64_t grant = 0;
  if (!absl::SimpleAtoi(ReadWhole(prefix + ".grant"), &grant)) {
    return Fail("share grant file", absl::InternalError(prefix + ".grant"));
  }
  auto imported = a_->Import(grant);
  if (!imported.ok()) return Fail("share import", imported.status());
  ++commands_;
  {
    auto mapping = imported->Map();
    if (!mapping.ok()) return Fail("share map (importer)", mapping.status());
    ++commands_;
    if (mapping->size() < r.bytes || imported->bytes() != r.bytes) {
      return Fail("share map (importer)",
                  absl::InternalError(absl::StrCat(
                      "imported ", imported->bytes(), " bytes, mapped ",
                      mapping->size(), ", expected ", r.bytes)));
    }
    if (int failed =
            Check(absl::StrCat("importer mapping of the owner's "
                               "pattern, round ",
                               round),
                  mapping->bytes().subspan(0, r.bytes), r.owner_pattern);
        failed != 0) {
      return failed;
    }
    std::vector<uint8_t> got(r.bytes);
    if (absl::Status s = a_->ReadBlocking(imported->Binding(), got); !s.ok())
      return Fail("share read (importer)", s);
    ++commands_;
    if (int failed = Check(absl::StrCat("importer device read of the owner's "
                                        "pattern, round ",
                                        round),
                           got, r.owner_pattern);
        failed != 0) {
      return failed;
    }
    auto head = imported->Slice(0, 4096);
    auto middle = imported->Slice(4096, r.upload_bytes);
    if (!head.ok()) return Fail("share slice", head.status());
    if (!middle.ok()) return Fail("share slice", middle.status());
    if (absl::Status s = a_->Fill(*head, r.fill); !s.ok())
      return Fail("share fill", s);
    if (absl::Status s = a_->Upload(*middle, r.upload); !s.ok())
      return Fail("share upload", s);
    if (absl::Status s = a_->Synchronize(); !s.ok())
      return Fail("share synchronize", s);
    commands_ += 3;
    if (int failed = Check(absl::StrCat("importer mapping after its own "
                                        "device writes, round ",
                                        round),
                           mapping->bytes().subspan(0, r.bytes), r.Final());
        failed != 0) {
      return failed;
    }
  }  // unmapped
  if (absl::Status s = imported->Free(); !s.ok())
    return Fail("share free import", s);
  ++commands_;
  if (!WriteAtomically(prefix + ".ack", "done")) {
    return Fail("share ack file", absl::InternalError(prefix + ".ack"));
  }
  return 0;
}

int Worker::VerifyAll(const std::string& when) {
  while (!pending_.empty()) {
    if (int failed = WaitOldestRead(); failed != 0) return failed;
  }
  if (absl::Status s = b_->Synchronize(); !s.ok()) return Fail("final sync", s);
  for (int slot = 0; slot < kSlots; ++slot) {
    std::vector<uint8_t> got(slots_[slot].model.size());
    if (absl::Status s = a_->ReadBlocking(slots_[slot].buffer->Binding(), got);
        !s.ok()) {
      return Fail("final read", s);
    }
    ++commands_;
    if (int failed =
            Check(absl::StrCat(when, ": slot ", slot), got, slots_[slot].model);
        failed != 0) {
      return failed;
    }
  }
  return 0;
}

int Worker::Run() {
  if (int failed = Setup(); failed != 0) return failed;
  const bool endless = !options_.until.empty();
  uint64_t share_round = 0;
  bool warm_said = false;
  for (uint64_t op = 0; endless || op < options_.ops; ++op) {
    if (endless && op % 16 == 0 && Exists(options_.until)) break;
    if (!options_.share.empty() &&
        op % options_.share_every == options_.share_every / 2) {
      if (int failed = Share(share_round++); failed != 0) return failed;
    }
    if (!warm_said && op >= options_.warm) {
      Say("warm", "yes");
      warm_said = true;
    }
    // Weights out of 100.
    const uint64_t pick = Below(100);
    int failed = 0;
    if (pick < 20) {
      failed = OpFill(*a_, "fill");
    } else if (pick < 34) {
      failed = OpCopy(*a_, "copy");
    } else if (pick < 46) {
      failed = OpUpload(*a_, kMaxPiece);
    } else if (pick < 54) {
      failed = OpReadBlocking();
    } else if (pick < 61) {
      failed = OpReadQueued();
    } else if (pick < 72) {
      failed = OpDispatch();
    } else if (pick < 78) {
      failed = OpGraph();
    } else if (pick < 88) {
      failed = OpEvents();
    } else if (pick < 93) {
      failed = OpRealloc();
    } else {
      failed = OpSync();
    }
    if (failed != 0) return failed;
  }
  if (!warm_said) Say("warm", "yes");
  if (int failed = VerifyAll("final contents"); failed != 0) return failed;
  std::printf(
      "load_worker seed=%lu commands=%lu bytes_verified=%lu "
      "shares=%lu\n",
      static_cast<unsigned long>(options_.seed),
      static_cast<unsigned long>(commands_),
      static_cast<unsigned long>(bytes_verified_),
      static_cast<unsigned long>(shares_));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  options.socket = Flag(argc, argv, "socket");
  options.seed = Number(argc, argv, "seed", 1);
  options.ops = Number(argc, argv, "ops", 1000);
  options.until = Flag(argc, argv, "until");
  options.warm = Number(argc, argv, "warm", 0);
  options.share = Flag(argc, argv, "share");
  options.pair_dir = Flag(argc, argv, "pair_dir");
  options.tenant = Flag(argc, argv, "tenant");
  options.share_every = Number(argc, argv, "share_every", 500);
  options.hold_events = Flag(argc, argv, "hold_events") == "true";
  if ((!options.share.empty() &&
       (options.share != "owner" && options.share != "importer")) ||
      (!options.share.empty() &&
       (options.pair_dir.empty() || options.tenant.empty() ||
        !options.until.empty() || options.share_every == 0))) {
    std::fprintf(stderr, "load_worker: bad --share flags\n");
    return 2;
  }
  // Read what we need while still root.
  const std::string kernel = Flag(argc, argv, "kernel");
  if (!kernel.empty()) {
    options.kernel_code = ReadWhole(kernel);
    if (options.kernel_code.empty()) {
      std::fprintf(stderr, "load_worker: cannot read %s\n", kernel.c_str());
      return 2;
    }
  }
  const uint64_t uid = Number(argc, argv, "uid", 0);
  if (uid != 0 &&
      (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(uid)) != 0 ||
       setuid(static_cast<uid_t>(uid)) != 0)) {
    std::fprintf(stderr, "load_worker: cannot switch to uid %lu\n",
                 static_cast<unsigned long>(uid));
    return 2;
  }
  Worker worker(std::move(options));
  return worker.Run();
}
