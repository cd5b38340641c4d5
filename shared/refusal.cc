#include "shared/refusal.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/cord.h"

namespace hrx {
namespace {

constexpr char kPayloadUrl[] = "type.hrx.dev/hrx.Reason";

constexpr ReasonInfo kReasons[] = {
    {Reason::kBadClientName, "bad_client_name",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kBadDevice, "bad_device", absl::StatusCode::kInvalidArgument,
     Origin::kStartup},
    {Reason::kBadGrantee, "bad_grantee", absl::StatusCode::kInvalidArgument,
     Origin::kDaemon},
    {Reason::kBadGraphNode, "bad_graph_node",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kBadHandleKind, "bad_handle_kind",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kBadKernel, "bad_kernel", absl::StatusCode::kInvalidArgument,
     Origin::kDaemon},
    {Reason::kBadLaunchShape, "bad_launch_shape",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kBadLogLevel, "bad_log_level", absl::StatusCode::kInvalidArgument,
     Origin::kStartup},
    {Reason::kBadMetricsAddress, "bad_metrics_address",
     absl::StatusCode::kInvalidArgument, Origin::kStartup},
    {Reason::kBadQueueCount, "bad_queue_count",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kBadSessionMetadata, "bad_session_metadata",
     absl::StatusCode::kUnauthenticated, Origin::kDaemon},
    {Reason::kBadSignature, "bad_signature", absl::StatusCode::kInvalidArgument,
     Origin::kDaemon},
    {Reason::kBadTicket, "bad_ticket", absl::StatusCode::kInvalidArgument,
     Origin::kDaemon},
    {Reason::kBadTimeout, "bad_timeout", absl::StatusCode::kInvalidArgument,
     Origin::kClient},
    {Reason::kBadTransport, "bad_transport", absl::StatusCode::kInvalidArgument,
     Origin::kClient},
    {Reason::kBatchTooLarge, "batch_too_large",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kBindingsMismatch, "bindings_mismatch",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kBudgetExhausted, "budget_exhausted",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kClientNameTooLong, "client_name_too_long",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kConfigInvalid, "config_invalid",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kConfigUnreadable, "config_unreadable",
     absl::StatusCode::kInvalidArgument, Origin::kStartup},
    {Reason::kConstantsFull, "constants_full",
     absl::StatusCode::kInvalidArgument, Origin::kClient},
    {Reason::kConstantsMismatch, "constants_mismatch",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kConstantsTooLarge, "constants_too_large",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kCopyLengthMismatch, "copy_length_mismatch",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kCopyOverlap, "copy_overlap", absl::StatusCode::kInvalidArgument,
     Origin::kDaemon},
    {Reason::kDaemonUnreachable, "daemon_unreachable",
     absl::StatusCode::kUnavailable, Origin::kClient},
    {Reason::kDeadlineExceeded, "deadline_exceeded",
     absl::StatusCode::kDeadlineExceeded, Origin::kClient},
    {Reason::kDescriptorsExhausted, "descriptors_exhausted",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kDeviceFault, "device_fault", absl::StatusCode::kInternal,
     Origin::kDaemon},
    {Reason::kDeviceLost, "device_lost", absl::StatusCode::kUnavailable,
     Origin::kStartup},
    {Reason::kDeviceMemoryExhausted, "device_memory_exhausted",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kDmabufUnaligned, "dmabuf_unaligned",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kDmabufUnavailable, "dmabuf_unavailable",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kEmptyCommand, "empty_command", absl::StatusCode::kInvalidArgument,
     Origin::kDaemon},
    {Reason::kEmptyNode, "empty_node", absl::StatusCode::kInvalidArgument,
     Origin::kDaemon},
    {Reason::kEmptyRequest, "empty_request", absl::StatusCode::kInvalidArgument,
     Origin::kDaemon},
    {Reason::kEventIdInUse, "event_id_in_use",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kEventUnpublished, "event_unpublished",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kExportFailed, "export_failed",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kFillValueOutOfRange, "fill_value_out_of_range",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kForeignEvent, "foreign_event", absl::StatusCode::kInvalidArgument,
     Origin::kClient},
    {Reason::kForeignHandle, "foreign_handle",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kForeignKernel, "foreign_kernel",
     absl::StatusCode::kInvalidArgument, Origin::kClient},
    {Reason::kForeignNode, "foreign_node", absl::StatusCode::kInvalidArgument,
     Origin::kClient},
    {Reason::kForeignView, "foreign_view", absl::StatusCode::kInvalidArgument,
     Origin::kClient},
    {Reason::kForgedHandle, "forged_handle", absl::StatusCode::kUnauthenticated,
     Origin::kDaemon},
    {Reason::kFreedBuffer, "freed_buffer",
     absl::StatusCode::kFailedPrecondition, Origin::kClient},
    {Reason::kGrantNotYours, "grant_not_yours",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kGraphFailed, "graph_failed",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kGraphFull, "graph_full", absl::StatusCode::kInvalidArgument,
     Origin::kClient},
    {Reason::kGraphNotProfiled, "graph_not_profiled",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kGraphTooLarge, "graph_too_large",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kGraphWrongStream, "graph_wrong_stream",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kHipError, "hip_error", absl::StatusCode::kInternal,
     Origin::kDaemon},
    {Reason::kHipUnavailable, "hip_unavailable", absl::StatusCode::kUnavailable,
     Origin::kStartup},
    {Reason::kKernelFailed, "kernel_failed", absl::StatusCode::kInternal,
     Origin::kDaemon},
    {Reason::kKernelFileMissing, "kernel_file_missing",
     absl::StatusCode::kNotFound, Origin::kClient},
    {Reason::kKernelLoadingNotAllowed, "kernel_loading_not_allowed",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kLabelMismatch, "label_mismatch",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kListenFailed, "listen_failed", absl::StatusCode::kUnavailable,
     Origin::kStartup},
    {Reason::kMalformedRequest, "malformed_request",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kMapFailed, "map_failed", absl::StatusCode::kResourceExhausted,
     Origin::kClient},
    {Reason::kMappingNotTyped, "mapping_not_typed",
     absl::StatusCode::kInvalidArgument, Origin::kClient},
    {Reason::kMemfdFailed, "memfd_failed", absl::StatusCode::kResourceExhausted,
     Origin::kDaemon},
    {Reason::kMetricsListenFailed, "metrics_listen_failed",
     absl::StatusCode::kUnavailable, Origin::kStartup},
    {Reason::kMissingHandle, "missing_handle",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kMissingIndexConstants, "missing_index_constants",
     absl::StatusCode::kInvalidArgument, Origin::kClient},
    {Reason::kMmapFailed, "mmap_failed", absl::StatusCode::kResourceExhausted,
     Origin::kDaemon},
    {Reason::kMovedGraph, "moved_graph", absl::StatusCode::kFailedPrecondition,
     Origin::kClient},
    {Reason::kNoSession, "no_session", absl::StatusCode::kUnauthenticated,
     Origin::kDaemon},
    {Reason::kNoSuchDevice, "no_such_device", absl::StatusCode::kNotFound,
     Origin::kClient},
    {Reason::kNotHostMappable, "not_host_mappable",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kNotServedByExecutor, "not_served_by_executor",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kNotIndexList, "not_index_list",
     absl::StatusCode::kInvalidArgument, Origin::kClient},
    {Reason::kObserverReadOnly, "observer_read_only",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kPeerNotVisible, "peer_not_visible",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kPreviousDaemonRun, "previous_daemon_run",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kQueuePoolBusy, "queue_pool_busy",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kReadSizeMismatch, "read_size_mismatch",
     absl::StatusCode::kInvalidArgument, Origin::kClient},
    {Reason::kReadTooLarge, "read_too_large",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kReadbackForeignStream, "readback_foreign_stream",
     absl::StatusCode::kFailedPrecondition, Origin::kClient},
    {Reason::kRequestTooComplex, "request_too_complex",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kRingBroken, "ring_broken", absl::StatusCode::kDataLoss,
     Origin::kDaemon},
    {Reason::kRingMessageTooLarge, "ring_message_too_large",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kRingUnavailable, "ring_unavailable",
     absl::StatusCode::kFailedPrecondition, Origin::kClient},
    {Reason::kRoleRequired, "role_required",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kScratchForeignStream, "scratch_foreign_stream",
     absl::StatusCode::kFailedPrecondition, Origin::kClient},
    {Reason::kServerFailed, "server_failed", absl::StatusCode::kUnavailable,
     Origin::kStartup},
    {Reason::kSessionClosed, "session_closed", absl::StatusCode::kCancelled,
     Origin::kDaemon},
    {Reason::kSessionNotYours, "session_not_yours",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kShuttingDown, "shutting_down", absl::StatusCode::kUnavailable,
     Origin::kDaemon},
    {Reason::kShortRead, "short_read", absl::StatusCode::kInternal,
     Origin::kClient},
    {Reason::kSideChannelFailed, "side_channel_failed",
     absl::StatusCode::kUnavailable, Origin::kClient},
    {Reason::kSideChannelProtocol, "side_channel_protocol",
     absl::StatusCode::kInternal, Origin::kClient},
    {Reason::kSideChannelUnreachable, "side_channel_unreachable",
     absl::StatusCode::kUnavailable, Origin::kClient},
    {Reason::kSignatureMismatch, "signature_mismatch",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kSocketDirFailed, "socket_dir_failed",
     absl::StatusCode::kFailedPrecondition, Origin::kStartup},
    {Reason::kSocketDirForeign, "socket_dir_foreign",
     absl::StatusCode::kFailedPrecondition, Origin::kStartup},
    {Reason::kSocketInUse, "socket_in_use",
     absl::StatusCode::kFailedPrecondition, Origin::kStartup},
    {Reason::kSocketLockFailed, "socket_lock_failed",
     absl::StatusCode::kFailedPrecondition, Origin::kStartup},
    {Reason::kSocketPathTooLong, "socket_path_too_long",
     absl::StatusCode::kInvalidArgument, Origin::kStartup},
    {Reason::kSocketStale, "socket_stale",
     absl::StatusCode::kFailedPrecondition, Origin::kStartup},
    {Reason::kStaleHandle, "stale_handle", absl::StatusCode::kNotFound,
     Origin::kDaemon},
    {Reason::kStreamAlreadyOpen, "stream_already_open",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kStreamBroken, "stream_broken", absl::StatusCode::kUnavailable,
     Origin::kClient},
    {Reason::kStreamBusy, "stream_busy", absl::StatusCode::kResourceExhausted,
     Origin::kDaemon},
    {Reason::kStreamDestroyed, "stream_destroyed",
     absl::StatusCode::kFailedPrecondition, Origin::kClient},
    {Reason::kStreamNotOpen, "stream_not_open",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kStreamProtocol, "stream_protocol", absl::StatusCode::kInternal,
     Origin::kClient},
    {Reason::kTargetMismatch, "target_mismatch",
     absl::StatusCode::kFailedPrecondition, Origin::kClient},
    {Reason::kTicketExpired, "ticket_expired",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kTicketNotYours, "ticket_not_yours",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kTicketUsed, "ticket_used", absl::StatusCode::kFailedPrecondition,
     Origin::kDaemon},
    {Reason::kTlsFileUnreadable, "tls_file_unreadable",
     absl::StatusCode::kInvalidArgument, Origin::kStartup},
    {Reason::kTlsRequired, "tls_required", absl::StatusCode::kInvalidArgument,
     Origin::kStartup},
    {Reason::kTooManyConnections, "too_many_connections",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kTooManyEvents, "too_many_events",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kTooManyKernels, "too_many_kernels",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kTooManySessions, "too_many_sessions",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kUnidentifiedCaller, "unidentified_caller",
     absl::StatusCode::kUnauthenticated, Origin::kDaemon},
    {Reason::kUnknownBackend, "unknown_backend",
     absl::StatusCode::kInvalidArgument, Origin::kStartup},
    {Reason::kUnknownCaller, "unknown_caller",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kUnknownCertificate, "unknown_certificate",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kUnknownEvent, "unknown_event", absl::StatusCode::kNotFound,
     Origin::kDaemon},
    {Reason::kUnknownExport, "unknown_export", absl::StatusCode::kNotFound,
     Origin::kDaemon},
    {Reason::kUnknownGrant, "unknown_grant", absl::StatusCode::kNotFound,
     Origin::kDaemon},
    {Reason::kUnknownHandle, "unknown_handle", absl::StatusCode::kNotFound,
     Origin::kDaemon},
    {Reason::kUnknownSession, "unknown_session", absl::StatusCode::kNotFound,
     Origin::kDaemon},
    {Reason::kUnknownTenant, "unknown_tenant", absl::StatusCode::kNotFound,
     Origin::kDaemon},
    {Reason::kUnknownTicket, "unknown_ticket", absl::StatusCode::kNotFound,
     Origin::kDaemon},
    {Reason::kUntrustedSocket, "untrusted_socket",
     absl::StatusCode::kFailedPrecondition, Origin::kClient},
    {Reason::kUploadTooLarge, "upload_too_large",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kViewOutOfRange, "view_out_of_range",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kWorkgroupSizeMismatch, "workgroup_size_mismatch",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kWrongHandleKind, "wrong_handle_kind",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kExecutorLost, "executor_lost", absl::StatusCode::kUnavailable,
     Origin::kDaemon},
    {Reason::kExecutorRestarting, "executor_restarting",
     absl::StatusCode::kUnavailable, Origin::kDaemon},
    {Reason::kCrossExecutorMemory, "cross_executor_memory",
     absl::StatusCode::kFailedPrecondition, Origin::kDaemon},
    {Reason::kBadTenantName, "bad_tenant_name",
     absl::StatusCode::kInvalidArgument, Origin::kDaemon},
    {Reason::kBadLabel, "bad_label", absl::StatusCode::kInvalidArgument,
     Origin::kDaemon},
    {Reason::kTenantExists, "tenant_exists", absl::StatusCode::kAlreadyExists,
     Origin::kDaemon},
    {Reason::kTooManyBoundTenants, "too_many_bound_tenants",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kTenantRemoved, "tenant_removed",
     absl::StatusCode::kPermissionDenied, Origin::kDaemon},
    {Reason::kTenantBusy, "tenant_busy", absl::StatusCode::kUnavailable,
     Origin::kDaemon},
    {Reason::kSocketDirShared, "socket_dir_shared",
     absl::StatusCode::kFailedPrecondition, Origin::kStartup},
    {Reason::kTooManyRings, "too_many_rings",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
    {Reason::kTooManyCalls, "too_many_calls",
     absl::StatusCode::kResourceExhausted, Origin::kDaemon},
};

constexpr bool InEnumOrder() {
  for (size_t i = 0; i < std::size(kReasons); ++i) {
    if (static_cast<size_t>(kReasons[i].reason) != i) return false;
  }
  return true;
}
static_assert(InEnumOrder(), "kReasons must list every Reason in enum order");

const absl::flat_hash_map<std::string_view, Reason>& ByToken() {
  static const auto* by_token = [] {
    auto* map = new absl::flat_hash_map<std::string_view, Reason>();
    for (const ReasonInfo& info : kReasons)
      map->emplace(info.token, info.reason);
    return map;
  }();
  return *by_token;
}

}  // namespace

absl::Span<const ReasonInfo> AllReasons() { return kReasons; }

const ReasonInfo& InfoOf(Reason reason) {
  return kReasons[static_cast<size_t>(reason)];
}

absl::Status Refusal(Reason reason, std::string_view detail) {
  return Refusal(reason, detail, InfoOf(reason).code);
}

absl::Status Refusal(Reason reason, std::string_view detail,
                     absl::StatusCode code) {
  const ReasonInfo& info = InfoOf(reason);
  std::string message(info.token);
  message.append(": ").append(detail);
  absl::Status status(code, message);
  status.SetPayload(kPayloadUrl, absl::Cord(std::string(info.token)));
  return status;
}

std::optional<Reason> ReasonOf(const absl::Status& status) {
  auto payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return std::nullopt;
  auto it = ByToken().find(std::string(*payload));
  if (it == ByToken().end()) return std::nullopt;
  return it->second;
}

std::string_view ReasonToken(const absl::Status& status) {
  std::optional<Reason> reason = ReasonOf(status);
  return reason.has_value() ? InfoOf(*reason).token : "other";
}

absl::Status StatusFromWire(int code, std::string_view message) {
  const auto status_code = static_cast<absl::StatusCode>(code);
  if (status_code == absl::StatusCode::kOk) return absl::OkStatus();
  const size_t colon = message.find(": ");
  if (colon != std::string_view::npos) {
    auto it = ByToken().find(message.substr(0, colon));
    if (it != ByToken().end()) {
      return Refusal(it->second, message.substr(colon + 2), status_code);
    }
  }
  return absl::Status(status_code, std::string(message));
}

}  // namespace hrx
