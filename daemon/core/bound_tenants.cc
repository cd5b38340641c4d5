#include "daemon/core/bound_tenants.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "shared/quote.h"
#include "shared/refusal.h"

namespace hrx::daemon {
namespace {

bool LabelChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
         c == '_' || c == '/' || c == '-';
}

}  // namespace

absl::Status CheckBoundTenantName(const std::string& name) {
  auto inner = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  };
  bool valid = !name.empty() && name.size() <= kMaxBoundTenantNameBytes &&
               name.front() != '-' && name.back() != '-';
  for (const char c : name) valid = valid && inner(c);
  if (valid) return absl::OkStatus();
  return Refusal(
      Reason::kBadTenantName,
      absl::StrFormat("bound tenant name %s (%u bytes) is not a DNS label. "
                      "Fix: use 1 to %u lower-case letters, digits and '-', "
                      "starting and ending with a letter or digit.",
                      shared::QuoteForMessage(name), name.size(),
                      kMaxBoundTenantNameBytes));
}

absl::Status CheckLabels(const Labels& labels) {
  if (labels.size() > kMaxBoundTenantLabels) {
    return Refusal(Reason::kBadLabel,
                   absl::StrFormat("%u labels; a bound tenant takes at most "
                                   "%u. Fix: send fewer labels.",
                                   labels.size(), kMaxBoundTenantLabels));
  }
  for (const auto& [key, value] : labels) {
    bool key_valid = !key.empty() && key.size() <= kMaxLabelKeyBytes;
    for (const char c : key) key_valid = key_valid && LabelChar(c);
    if (!key_valid) {
      return Refusal(
          Reason::kBadLabel,
          absl::StrFormat("label key %s (%u bytes) is not allowed. Fix: use "
                          "1 to %u bytes of letters, digits and . _ / -.",
                          shared::QuoteForMessage(key), key.size(),
                          kMaxLabelKeyBytes));
    }
    bool value_valid = value.size() <= kMaxLabelValueBytes;
    for (const char c : value) {
      value_valid =
          value_valid && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
    }
    if (!value_valid) {
      return Refusal(
          Reason::kBadLabel,
          absl::StrFormat("label %s: its value (%u bytes) is too long or "
                          "holds control characters. Fix: send at most %u "
                          "bytes of printable text.",
                          shared::QuoteForMessage(key), value.size(),
                          kMaxLabelValueBytes));
    }
  }
  return absl::OkStatus();
}

absl::Status BoundTenantRemoved(const std::string& name,
                                const std::string& what) {
  return Refusal(Reason::kTenantRemoved,
                 absl::StrFormat("%s: this connection came through the socket "
                                 "of bound tenant \"%s\", which has been "
                                 "removed. Fix: ask the operator (or the "
                                 "device plugin) for a new tenant.",
                                 what, name));
}

}  // namespace hrx::daemon
