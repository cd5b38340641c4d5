// Control groups of executors: each executor runs in a group of its own with
// a task limit (threads: it can make no processes) and a memory limit, so
// what a tenant's kernel takes is capped per executor whatever uid the
// executor runs under (under the shipped unit, User=hrxd, every executor
// shares hrxd's uid, and a uid's process limit would be shared too).
//
// Where groups can be made:
//   - cgroup v2 (a unified /sys/fs/cgroup): hrxd's own group must be
//     delegated to it (the unit's Delegate=pids memory): hrxd moves itself
//     into a leaf `daemon` of it, enables pids and memory for the children,
//     and makes `executor-N` next to that leaf.
//   - cgroup v1 (separate pids and memory hierarchies): `hrxd-PID/executor-N`
//     under hrxd's own group of each hierarchy (hrxd as root).
// Tenants' own executors (those that run kernels) go one level down, in
// `tenants/executor-N`: that group's memory limit bounds them all together,
// so that several tenants at their own limits cannot fill the machine. The
// shared executor (it runs no tenant's code) stays outside it.
// Anything else (no pids controller, no permission): Open fails with why,
// and hrxd runs without them (a uid of each executor's own still gives a
// task limit per executor; docs/security.md says what is then shared).
//
// Prepare may run on several threads at once (executors start unlocked).
#ifndef HRX_DAEMON_EXECUTOR_EXECUTOR_CGROUPS_H_
#define HRX_DAEMON_EXECUTOR_EXECUTOR_CGROUPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace hrx::executor {

// What one executor's group allows.
struct CgroupLimits {
  uint64_t tasks = 0;         // threads of the executor, all told
  uint64_t memory_bytes = 0;  // 0: no memory limit
  // A tenant's own executor: in the `tenants` group, under its total.
  bool tenants_own = false;
};

class ExecutorCgroups {
 public:
  // Finds where hrxd may make groups (`root` is the cgroup file system's
  // mount, /sys/fs/cgroup outside tests) and makes hrxd's own parent group,
  // and in it the group of tenants' own executors, whose memory together is
  // capped at `tenants_memory_bytes` (0: no cap). FAILED_PRECONDITION with
  // why (and a Fix) when it cannot.
  static absl::StatusOr<std::unique_ptr<ExecutorCgroups>> Open(
      uint64_t tenants_memory_bytes,
      const std::string& root = "/sys/fs/cgroup");
  // Removes every group it made (each is empty once its executor is gone).
  ~ExecutorCgroups();

  ExecutorCgroups(const ExecutorCgroups&) = delete;
  ExecutorCgroups& operator=(const ExecutorCgroups&) = delete;

  // Makes (or reuses) the group of executor `index` with `limits`; returns
  // the cgroup.procs files the executor writes itself into ("0") before it
  // runs anything of a tenant's.
  absl::StatusOr<std::vector<std::string>> Prepare(uint32_t index,
                                                   const CgroupLimits& limits);
  // "cgroup v2 under /sys/fs/cgroup/...", for the start-up log line.
  std::string Describe() const;
  // Whether memory is controlled (v2: the memory controller was offered;
  // v1: there is a memory hierarchy): memory limits hold only then.
  bool caps_memory() const { return caps_memory_; }

 private:
  enum class Version { kV1, kV2 };
  ExecutorCgroups(Version version, std::vector<std::string> parents,
                  std::string own_leaf)
      : version_(version),
        parents_(std::move(parents)),
        own_leaf_(std::move(own_leaf)) {}
  static absl::StatusOr<std::unique_ptr<ExecutorCgroups>> OpenV2(
      const std::string& root, const std::string& own);
  static absl::StatusOr<std::unique_ptr<ExecutorCgroups>> OpenV1(
      const std::string& root, const std::vector<std::string>& lines);
  // Makes (or makes again) `tenants` in parent `i`, with the memory cap
  // where memory is controlled, and (v2) the controllers enabled for its
  // children.
  absl::Status MakeTenantsGroup(size_t i);
  bool MemoryHere(size_t parent) const {
    return version_ == Version::kV2 || parent == 1;
  }

  const Version version_;
  // v2: hrxd's delegated group. v1: hrxd-PID in the pids hierarchy, then in
  // the memory hierarchy when there is one.
  const std::vector<std::string> parents_;
  // v2: the leaf hrxd moved itself into (left as is at the end).
  const std::string own_leaf_;
  bool caps_memory_ = false;  // set once, in Open
  // The cap of the `tenants` groups (0: none); set once, in Open.
  uint64_t tenants_memory_bytes_ = 0;
  absl::Mutex mu_;
  // Executor groups, in the order made.
  std::vector<std::string> made_ ABSL_GUARDED_BY(mu_);
  // The `tenants` group of each parent (removed after their executors').
  std::vector<std::string> tenants_groups_ ABSL_GUARDED_BY(mu_);
};

// Writes "0" into each of `procs` (cgroup.procs files): the calling process
// joins those groups. For the executor, before it drops root.
absl::Status JoinCgroups(const std::vector<std::string>& procs);

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_EXECUTOR_CGROUPS_H_
