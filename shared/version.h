#ifndef HRX_SHARED_VERSION_H_
#define HRX_SHARED_VERSION_H_

namespace hrx::shared {

inline constexpr char kVersion[] = "0.1.0";

}  // namespace hrx::shared

#endif  // HRX_SHARED_VERSION_H_
