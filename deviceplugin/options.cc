#include "deviceplugin/options.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace hrx::deviceplugin {
namespace {

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string Json(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

}  // namespace

absl::StatusOr<uint64_t> ParseBytes(const std::string& text) {
  static const std::vector<std::pair<const char*, uint64_t>> kSuffixes = {
      {"KiB", uint64_t{1} << 10},
      {"MiB", uint64_t{1} << 20},
      {"GiB", uint64_t{1} << 30},
      {"TiB", uint64_t{1} << 40},
  };
  absl::string_view number = text;
  uint64_t scale = 1;
  for (const auto& [suffix, factor] : kSuffixes) {
    if (absl::ConsumeSuffix(&number, suffix)) scale = factor;
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(number, &value) || value == 0 ||
      value > UINT64_MAX / scale) {
    return Invalid(absl::StrFormat(
        "\"%s\" is not a positive byte count. Fix: write e.g. 1GiB, 512MiB "
        "or 1073741824.",
        text));
  }
  return value * scale;
}

absl::Status CheckOptions(const PluginOptions& options) {
  for (const std::string* path :
       {&options.hrxd_socket, &options.kubelet_socket, &options.plugin_socket,
        &options.pod_resources_socket, &options.container_socket_dir}) {
    if (!absl::StartsWith(*path, "/")) {
      return Invalid(absl::StrFormat(
          "%s is not an absolute path. Fix: pass absolute paths.", *path));
    }
  }
  if (Directory(options.plugin_socket) != Directory(options.kubelet_socket)) {
    return Invalid(absl::StrFormat(
        "--plugin_socket=%s is not in the kubelet's directory %s: the kubelet "
        "finds plugins by name there. Fix: put it beside --kubelet_socket.",
        options.plugin_socket, Directory(options.kubelet_socket)));
  }
  const std::string& name = options.resource_name;
  const size_t slash = name.find('/');
  bool valid = slash != std::string::npos && slash > 0 &&
               slash + 1 < name.size() &&
               name.find('/', slash + 1) == std::string::npos &&
               name.substr(0, slash).find('.') != std::string::npos &&
               !absl::EndsWith(name.substr(0, slash), "kubernetes.io");
  for (const char c : name) {
    valid = valid && (absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                      c == '.' || c == '-' || c == '/' || c == '_');
  }
  if (!valid) {
    return Invalid(absl::StrFormat(
        "--resource_name=%s is not an extended resource name. Fix: use "
        "DOMAIN/NAME with a domain of your own, e.g. hrx.dev/gpu-memory.",
        name));
  }
  if (options.unit_bytes == 0) {
    return Invalid("--unit is 0. Fix: pass a positive size, e.g. 1GiB.");
  }
  return absl::OkStatus();
}

std::string DescribeJson(const PluginOptions& options) {
  return absl::StrFormat(
      "{\"api_version\": %s, \"resource_name\": %s, \"unit_bytes\": %u, "
      "\"shared_bytes\": %u, \"kubelet_socket\": %s, \"plugin_socket\": %s, "
      "\"pod_resources_socket\": %s, \"hrxd_socket\": %s, "
      "\"container_socket_dir\": %s, \"container_socket\": %s, \"env\": %s, "
      "\"load_kernels\": %s, \"reconcile_ms\": %d, "
      "\"allocation_grace_ms\": %d}",
      Json(kApiVersion), Json(options.resource_name), options.unit_bytes,
      options.shared_bytes, Json(options.kubelet_socket),
      Json(options.plugin_socket), Json(options.pod_resources_socket),
      Json(options.hrxd_socket), Json(options.container_socket_dir),
      Json(options.container_socket()), Json(kSocketEnv),
      options.load_kernels ? "true" : "false",
      absl::ToInt64Milliseconds(options.reconcile_interval),
      absl::ToInt64Milliseconds(options.allocation_grace));
}

}  // namespace hrx::deviceplugin
