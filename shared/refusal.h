// Refusals as data: the catalogue of every reason token hrx puts at the start
// of a refusal's message ("token: what happened. Fix: what to do."), each
// with its canonical status code and where it arises.
//
// A refusal is made only through Refusal(), which takes the code from the
// catalogue and attaches the token as a status payload, so counters and tests
// read the reason without parsing text. docs/protocol.md's error tables list
// exactly these reasons (refusal_test checks it).
#ifndef HRX_SHARED_REFUSAL_H_
#define HRX_SHARED_REFUSAL_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace hrx {

enum class Reason : uint16_t {
  kBadClientName,
  kBadDevice,
  kBadGrantee,
  kBadGraphNode,
  kBadHandleKind,
  kBadKernel,
  kBadLaunchShape,
  kBadLogLevel,
  kBadMetricsAddress,
  kBadQueueCount,
  kBadSessionMetadata,
  kBadSignature,
  kBadTicket,
  kBadTimeout,
  kBadTransport,
  kBatchTooLarge,
  kBindingsMismatch,
  kBudgetExhausted,
  kClientNameTooLong,
  kConfigInvalid,
  kConfigUnreadable,
  kConstantsFull,
  kConstantsMismatch,
  kConstantsTooLarge,
  kCopyLengthMismatch,
  kCopyOverlap,
  kDaemonUnreachable,
  kDeadlineExceeded,
  kDescriptorsExhausted,
  kDeviceFault,
  kDeviceLost,
  kDeviceMemoryExhausted,
  kDmabufUnaligned,
  kDmabufUnavailable,
  kEmptyCommand,
  kEmptyNode,
  kEmptyRequest,
  kEventIdInUse,
  kEventUnpublished,
  kExportFailed,
  kFillValueOutOfRange,
  kForeignEvent,
  kForeignHandle,
  kForeignKernel,
  kForeignNode,
  kForeignView,
  kForgedHandle,
  kFreedBuffer,
  kGrantNotYours,
  kGraphFailed,
  kGraphFull,
  kGraphNotProfiled,
  kGraphTooLarge,
  kGraphWrongStream,
  kHipError,
  kHipUnavailable,
  kKernelFailed,
  kKernelFileMissing,
  kKernelLoadingNotAllowed,
  kLabelMismatch,
  kListenFailed,
  kMalformedRequest,
  kMapFailed,
  kMappingNotTyped,
  kMemfdFailed,
  kMetricsListenFailed,
  kMissingHandle,
  kMissingIndexConstants,
  kMmapFailed,
  kMovedGraph,
  kNoSession,
  kNoSuchDevice,
  kNotHostMappable,
  kNotServedByExecutor,
  kNotIndexList,
  kObserverReadOnly,
  kPeerNotVisible,
  kPreviousDaemonRun,
  kQueuePoolBusy,
  kReadSizeMismatch,
  kReadTooLarge,
  kReadbackForeignStream,
  kRequestTooComplex,
  kRingBroken,
  kRingMessageTooLarge,
  kRingUnavailable,
  kRoleRequired,
  kScratchForeignStream,
  kServerFailed,
  kSessionClosed,
  kSessionNotYours,
  kShuttingDown,
  kShortRead,
  kSideChannelFailed,
  kSideChannelProtocol,
  kSideChannelUnreachable,
  kSignatureMismatch,
  kSocketDirFailed,
  kSocketDirForeign,
  kSocketInUse,
  kSocketLockFailed,
  kSocketPathTooLong,
  kSocketStale,
  kStaleHandle,
  kStreamAlreadyOpen,
  kStreamBroken,
  kStreamBusy,
  kStreamDestroyed,
  kStreamNotOpen,
  kStreamProtocol,
  kTargetMismatch,
  kTicketExpired,
  kTicketNotYours,
  kTicketUsed,
  kTlsFileUnreadable,
  kTlsRequired,
  kTooManyConnections,
  kTooManyEvents,
  kTooManyKernels,
  kTooManySessions,
  kUnidentifiedCaller,
  kUnknownBackend,
  kUnknownCaller,
  kUnknownCertificate,
  kUnknownEvent,
  kUnknownExport,
  kUnknownGrant,
  kUnknownHandle,
  kUnknownSession,
  kUnknownTenant,
  kUnknownTicket,
  kUntrustedSocket,
  kUploadTooLarge,
  kViewOutOfRange,
  kWorkgroupSizeMismatch,
  kWrongHandleKind,
  kExecutorLost,
  kExecutorRestarting,
  kCrossExecutorMemory,
  kBadTenantName,
  kBadLabel,
  kTenantExists,
  kTooManyBoundTenants,
  kTenantRemoved,
  kTenantBusy,
  kSocketDirShared,
  kTooManyRings,
  kTooManyCalls,
};

enum class Origin : uint8_t {
  kDaemon,   // hrxd sends it to a client in reply to a call
  kClient,   // libhrx or hrxctl refuses locally, before or after a call
  kStartup,  // hrxd refuses to start (flags, config, sockets, device)
};

struct ReasonInfo {
  Reason reason;
  std::string_view token;
  absl::StatusCode code;
  Origin origin;
};

// Every reason, in enum order.
absl::Span<const ReasonInfo> AllReasons();
const ReasonInfo& InfoOf(Reason reason);

// A status with the reason's code and the message "token: detail"; `detail`
// names the numbers involved and ends with "Fix: …".
absl::Status Refusal(Reason reason, std::string_view detail);
// As above with a code other than the catalogue's, for reasons whose code
// depends on the underlying failure (hip_error: out of memory is
// RESOURCE_EXHAUSTED, a missing driver UNAVAILABLE).
absl::Status Refusal(Reason reason, std::string_view detail,
                     absl::StatusCode code);

// The reason a status was made with, if it was made by Refusal().
std::optional<Reason> ReasonOf(const absl::Status& status);
// ReasonOf's token, or "other" for a status made elsewhere.
std::string_view ReasonToken(const absl::Status& status);

// A status that crossed a process boundary as a code and a message (hrxd's
// executors): its reason is read back from the message's catalogued token,
// so it counts and compares as the refusal it was.
absl::Status StatusFromWire(int code, std::string_view message);

}  // namespace hrx

#endif  // HRX_SHARED_REFUSAL_H_
