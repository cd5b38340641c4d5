// The work of the rings an executor serves, as it reports it to hrxd with
// each ping's answer (hrxd adds it to its status): one encoding for both
// ends.
#ifndef HRX_DAEMON_EXECUTOR_WORK_REPORT_H_
#define HRX_DAEMON_EXECUTOR_WORK_REPORT_H_

#include "daemon/core/types.h"
#include "hrx/executor/v1/executor.pb.h"

namespace hrx::executor {

void EncodeWork(const daemon::WorkTotals& work,
                hrx::executor::v1::WorkTotals* out);
daemon::WorkTotals DecodeWork(const hrx::executor::v1::WorkTotals& work);

}  // namespace hrx::executor

#endif  // HRX_DAEMON_EXECUTOR_WORK_REPORT_H_
