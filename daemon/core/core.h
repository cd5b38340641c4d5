// The daemon's domain logic: sessions and their buffers, streams, kernels and
// events; the ordered command path onto the backend's queues; the bounded
// caches and pools. Speaks core types and absl::Status; knows nothing of
// gRPC, so it is tested directly.
//
// Every handle, id and view a caller passes is untrusted and checked here.
// Methods that wait for the device take a `done` callback instead of
// blocking; it runs exactly once, possibly on a backend thread, and must not
// call back into Core.
//
// Locking: Core::mu_ guards the session table; each session's own mutex
// guards everything in it, streams included. Nothing waits for the device
// while holding either.
//
// Thread-safe.
#ifndef HRX_DAEMON_CORE_CORE_H_
#define HRX_DAEMON_CORE_CORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/core/handle_authority.h"
#include "daemon/core/handle_table.h"
#include "daemon/core/identity.h"
#include "daemon/core/process_watcher.h"
#include "daemon/core/tenants.h"
#include "daemon/core/queue_pool.h"
#include "daemon/core/session.h"
#include "daemon/core/ticker.h"
#include "daemon/core/types.h"
#include "shared/unique_fd.h"

namespace hrx::daemon {

struct CoreOptions {
  uint32_t queue_count = kDefaultQueueCount;
  // Who may do what; the built-in registry when null.
  std::shared_ptr<TenantRegistry> tenants;
  // How long an export ticket stays redeemable.
  absl::Duration ticket_lifetime = absl::Milliseconds(kDefaultTicketLifetimeMs);
  // Tests inject a fixed authority; the daemon draws one from getrandom.
  std::optional<HandleAuthority> authority;
  // How long a remote session lives after the last call that named it.
  absl::Duration remote_session_lease =
      absl::Seconds(kRemoteSessionLeaseSeconds);
  // How often expired tickets and leases are swept (0: never; tests call
  // Housekeep themselves).
  absl::Duration housekeeping_interval =
      absl::Milliseconds(kHousekeepingIntervalMs);
};

using DoneCallback = std::function<void(absl::Status)>;

class Session;
struct StreamEntry;

class Core {
 public:
  Core(std::unique_ptr<backend::Backend> backend, const CoreOptions& options);
  ~Core();  // drains every queue
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // --- Connections --------------------------------------------------------
  // Admits a new local connection of `caller` before any request is read:
  // a charge on its tenant's connections ceiling, held while the connection
  // is open. RESOURCE_EXHAUSTED "budget_exhausted" past the ceiling.
  absl::StatusOr<ChargeRef> AdmitConnection(const PeerIdentity& caller);
  // The local connection ended: its sessions close as if their client had
  // closed them.
  void ConnectionClosed(uint64_t connection);

  // --- Sessions ---------------------------------------------------------
  // Opens a session for `caller`, whose tenant its config decides.
  // RESOURCE_EXHAUSTED past kMaxSessions or the tenant's sessions ceiling;
  // INVALID_ARGUMENT for a client name longer than kMaxClientNameBytes or
  // holding control characters; PERMISSION_DENIED for a remote caller no
  // tenant lists. A local session is bound to its connection and closes when
  // the connection or its process ends; a remote one when its lease lapses.
  absl::StatusOr<uint64_t> OpenSession(const std::string& client_name,
                                       const PeerIdentity& caller);
  // OK when `caller` is on the connection (local) or certificate (remote)
  // that opened `session`: PERMISSION_DENIED "session_not_yours" otherwise,
  // so a leaked session handle is useless. Renews the session's lease.
  absl::Status VerifyCaller(uint64_t session, const PeerIdentity& caller);
  // Frees the session's handles at once; `done` runs once the session's
  // queued work has completed.
  void CloseSession(uint64_t session,
                    std::function<void(absl::StatusOr<CloseSummary>)> done);

  // Seals and opens the handles this daemon run hands out.
  const HandleAuthority& handles() const { return authority_; }

  // --- Device -----------------------------------------------------------
  DeviceInfo device_info() const;
  CoreStatus status() const;
  // The backend's device_status(): not OK once the device is lost.
  absl::Status device_status() const { return backend_->device_status(); }
  // See QueuePool::SetCapacity. Admins only.
  absl::Status SetQueueCount(uint64_t session, uint32_t count);

  // --- Administration (callers by identity, not session) ------------------
  // PERMISSION_DENIED "role_required" unless `caller`'s tenant has at least
  // `role` (observer < admin; clients may not inspect other tenants).
  absl::Status RequireRole(const PeerIdentity& caller, hrx::v1::Role role);
  // Local callers may always read the daemon's status; a remote caller
  // must be a certificate some tenant lists (PERMISSION_DENIED
  // "unknown_certificate" otherwise).
  absl::Status RequireKnownCaller(const PeerIdentity& caller) const;
  std::vector<TenantUsage> ListTenants() const;
  std::vector<SessionSummary> ListSessions(const std::string& tenant) const;
  // Live buffers, optionally of one tenant and/or one session (0: all).
  std::vector<BufferSummary> ListBuffers(const std::string& tenant,
                                         uint64_t session) const;
  absl::Status SetBudget(const std::string& tenant, const Limits& limits);
  // Takes a newly read config's tenants (see TenantRegistry::Reload).
  void ReloadTenants(TenantRegistry&& fresh) { tenants_->Reload(std::move(fresh)); }
  // Closes a session as if its client had: drains, then frees everything.
  void EvictSession(uint64_t session,
                    std::function<void(absl::StatusOr<CloseSummary>)> done);

  // --- Buffers ----------------------------------------------------------
  // A zero-byte request is rounded up to one byte. `stream` (0: none) is the
  // stream allocating it: commands binding only buffers of their own stream
  // are cached, and scratch recycling checks it.
  absl::StatusOr<BufferInfo> Allocate(uint64_t session, uint64_t bytes,
                                      AllocationKind kind, uint64_t stream = 0);
  // The handle dies at once and cached commands binding the buffer are
  // evicted; the memory lives until queued uses complete.
  absl::Status Free(uint64_t session, uint64_t buffer);

  // --- Sharing ----------------------------------------------------------
  // Offers `buffer` to a tenant (by name) or a session (by id); returns an
  // unguessable grant id. See Buffers.Grant in buffer.proto for the rules.
  absl::StatusOr<uint64_t> Grant(uint64_t session, uint64_t buffer,
                                 const std::string& tenant,
                                 uint64_t grantee_session);
  // A handle of `session` to the granted memory. NOT_FOUND "unknown_grant"
  // for an unknown or revoked grant; PERMISSION_DENIED "grant_not_yours"
  // when `session` is not the grantee.
  absl::StatusOr<BufferInfo> Import(uint64_t session, uint64_t grant);
  absl::Status Revoke(uint64_t session, uint64_t grant);

  // --- Resident handles ---------------------------------------------------
  // Makes a descriptor of `buffer`'s memory now (so an unavailable kind is
  // refused here, FAILED_PRECONDITION naming what is missing) and returns a
  // single-use ticket for the side channel, valid for ticket_lifetime.
  absl::StatusOr<ExportTicket> Export(uint64_t session, uint64_t buffer,
                                      backend::ExportKind kind);
  // The descriptor a ticket names, for the process that asked for it.
  // NOT_FOUND "unknown_ticket"; FAILED_PRECONDITION "ticket_used" or
  // "ticket_expired"; PERMISSION_DENIED "ticket_not_yours" when `peer` is not
  // the exporting session's process.
  absl::StatusOr<shared::UniqueFd> Redeem(std::string_view ticket,
                                          const PeerIdentity& peer);
  // The session is done with a mapping: its hold on the memory ends.
  absl::Status ReleaseExport(uint64_t session, uint64_t export_id);
  std::vector<backend::ExportKind> export_kinds() const {
    return backend_->export_kinds();
  }

  // --- Graphs -----------------------------------------------------------
  // Checks and prepares a recorded graph into an exec that replays on
  // `stream` only. The exec owns its prepared commands and keeps the memory
  // it binds (and its charge) until it is destroyed and its last launch has
  // completed. INVALID_ARGUMENT for an empty fill or copy, unequal copies, a
  // node waiting on itself or a later node, more than kMaxGraphNodes nodes,
  // or labels that do not match the non-join nodes; otherwise as Submit.
  absl::StatusOr<GraphExecInfo> CreateGraphExec(uint64_t session,
                                                uint64_t stream,
                                                GraphSpec spec);
  absl::Status DestroyGraphExec(uint64_t session, uint64_t exec);
  // Lets an exec whose launch failed be launched again.
  absl::Status ClearGraphFailure(uint64_t session, uint64_t exec);
  // A profiled launch: `done` gets each non-join node's device time.
  void LaunchProfiled(
      uint64_t session, uint64_t stream, uint64_t exec,
      std::function<void(absl::StatusOr<std::vector<NodeTime>>)> done);

  // --- Kernels ----------------------------------------------------------
  // Loads `entry` from `code` and learns its signature. When `declared` is
  // set, it must match what the module declares ("signature_mismatch").
  absl::StatusOr<KernelInfo> LoadKernel(
      uint64_t session, std::string_view code, const std::string& entry,
      const backend::KernelSignature* declared = nullptr);
  absl::Status UnloadKernel(uint64_t session, uint64_t kernel);

  // --- Streams ----------------------------------------------------------
  absl::StatusOr<StreamInfo> CreateStream(uint64_t session);
  // The handle dies at once; `done` runs after the stream's queued work.
  void DestroyStream(uint64_t session, uint64_t stream, DoneCallback done);

  // Checks every command, then enqueues all of them in order; a batch with a
  // bad command runs none of it, and the refusal names the command's
  // position. With SubmitErrors::kDefer the refusal is kept for the stream's
  // next synchronisation point (Synchronize, Read, Poll) and `done` gets
  // OK(0). `done` gets the number of commands enqueued, often before Submit
  // returns; but an upload past the staging bounds suspends the batch until
  // the stream's earlier work completes (no thread waits), and `done` runs
  // from that completion. Ordered operations on the stream that arrive
  // meanwhile run after it, in order; past kMaxParkedOps they are refused
  // (RESOURCE_EXHAUSTED "stream_busy").
  using SubmitDone = std::function<void(absl::StatusOr<size_t>)>;
  void Submit(uint64_t session, uint64_t stream, std::vector<Command> commands,
              SubmitErrors errors, SubmitDone done);
  // Completes after everything submitted to the stream so far; reports (and
  // clears) a deferred refusal first.
  void Synchronize(uint64_t session, uint64_t stream, DoneCallback done);
  // A hold on `bytes` of the session's tenant's reply_bytes ceiling, for a
  // read's reply from before it is made until the client has taken it.
  // RESOURCE_EXHAUSTED "budget_exhausted" past the ceiling: the tenant's
  // clients are not reading what they asked for.
  absl::StatusOr<ChargeRef> ReserveReplyBytes(uint64_t session, uint64_t bytes);
  // Fills `*out` (which must outlive `done`) with the view's bytes, ordered
  // after earlier work on the stream.
  void Read(uint64_t session, uint64_t stream, const ViewRef& src,
            std::string* out, DoneCallback done);
  // Without waiting: whether everything submitted so far has completed.
  // Reports a deferred refusal; reclaims completed staging.
  absl::StatusOr<bool> Poll(uint64_t session, uint64_t stream);
  absl::StatusOr<StreamStats> GetStreamStats(uint64_t session,
                                             uint64_t stream);

  // --- Events -----------------------------------------------------------
  absl::StatusOr<bool> QueryEvent(uint64_t session, uint64_t event);
  void SynchronizeEvent(uint64_t session, uint64_t event, DoneCallback done);
  absl::Status ReleaseEvent(uint64_t session, uint64_t event);

  // Counts a refused call by its reason (shared/refusal.h), not its text.
  void CountRefusal(const absl::Status& status);
  std::map<std::string, uint64_t> refusals() const;

  // Waits for everything enqueued so far (daemon shutdown).
  void Drain();
  // As Drain, for at most `limit`; false when work was still running then.
  bool Drain(absl::Duration limit) { return queues_.DrainAll(limit); }

  // Drops expired tickets (and the descriptors they hold) and closes remote
  // sessions whose lease lapsed. Runs every housekeeping_interval on its
  // own thread; tests may call it.
  void Housekeep(absl::Time now);

  // Descriptors handed to processes whose sessions have closed, per tenant:
  // the memory stays charged until those processes exit.
  struct DetachedExports {
    uint64_t count = 0;
    uint64_t bytes = 0;
  };
  DetachedExports detached_exports(const std::string& tenant) const;

 private:
  absl::StatusOr<std::shared_ptr<Session>> FindSession(uint64_t session);
  // The ordered-operation gate of a stream; see Submit. All need the
  // session's lock.
  struct SubmitJob;
  static void RunInOrderLocked(StreamEntry& stream, GatedOp op, Deferred& after);
  static void RunParkedLocked(StreamEntry& stream, Deferred& after);
  void StartSubmitLocked(const std::shared_ptr<SubmitJob>& job,
                         Deferred& after);
  void ContinueSubmitLocked(const std::shared_ptr<SubmitJob>& job,
                            Deferred& after);
  void ResumeSubmit(const std::shared_ptr<SubmitJob>& job);
  static void RunDeferred(Deferred& after);
  // Moves completed upload staging of `stream` into its pools.
  static void ReclaimStaging(Session& session, StreamEntry& stream);
  // Adds to `after`: once everything published on `target` so far has
  // completed, reclaim its staging, then `done` (a sync point's end).
  static void CompleteAtPublished(std::shared_ptr<Session> keep,
                                  std::shared_ptr<StreamEntry> target,
                                  DoneCallback done, Deferred& after);

  // Constant after construction.
  const std::unique_ptr<backend::Backend> backend_;
  const HandleAuthority authority_;
  const std::shared_ptr<TenantRegistry> tenants_;
  const absl::Duration ticket_lifetime_;
  const absl::Time started_;
  QueuePool queues_;  // internally synchronized

  mutable absl::Mutex mu_;
  HandleTable<std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_){
      shared::HandleKind::kSession};
  struct GrantEntry {
    uint64_t owner_session;
    backend::MemoryRef memory;
    std::string tenant;         // grantee tenant, or
    uint64_t grantee_session;   // grantee session
    ChargeRef charge;           // the owner tenant's grants ceiling
  };
  absl::flat_hash_map<uint64_t, GrantEntry> grants_ ABSL_GUARDED_BY(mu_);
  struct TicketEntry {
    uint64_t session;
    uint64_t export_id;
    backend::MemoryRef memory;
    shared::UniqueFd fd;  // made at export, moved out at redemption
    ChargeRef charge;     // the tenant's exports ceiling
    absl::Time deadline;
    bool used = false;    // spent: holds nothing, kept to name the refusal
    bool expired = false; // spent by the clock, not by a redemption
    bool tracked = false; // `fd` is a description of its own (see Retire)
  };
  absl::flat_hash_map<std::string, TicketEntry> tickets_ ABSL_GUARDED_BY(mu_);
  // Drops the descriptor, memory and charge of expired tickets and forgets
  // spent ones a minute past their deadline (or all spent ones past
  // kMaxTicketTombstones).
  void SweepTicketsLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Redeemed exports their session no longer holds (released, or the
  // session closed) while a process may still hold the descriptor: tracked
  // ones until the kernel says every exported description is gone (probed
  // at release and then every housekeeping round), untracked ones by the pid
  // that received them, until it exits.
  struct Detached {
    std::string tenant;
    ExportEntry entry;
  };
  std::vector<Detached> lingering_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<pid_t, std::vector<Detached>> detached_
      ABSL_GUARDED_BY(mu_);
  // Hands an export its session let go of to the rules above.
  void Retire(ExportEntry entry, const std::string& tenant, pid_t pid);
  void ProbeLingering();
  void ProcessExited(pid_t pid);
  // Drops the grants of `memory` (null: every grant of `owner_session`).
  void RevokeGrantsOf(uint64_t owner_session, const backend::Memory* memory);

  std::map<std::string, uint64_t> refusals_ ABSL_GUARDED_BY(mu_);
  const absl::Duration remote_session_lease_;
  // Whether shm exports can be tracked to their last close on this kernel.
  const bool track_descriptions_;

  // Last: their threads call back into Core until they are destroyed, first.
  std::unique_ptr<ProcessWatcher> watcher_;
  std::unique_ptr<Ticker> housekeeper_;
};

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_CORE_CORE_H_
