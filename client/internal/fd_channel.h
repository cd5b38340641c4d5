// The client end of the descriptor side channel: redeems an export ticket
// for the descriptor it names (see daemon/server/fd_channel.h).
#ifndef HRX_CLIENT_INTERNAL_FD_CHANNEL_H_
#define HRX_CLIENT_INTERNAL_FD_CHANNEL_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "shared/unique_fd.h"

namespace hrx::client::internal {

absl::StatusOr<shared::UniqueFd> RedeemTicket(const std::string& fd_socket,
                                              std::string_view ticket);

}  // namespace hrx::client::internal

#endif  // HRX_CLIENT_INTERNAL_FD_CHANNEL_H_
