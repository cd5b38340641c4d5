#include "daemon/executor/executor_log.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hrx::executor {

std::string EscapeForLog(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == '\\') {
      out += "\\\\";
    } else if (byte < 0x20 || byte >= 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", byte);
    } else {
      out += c;
    }
  }
  return out;
}

bool LineBudget::Take(absl::Time now) {
  const double earned =
      absl::ToDoubleSeconds(now - refilled_) * kExecutorLogLinesPerSecond;
  tokens_ = std::min(kExecutorLogBurstLines, tokens_ + earned);
  refilled_ = now;
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

ExecutorLogPump::ExecutorLogPump(Sink sink)
    : sink_(std::move(sink)), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { Run(); });
}

ExecutorLogPump::~ExecutorLogPump() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

void ExecutorLogPump::Add(const std::string& executor, shared::UniqueFd pipe) {
  if (!pipe.valid()) return;
  {
    absl::MutexLock lock(&mu_);
    const int fd = pipe.get();
    Source& source = added_[fd];
    source.executor = executor;
    source.pipe = std::move(pipe);
  }
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
}

void ExecutorLogPump::Run() {
  std::map<int, Source> sources;  // this thread's alone
  std::vector<char> buffer(16384);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      for (auto& [fd, source] : added_) sources.emplace(fd, std::move(source));
      added_.clear();
    }
    std::vector<pollfd> polled = {{wake_.get(), POLLIN, 0}};
    for (const auto& [fd, source] : sources) polled.push_back({fd, POLLIN, 0});
    // Woken at least once a second: lines dropped by a source that then
    // went quiet are reported once its budget allows a line again.
    if (poll(polled.data(), polled.size(), 1000) < 0 && errno != EINTR) {
      return;
    }
    const absl::Time now = absl::Now();
    for (auto& [fd, source] : sources) {
      if (source.dropped != 0 && source.budget.Take(now)) ReportDropped(source);
    }
    if (polled[0].revents != 0) {
      uint64_t count = 0;
      (void)!read(wake_.get(), &count, sizeof(count));
    }
    for (size_t i = 1; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      auto it = sources.find(polled[i].fd);
      const ssize_t got = read(polled[i].fd, buffer.data(), buffer.size());
      if (got > 0) {
        Take(it->second, std::string_view(buffer.data(), got));
        continue;
      }
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      // The executor is gone: its last words, then the pipe closes.
      Source& source = it->second;
      if (!source.partial.empty()) Finish(source);
      if (source.dropped != 0) ReportDropped(source);
      sources.erase(it);
    }
  }
}

void ExecutorLogPump::Take(Source& source, std::string_view bytes) {
  while (!bytes.empty()) {
    const size_t end = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, end);
    const size_t room = kMaxExecutorLogLineBytes - source.partial.size();
    source.partial.append(piece.substr(0, room));
    source.partial_cut += piece.size() - std::min(piece.size(), room);
    if (end == std::string_view::npos) return;
    Finish(source);
    bytes.remove_prefix(end + 1);
  }
}

void ExecutorLogPump::ReportDropped(Source& source) {
  sink_(absl::StrFormat("%s: (%u lines dropped: at most %g a second)",
                        source.executor, source.dropped,
                        kExecutorLogLinesPerSecond));
  source.dropped = 0;
}

void ExecutorLogPump::Finish(Source& source) {
  const absl::Time now = absl::Now();
  if (!source.budget.Take(now)) {
    ++source.dropped;
  } else {
    if (source.dropped != 0) ReportDropped(source);
    std::string line =
        absl::StrCat(source.executor, ": ", EscapeForLog(source.partial));
    if (source.partial_cut != 0) {
      absl::StrAppendFormat(&line, " (%u more bytes cut)", source.partial_cut);
    }
    sink_(line);
  }
  source.partial.clear();
  source.partial_cut = 0;
}

}  // namespace hrx::executor
