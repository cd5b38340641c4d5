"""libhrx's release and ABI versions (the Debian packages take the same)."""

# Equal to shared/version.h's kVersion, which hrxd reports (checked by
# //deploy:package_test).
LIBHRX_VERSION = "0.1.0"

# The soname's number: raised whenever the ABI changes incompatibly.
LIBHRX_SOVERSION = "0"

# The release's date (2026-12-03T00:00:00Z): every installed file carries it,
# so that the install tree and the packages are reproducible.
LIBHRX_RELEASE_EPOCH = "1796256000"
