// hrxctl top: a live, refreshing view of the daemon (status and tenants)
// until q is pressed (or standard input ends).
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "client/hrxctl/target.h"

namespace hrxctl {

int StatusOnce(const Target& target, bool json);
int TenantsOnce(const Target& target, bool json);

namespace {

// Puts a terminal in non-canonical, no-echo mode while alive, so q works
// without Enter; restores it on every exit path.
class RawTerminal {
 public:
  RawTerminal() {
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 0;
      raw.c_cc[VTIME] = 0;
      active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

 private:
  termios saved_{};
  bool active_ = false;
};

// Waits up to `timeout_ms` for input; true when the user asked to quit.
bool QuitRequested(int timeout_ms) {
  pollfd input{STDIN_FILENO, POLLIN, 0};
  if (poll(&input, 1, timeout_ms) <= 0) return false;
  char c = 0;
  const ssize_t n = read(STDIN_FILENO, &c, 1);
  return n <= 0 || c == 'q' || c == 'Q';
}

}  // namespace

int Top(const Target& target, int interval_ms, bool json) {
  RawTerminal terminal;
  while (true) {
    if (json) {
      const int code = StatusOnce(target, true);
      if (code != 0) return code;
    } else {
      std::printf("\x1b[H\x1b[2J");  // home, clear
      std::printf("hrxctl top — every %d ms, q quits\n\n", interval_ms);
      const int code = StatusOnce(target, false);
      if (code != 0) return code;
      std::printf("\n");
      (void)TenantsOnce(target, false);  // observers and admins only
    }
    std::fflush(stdout);
    if (QuitRequested(interval_ms)) return 0;
  }
}

}  // namespace hrxctl
