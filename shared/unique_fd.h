// The descriptor owner hrxd and libhrx share; defined with libhrx's public
// headers (client/include/hrx/unique_fd.h) because libhrx hands descriptors
// to its callers.
#ifndef HRX_SHARED_UNIQUE_FD_H_
#define HRX_SHARED_UNIQUE_FD_H_

#include "hrx/unique_fd.h"

namespace hrx::shared {

using UniqueFd = ::hrx::UniqueFd;

}  // namespace hrx::shared

#endif  // HRX_SHARED_UNIQUE_FD_H_
