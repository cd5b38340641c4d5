#include "daemon/stream/wire_shape.h"

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "shared/refusal.h"
#include "shared/status_macros.h"

namespace hrx::daemon {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

absl::Status Malformed(size_t length, const Descriptor* type) {
  return Refusal(Reason::kMalformedRequest,
                 absl::StrFormat("%u bytes do not form a %s. Fix: send a "
                                 "serialized %s.",
                                 length, type->full_name(), type->full_name()));
}

// Walks one message's fields; false when the bytes are malformed.
class Walker {
 public:
  explicit Walker(size_t limit) : limit_(limit) {}

  bool Walk(CodedInputStream& in, const Descriptor* type, int depth) {
    if (depth > kMaxDepth) return false;
    while (true) {
      const uint32_t tag = in.ReadTag();
      if (tag == 0) return true;  // end of this message (or of its limit)
      const int number = WireFormatLite::GetTagFieldNumber(tag);
      const auto wire_type = WireFormatLite::GetTagWireType(tag);
      const FieldDescriptor* field =
          type == nullptr ? nullptr : type->FindFieldByNumber(number);
      if (field != nullptr && field->is_repeated() &&
          wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
          field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE &&
          field->cpp_type() != FieldDescriptor::CPPTYPE_STRING) {
        // A packed run of scalars: each varint (or fixed value) counts.
        uint32_t length = 0;
        if (!in.ReadVarint32(&length)) return false;
        std::string run;
        if (!in.ReadString(&run, static_cast<int>(length))) return false;
        size_t values = 0;
        for (char c : run) values += (static_cast<uint8_t>(c) & 0x80) == 0;
        if (!Count(values)) return true;
        continue;
      }
      if (field != nullptr &&
          field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
          wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        if (!Count(1)) return true;
        uint32_t length = 0;
        if (!in.ReadVarint32(&length)) return false;
        const auto previous = in.PushLimit(static_cast<int>(length));
        if (!Walk(in, field->message_type(), depth + 1)) return false;
        if (exceeded_) return true;
        if (!in.ConsumedEntireMessage()) return false;
        in.PopLimit(previous);
        continue;
      }
      if (field != nullptr && field->is_repeated() && !Count(1)) return true;
      if (!WireFormatLite::SkipField(&in, tag)) return false;
    }
  }

  bool exceeded() const { return exceeded_; }
  size_t counted() const { return counted_; }

 private:
  static constexpr int kMaxDepth = 32;

  bool Count(size_t n) {
    counted_ += n;
    if (counted_ > limit_) exceeded_ = true;
    return !exceeded_;
  }

  const size_t limit_;
  size_t counted_ = 0;
  bool exceeded_ = false;
};

}  // namespace

namespace {

absl::Status CheckShape(CodedInputStream& in, size_t length,
                        const Descriptor* type, size_t limit) {
  Walker walker(limit);
  const bool well_formed = walker.Walk(in, type, 0);
  if (walker.exceeded()) {
    return Refusal(
        Reason::kRequestTooComplex,
        absl::StrFormat(
            "a %s of %u bytes holds more than %u elements "
            "(repeated entries and nested messages); it was refused before "
            "decoding. Fix: split the request (see docs/limits.md).",
            type->name(), length, limit));
  }
  if (!well_formed || !in.ConsumedEntireMessage()) {
    return Malformed(length, type);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckWireShape(const grpc::ByteBuffer& bytes,
                            const Descriptor* type, size_t limit) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; the reader consumes
  grpc::ProtoBufferReader reader(&copy);
  CodedInputStream in(&reader);
  return CheckShape(in, bytes.Length(), type, limit);
}

absl::Status ParseChecked(std::string_view bytes,
                          google::protobuf::Message* out, size_t limit) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  CodedInputStream in(data, static_cast<int>(bytes.size()));
  HRX_RETURN_IF_ERROR(
      CheckShape(in, bytes.size(), out->GetDescriptor(), limit));
  if (!out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Malformed(bytes.size(), out->GetDescriptor());
  }
  return absl::OkStatus();
}

absl::Status ParseChecked(const grpc::ByteBuffer& bytes,
                          google::protobuf::Message* out, size_t limit) {
  if (absl::Status shape = CheckWireShape(bytes, out->GetDescriptor(), limit);
      !shape.ok()) {
    return shape;
  }
  grpc::ByteBuffer copy(bytes);
  grpc::ProtoBufferReader reader(&copy);
  if (!out->ParseFromZeroCopyStream(&reader)) {
    return Malformed(bytes.Length(), out->GetDescriptor());
  }
  return absl::OkStatus();
}

void SerializeInto(const google::protobuf::Message& message,
                   grpc::ByteBuffer* out) {
  bool own_buffer = false;
  (void)grpc::GenericSerialize<grpc::ProtoBufferWriter,
                               google::protobuf::Message>(message, out,
                                                          &own_buffer);
}

}  // namespace hrx::daemon
