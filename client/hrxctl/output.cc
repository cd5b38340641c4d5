#include "client/hrxctl/output.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace hrxctl {

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "hrxctl: %s\n", std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kUnavailable ? kExitUnreachable
                                                         : kExitRefused;
}

int Usage(const char* text, const std::string& error) {
  if (!error.empty()) std::fprintf(stderr, "hrxctl: %s\n", error.c_str());
  std::fputs(text, stderr);
  return kExitUsage;
}

std::unique_ptr<hrx::v1::Admin::Stub> ConnectAdmin(
    const hrxctl::Target& target, grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  return hrx::v1::Admin::NewStub(target.Channel());
}

// Every field of a Usage or Budget, by name and in declaration order (an
// absent budget field is null: unlimited).
std::string FieldsJson(const google::protobuf::Message& message) {
  const auto* descriptor = message.GetDescriptor();
  const auto* reflection = message.GetReflection();
  std::string out = "{";
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    if (i != 0) out += ", ";
    const bool present =
        !field->has_presence() || reflection->HasField(message, field);
    out += absl::StrFormat(
        "\"%s\": %s", field->name(),
        present ? absl::StrCat(reflection->GetUInt64(message, field)) : "null");
  }
  return out + "}";
}

// Names come from clients: a control byte must never reach the operator's
// terminal (it could forge rows or recolour the screen). Shown as \xNN.
std::string Printable(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const unsigned char byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || c == '\\') {
      out += absl::StrFormat("\\x%02x", byte);
    } else {
      out += c;
    }
  }
  return out;
}

void PrintTable(std::vector<std::vector<std::string>> rows) {
  for (auto& row : rows) {
    for (std::string& cell : row) cell = Printable(cell);
  }
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line +=
          i + 1 == row.size()
              ? row[i]
              : absl::StrFormat("%-*s  ", static_cast<int>(widths[i]), row[i]);
    }
    std::printf("%s\n", line.c_str());
  }
}

bool ApplyBudgetField(const std::string& assignment, hrx::v1::Budget* budget) {
  std::vector<std::string> parts =
      absl::StrSplit(assignment, absl::MaxSplits('=', 1));
  const auto* field =
      parts.size() == 2
          ? hrx::v1::Budget::descriptor()->FindFieldByName(parts[0])
          : nullptr;
  uint64_t value = 0;
  if (field == nullptr ||
      (parts[1] != "unlimited" && !absl::SimpleAtoi(parts[1], &value))) {
    return false;
  }
  const auto* reflection = hrx::v1::Budget::GetReflection();
  if (parts[1] == "unlimited") {
    reflection->ClearField(budget, field);
  } else {
    reflection->SetUInt64(budget, field, value);
  }
  return true;
}

}  // namespace hrxctl
