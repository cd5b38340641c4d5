// Measures a serialized request before it is parsed. Protobuf turns a few
// wire bytes into a much larger object (an empty message is 2 bytes on the
// wire and ~100 in memory), so a 16 MiB request of millions of tiny
// elements would cost the daemon gigabytes to decode only to be refused.
// The methods that take large requests are served raw: their bytes are
// walked here, with the message's descriptor, counting every element of a
// repeated field and every nested message, and refused past the limit
// before anything is materialised.
#ifndef HRX_DAEMON_STREAM_WIRE_SHAPE_H_
#define HRX_DAEMON_STREAM_WIRE_SHAPE_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace hrx::daemon {

// Elements (repeated-field entries and nested messages) one request may
// hold. A full legal batch (4096 commands of dispatches with bindings)
// stays well below it.
inline constexpr size_t kMaxRequestElements = 256 * 1024;

// Counts the elements of `bytes` read as a `type`. INVALID_ARGUMENT
// "request_too_complex" past `limit`, "malformed_request" when the bytes
// are not such a message.
absl::Status CheckWireShape(const grpc::ByteBuffer& bytes,
                            const google::protobuf::Descriptor* type,
                            size_t limit = kMaxRequestElements);

// CheckWireShape, then parses `bytes` into `out`.
absl::Status ParseChecked(const grpc::ByteBuffer& bytes,
                          google::protobuf::Message* out,
                          size_t limit = kMaxRequestElements);

// As ParseChecked, for bytes in memory (a message off a stream's ring).
absl::Status ParseChecked(std::string_view bytes,
                          google::protobuf::Message* out,
                          size_t limit = kMaxRequestElements);
// Serializes `message` into `out` (a raw method's reply).
void SerializeInto(const google::protobuf::Message& message,
                   grpc::ByteBuffer* out);

}  // namespace hrx::daemon

#endif  // HRX_DAEMON_STREAM_WIRE_SHAPE_H_
