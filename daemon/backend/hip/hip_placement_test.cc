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

TEST(HipPlacementTest, DeviceBuffersOfAnIntegratedDeviceAreCachedHostPages) {
  EXPECT_EQ(PlaceAllocation(MemoryKind::kDevice, Device(true)),
            HipPlacement::kCachedHostPages);
}

TEST(HipPlacementTest, DeviceBuffersOfADiscreteDeviceAreDeviceAllocations) {
  EXPECT_EQ(PlaceAllocation(MemoryKind::kDevice, Device(false)),
            HipPlacement::kDeviceAllocation);
}

TEST(HipPlacementTest, SharedBuffersAreCoherentHostPagesOnEveryDevice) {
  EXPECT_EQ(PlaceAllocation(MemoryKind::kHostCoherent, Device(false)),
            HipPlacement::kCoherentHostPages);
  EXPECT_EQ(PlaceAllocation(MemoryKind::kHostCoherent, Device(true)),
            HipPlacement::kCoherentHostPages);
}

TEST(HipPlacementTest, ImportsAreHostPagesOfTheBuffersGrain) {
  EXPECT_EQ(PlaceImport(MemoryKind::kHostCoherent),
            HipPlacement::kCoherentHostPages);
  EXPECT_EQ(PlaceImport(MemoryKind::kDevice), HipPlacement::kCachedHostPages);
}

}  // namespace
}  // namespace hrx::backend
