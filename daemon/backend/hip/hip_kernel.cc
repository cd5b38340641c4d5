#include "daemon/backend/hip/hip_kernel.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/backend/hip/hip_memory.h"
#include "daemon/backend/hip/hip_status.h"
#include "hrx/gpu_kernel.h"
#include "shared/refusal.h"

namespace hrx::backend {
namespace {

static_assert(HRX_GPU_ARG_SCALAR == static_cast<int>(ArgKind::kScalar) &&
              HRX_GPU_ARG_BUFFER == static_cast<int>(ArgKind::kBuffer));

absl::Status Refuse(const std::string& entry, const std::string& why,
                    const std::string& fix) {
  return Refusal(
      Reason::kBadKernel,
      absl::StrFormat("load kernel %s: %s. Fix: %s", entry, why, fix));
}

constexpr char kInfoFix[] =
    "declare the kernel with HRX_GPU_KERNEL_INFO from hrx/gpu_kernel.h";

absl::StatusOr<KernelSignature> ReadSignature(const std::string& entry,
                                              const hrx_gpu_kernel_info& info) {
  if (info.abi != HRX_GPU_KERNEL_ABI) {
    return Refuse(entry,
                  absl::StrFormat("%s_hrx_info declares ABI %u; this daemon "
                                  "runs ABI %u",
                                  entry, info.abi, HRX_GPU_KERNEL_ABI),
                  kInfoFix);
  }
  if (info.arg_count > HRX_GPU_MAX_ARGS) {
    return Refuse(entry,
                  absl::StrFormat("%s_hrx_info declares %u arguments (at "
                                  "most %u)",
                                  entry, info.arg_count, HRX_GPU_MAX_ARGS),
                  kInfoFix);
  }
  KernelSignature signature;
  for (int d = 0; d < 3; ++d)
    signature.workgroup_size[d] = info.workgroup_size[d];
  for (uint32_t i = 0; i < info.arg_count; ++i) {
    const uint8_t kind = info.arg_kinds[i];
    const uint8_t size = info.arg_sizes[i];
    const std::optional<KernelArg> declared = shared::DeclaredArg(kind, size);
    if (!declared) {
      return Refuse(entry,
                    absl::StrFormat("argument %u has kind %u and size %u; "
                                    "scalars are 4 or 8 bytes, buffers 0",
                                    i, kind, size),
                    kInfoFix);
    }
    signature.args.push_back(*declared);
  }
  return signature;
}

uint32_t CompiledSize(const KernelArg& arg) {
  return arg.kind == ArgKind::kBuffer ? sizeof(hrx_gpu_buffer) : arg.size;
}

// The layout the module compiled, checked against the declaration where the
// runtime reports it; otherwise the C layout of the declared parameters.
absl::StatusOr<std::vector<ParamSlot>> ParamLayout(
    const std::string& entry, hipFunction_t function,
    const KernelSignature& signature) {
  std::vector<ParamSlot> slots;
  size_t offset = 0;
  size_t size = 0;
  const hipError_t probe =
      hip_platform::KernelParamInfo(function, 0, &offset, &size);
  if (probe == hipErrorNotSupported) {
    uint32_t next = 0;
    for (const KernelArg& arg : signature.args) {
      const uint32_t bytes = CompiledSize(arg);
      const uint32_t align = std::min<uint32_t>(bytes, 8);
      next = (next + align - 1) / align * align;
      slots.push_back({next, bytes});
      next += bytes;
    }
    return slots;
  }
  const size_t declared = signature.args.size();
  for (size_t i = 0; i <= declared; ++i) {
    const hipError_t found =
        hip_platform::KernelParamInfo(function, i, &offset, &size);
    if (i == declared) {
      if (found == hipSuccess) {
        return Refuse(entry,
                      absl::StrFormat("the module's %s takes more than the %u "
                                      "parameters %s_hrx_info declares",
                                      entry, declared, entry),
                      "make the declaration list every parameter");
      }
      break;
    }
    if (found != hipSuccess) {
      return Refuse(entry,
                    absl::StrFormat("the module's %s takes %u parameters; "
                                    "%s_hrx_info declares %u",
                                    entry, i, entry, declared),
                    "make the declaration match the kernel's parameters");
    }
    const KernelArg& arg = signature.args[i];
    if (size != CompiledSize(arg)) {
      return Refuse(
          entry,
          absl::StrFormat(
              "kernel_layout_mismatch: parameter %u is %u bytes in the "
              "module, but %s_hrx_info declares a %s (%u bytes)",
              i, size, entry,
              arg.kind == ArgKind::kBuffer ? "buffer (hrx_gpu_buffer)"
                                           : "scalar",
              CompiledSize(arg)),
          "declare buffers as hrx_gpu_buffer parameters and scalars with "
          "their exact size");
    }
    slots.push_back(
        {static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
  }
  return slots;
}

}  // namespace

absl::StatusOr<std::shared_ptr<HipKernel>> HipKernel::Load(
    int device, std::string_view code, const std::string& entry,
    std::shared_ptr<HipReclaimer> reclaimer) {
  if (entry.empty()) {
    return Refuse("\"\"", "the entry name is empty",
                  "name the kernel's extern \"C\" __global__ function");
  }
  HRX_RETURN_IF_ERROR(BindDevice(device));
  // Aligned and NUL-terminated: the runtime also accepts text (PTX), which
  // it reads up to a terminator.
  std::vector<uint64_t> image(code.size() / sizeof(uint64_t) + 2, 0);
  std::memcpy(image.data(), code.data(), code.size());
  hipModule_t module = nullptr;
  const hipError_t loaded = hipModuleLoadData(&module, image.data());
  if (loaded != hipSuccess) {
    return Refuse(entry,
                  absl::StrCat("the code object does not load on this GPU (",
                               hipGetErrorName(loaded), ": ",
                               hipGetErrorString(loaded), ")"),
                  "send a code object (cubin or AMD code object) built for "
                  "the daemon's target (hrxctl status shows it)");
  }
  auto fail = [&](absl::Status status) {
    (void)hipModuleUnload(module);
    return status;
  };
  hipFunction_t function = nullptr;
  if (hipModuleGetFunction(&function, module, entry.c_str()) != hipSuccess) {
    return fail(Refuse(entry, absl::StrCat("the object exports no ", entry),
                       absl::StrCat("define extern \"C\" __global__ ", entry)));
  }
  const std::string info_name = absl::StrCat(entry, "_hrx_info");
  hipDeviceptr_t info_address = nullptr;
  size_t info_bytes = 0;
  if (hipModuleGetGlobal(&info_address, &info_bytes, module,
                         info_name.c_str()) != hipSuccess) {
    return fail(Refuse(entry, absl::StrCat("the object exports no ", info_name),
                       kInfoFix));
  }
  hrx_gpu_kernel_info info{};
  if (info_bytes != sizeof(info)) {
    return fail(Refuse(entry,
                       absl::StrFormat("%s is %u bytes, not the %u of "
                                       "hrx_gpu_kernel_info",
                                       info_name, info_bytes, sizeof(info)),
                       kInfoFix));
  }
  if (absl::Status read =
          HipStatus(hipMemcpyDtoH(&info, info_address, sizeof(info)),
                    absl::StrCat("read ", info_name), "hipMemcpyDtoH",
                    "check the GPU's health (hrxctl status)");
      !read.ok()) {
    return fail(read);
  }
  auto signature = ReadSignature(entry, info);
  if (!signature.ok()) return fail(signature.status());
  auto params = ParamLayout(entry, function, *signature);
  if (!params.ok()) return fail(params.status());
  uint32_t param_bytes = 0;
  for (const ParamSlot& slot : *params) {
    param_bytes = std::max(param_bytes, slot.offset + slot.size);
  }
  return std::shared_ptr<HipKernel>(
      new HipKernel(module, function, entry, *std::move(signature),
                    *std::move(params), param_bytes, std::move(reclaimer)));
}

HipKernel::HipKernel(hipModule_t module, hipFunction_t function,
                     std::string entry, KernelSignature signature,
                     std::vector<ParamSlot> params, uint32_t param_bytes,
                     std::shared_ptr<HipReclaimer> reclaimer)
    : module_(module),
      function_(function),
      entry_(std::move(entry)),
      signature_(std::move(signature)),
      params_(std::move(params)),
      param_bytes_(param_bytes),
      reclaimer_(std::move(reclaimer)) {}

HipKernel::~HipKernel() {
  reclaimer_->Defer([module = module_] { (void)hipModuleUnload(module); });
}

PackedParams HipKernel::Pack(const DispatchArgs& dispatch) const {
  PackedParams packed;
  packed.block.assign(param_bytes_, 0);
  packed.pointers.reserve(params_.size());
  size_t constant = 0;
  size_t binding = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    uint8_t* slot = packed.block.data() + params_[i].offset;
    const KernelArg& arg = signature_.args[i];
    if (arg.kind == ArgKind::kScalar) {
      std::memcpy(slot, dispatch.constants.data() + constant, arg.size);
      constant += arg.size;
    } else {
      const BoundBuffer& bound = dispatch.bindings[binding++];
      const hrx_gpu_buffer buffer = {DeviceAddress(*bound.memory, bound.offset),
                                     bound.length};
      std::memcpy(slot, &buffer, sizeof(buffer));
    }
    packed.pointers.push_back(slot);
  }
  return packed;
}

std::shared_ptr<const PackedParams> HipKernel::PackedFor(
    const DispatchArgs& dispatch) const {
  auto pack = [&] {
    return std::make_shared<const PackedParams>(Pack(dispatch));
  };
  if (!dispatch.cached) return pack();
  auto kept = dispatch.prepared.GetOrMake<PackedParams>(
      this, [&]() -> absl::StatusOr<std::shared_ptr<const PackedParams>> {
        return pack();
      });
  // Another backend's form is in the slot (never so in one process today).
  if (!kept.ok() || *kept == nullptr) return pack();
  return *std::move(kept);
}

}  // namespace hrx::backend
