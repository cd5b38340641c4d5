// The client end of the descriptor side channel: redeems an export ticket
// for the descriptor it names (see daemon/server/fd_channel.h). Sending and
// receiving end by `deadline` (DEADLINE_EXCEEDED, "deadline_exceeded").
#ifndef HRX_CLIENT_INTERNAL_FD_CHANNEL_H_
#define HRX_CLIENT_INTERNAL_FD_CHANNEL_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/unique_fd.h"

namespace hrx::client::internal {

// With `server_pid`, also the side channel's process (hrxd), as the kernel
// reports it.
absl::StatusOr<shared::UniqueFd> RedeemTicket(
    const std::string& fd_socket, std::string_view ticket,
    absl::Time deadline = absl::InfiniteFuture(), pid_t* server_pid = nullptr);

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_FD_CHANNEL_H_
