#include "daemon/backend/hip/hip_placement.h"

#include "gtest/gtest.h"

namespace hrx::backend {
namespace {

DeviceProperties Device(bool integrated) {
  DeviceProperties properties;
  properties.backend = "hip";
  properties.name = integrated ? "an APU (faked)" : "a discrete GPU (faked)";
  properties.integrated = integrated;
  return properties;
}

TEST(HipPlacementTest, DeviceBuffersOfAnIntegratedDeviceAreHostPages) {
  EXPECT_EQ(PlaceAllocation(MemoryKind::kDevice, Device(true)),
            HipPlacement::kRegisteredHostPages);
}

TEST(HipPlacementTest, DeviceBuffersOfADiscreteDeviceAreDeviceAllocations) {
  EXPECT_EQ(PlaceAllocation(MemoryKind::kDevice, Device(false)),
            HipPlacement::kDeviceAllocation);
}

TEST(HipPlacementTest, SharedBuffersAreHostPagesOnEveryDevice) {
  EXPECT_EQ(PlaceAllocation(MemoryKind::kHostCoherent, Device(false)),
            HipPlacement::kRegisteredHostPages);
  EXPECT_EQ(PlaceAllocation(MemoryKind::kHostCoherent, Device(true)),
            HipPlacement::kRegisteredHostPages);
}

}  // namespace
}  // namespace hrx::backend
