// Fuzzes the decoder every hostile request passes through: the wire-shape
// check, the parse, and Caller's decoding of stream requests (batches of
// commands, reads, profiled launches), graph execs (nodes and their
// dispatches' launch shapes and constants) and kernel signatures.
//
// Input: one selector byte, then a message's wire bytes. Handles whose tag
// is 0 are sealed for the fuzzing session before decoding, so the decoder's
// checks past the seal are reached; every other handle must be refused.
//
// Checks: nothing crashes; a refusal carries a reason token from the
// catalogue; an accepted batch decodes to exactly its commands.
#include <cstdint>
#include <string>

#include "daemon/core/handle_authority.h"
#include "daemon/server/decode.h"
#include "daemon/stream/wire_shape.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/reflection.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "hrx/v1/common.pb.h"
#include "hrx/v1/graph.pb.h"
#include "hrx/v1/kernel.pb.h"
#include "hrx/v1/stream.pb.h"
#include "shared/handle.h"
#include "shared/refusal.h"
#include "tests/fuzz/fuzz_target.h"

namespace hrx::daemon {
namespace {

constexpr uint64_t kSession =
    shared::Handle{shared::HandleKind::kSession, 3, 1}.Encode();

const HandleAuthority& Authority() {
  static const auto* authority =
      new HandleAuthority(0x5eed, shared::SipKey{1, 2, 3, 4, 5, 6, 7, 8});
  return *authority;
}

// Seals every hrx.v1.Handle in `message` whose tag is 0.
void SealZeroTags(google::protobuf::Message& message, const Caller& caller) {
  const google::protobuf::Descriptor* type = message.GetDescriptor();
  const google::protobuf::Reflection* reflection = message.GetReflection();
  if (type == hrx::v1::Handle::descriptor()) {
    auto& handle = static_cast<hrx::v1::Handle&>(message);
    if (handle.tag() == 0) caller.Seal(handle.object(), &handle);
    return;
  }
  for (int i = 0; i < type->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = type->field(i);
    if (field->cpp_type() !=
        google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      continue;
    }
    if (field->is_repeated()) {
      for (int j = 0; j < reflection->FieldSize(message, field); ++j) {
        SealZeroTags(*reflection->MutableRepeatedMessage(&message, field, j),
                     caller);
      }
    } else if (reflection->HasField(message, field)) {
      SealZeroTags(*reflection->MutableMessage(&message, field), caller);
    }
  }
}

// A refusal is a catalogued reason, never a bare status.
void CheckRefusal(const absl::Status& status) {
  if (status.ok()) return;
  HRX_FUZZ_CHECK(ReasonOf(status).has_value());
}

template <typename Message>
bool Parse(const uint8_t* data, size_t size, Message* out) {
  grpc::Slice slice(data, size);
  grpc::ByteBuffer bytes(&slice, 1);
  const absl::Status parsed = ParseChecked(bytes, out);
  CheckRefusal(parsed);
  return parsed.ok();
}

void DecodeStreamRequest(const uint8_t* data, size_t size,
                         const Caller& caller) {
  hrx::v1::StreamRequest request;
  if (!Parse(data, size, &request)) return;
  SealZeroTags(request, caller);
  switch (request.op_case()) {
    case hrx::v1::StreamRequest::kBatch: {
      auto commands = caller.Commands(request.batch().commands());
      CheckRefusal(commands.status());
      if (commands.ok()) {
        HRX_FUZZ_CHECK(static_cast<int>(commands->size()) ==
                       request.batch().commands_size());
      }
      break;
    }
    case hrx::v1::StreamRequest::kRead:
      CheckRefusal(caller.View(request.read(), "read src").status());
      break;
    case hrx::v1::StreamRequest::kLaunchProfiled:
      CheckRefusal(caller
                       .Object(request.launch_profiled().exec(),
                               shared::HandleKind::kGraphExec, "launch")
                       .status());
      break;
    default:
      break;
  }
}

void DecodeGraph(const uint8_t* data, size_t size, const Caller& caller) {
  hrx::v1::CreateGraphExecRequest request;
  if (!Parse(data, size, &request)) return;
  SealZeroTags(request, caller);
  auto graph = caller.Graph(request);
  CheckRefusal(graph.status());
  if (graph.ok()) {
    HRX_FUZZ_CHECK(static_cast<int>(graph->nodes.size()) ==
                   request.nodes_size());
  }
}

void DecodeKernelSignature(const uint8_t* data, size_t size) {
  hrx::v1::KernelSignature signature;
  if (!Parse(data, size, &signature)) return;
  auto decoded = DecodeSignature(signature);
  CheckRefusal(decoded.status());
  if (!decoded.ok()) return;
  // What the daemon accepted it can describe, and that reads back the same.
  hrx::v1::KernelSignature encoded;
  EncodeSignature(*decoded, &encoded);
  auto again = DecodeSignature(encoded);
  HRX_FUZZ_CHECK(again.ok());
  hrx::v1::KernelSignature reencoded;
  EncodeSignature(*again, &reencoded);
  HRX_FUZZ_CHECK(encoded.SerializeAsString() == reencoded.SerializeAsString());
}

}  // namespace
}  // namespace hrx::daemon

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hrx::daemon;
  if (size == 0) return 0;
  const Caller caller(Authority(), kSession);
  switch (data[0] % 3) {
    case 0:
      DecodeStreamRequest(data + 1, size - 1, caller);
      break;
    case 1:
      DecodeGraph(data + 1, size - 1, caller);
      break;
    default:
      DecodeKernelSignature(data + 1, size - 1);
      break;
  }
  return 0;
}
