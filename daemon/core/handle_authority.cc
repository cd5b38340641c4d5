#include "daemon/core/handle_authority.h"

#include <sys/random.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {

HandleAuthority HandleAuthority::FromKernelRandom() {
  uint8_t bytes[24];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    HRX_CHECK(n > 0);  // getrandom only fails on a broken kernel
    filled += static_cast<size_t>(n);
  }
  uint64_t instance;
  std::memcpy(&instance, bytes, sizeof(instance));
  shared::SipKey key;
  std::memcpy(key.data(), bytes + 8, key.size());
  return HandleAuthority(instance | 1, key);  // never 0: 0 means "missing"
}

uint64_t HandleAuthority::Tag(uint64_t instance, uint64_t session,
                              uint64_t object) const {
  uint64_t message[3] = {instance, session, object};
  return shared::SipHash24(key_, reinterpret_cast<const uint8_t*>(message),
                           sizeof(message));
}

shared::WireHandle HandleAuthority::Seal(uint64_t session,
                                         uint64_t object) const {
  return shared::WireHandle{instance_, session, object,
                            Tag(instance_, session, object)};
}

absl::Status HandleAuthority::Authenticate(const shared::WireHandle& handle,
                                           std::string_view what) const {
  if (handle == shared::WireHandle{}) {
    return Refusal(
        Reason::kMissingHandle,
        absl::StrFormat("%s: no handle was sent. Fix: pass the handle the "
                        "daemon returned when it created the object.",
                        what));
  }
  if (handle.instance != instance_) {
    return Refusal(
        Reason::kPreviousDaemonRun,
        absl::StrFormat("%s: the handle was issued by daemon run %016x; "
                        "this daemon is run %016x. Fix: reconnect and recreate "
                        "your objects; "
                        "handles do not survive a daemon restart.",
                        what, handle.instance, instance_));
  }
  if (handle.tag != Tag(handle.instance, handle.session, handle.object)) {
    return Refusal(
        Reason::kForgedHandle,
        absl::StrFormat(
            "%s: the handle's tag %016x does not authenticate it "
            "(session %016x, object %016x). Fix: pass handles exactly as the "
            "daemon returned them.",
            what, handle.tag, handle.session, handle.object));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> HandleAuthority::Open(const shared::WireHandle& handle,
                                               uint64_t caller_session,
                                               shared::HandleKind kind,
                                               std::string_view what) const {
  HRX_RETURN_IF_ERROR(Authenticate(handle, what));
  if (handle.session != caller_session) {
    return Refusal(
        Reason::kForeignHandle,
        absl::StrFormat("%s: the handle belongs to session %016x, not to the "
                        "calling session %016x. Fix: use handles of your own "
                        "session; share "
                        "buffers with an explicit grant.",
                        what, handle.session, caller_session));
  }
  const shared::Handle decoded = shared::Handle::Decode(handle.object);
  if (decoded.kind != kind) {
    return Refusal(
        Reason::kWrongHandleKind,
        absl::StrFormat("%s: the handle names a %s where a %s is required. "
                        "Fix: pass a %s handle.",
                        what, shared::HandleKindName(decoded.kind),
                        shared::HandleKindName(kind),
                        shared::HandleKindName(kind)));
  }
  return handle.object;
}

absl::StatusOr<uint64_t> HandleAuthority::OpenSession(
    const shared::WireHandle& handle) const {
  HRX_RETURN_IF_ERROR(Authenticate(handle, "session"));
  if (handle.session != handle.object ||
      shared::Handle::Decode(handle.object).kind !=
          shared::HandleKind::kSession) {
    return Refusal(
        Reason::kWrongHandleKind,
        "session: the hrx-session metadata names an object "
        "that is not a session. Fix: send the handle OpenSession returned.");
  }
  return handle.session;
}

}  // namespace hrx::daemon
