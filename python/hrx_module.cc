// The Python module hrx._hrx: libhrx's stream API bound with pybind11.
// hrx/__init__.py builds the Python idiom on it (exceptions by status code,
// constants packing); everything that touches the daemon is here.
//
// The GIL: every call into libhrx runs without it (any of them may wait on
// the daemon: an enqueue can send a full batch, a destructor frees a handle),
// and no Python object is touched while it is released: arguments are
// converted first, results after. A refusal becomes an hrx.Error subclass
// carrying the status code, the reason token and the message.
//
// Threads: a Stream or Client may be shared between Python threads. Each
// holds its libhrx object by shared_ptr and a mutex that serializes calls
// (libhrx's Stream is used from one thread at a time), and close() waits for
// a call in progress instead of destroying the object under it.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "hrx/client.h"
#include "shared/refusal.h"

namespace py = pybind11;

namespace {

// hrx.Error's factory, installed by hrx/__init__.py: (code, code_name,
// reason, message) -> an exception instance of the class for that code.
py::object& ErrorFactory() {
  static py::object* factory = new py::object();
  return *factory;
}

[[noreturn]] void Raise(const absl::Status& status) {
  py::object error = ErrorFactory()(
      static_cast<int>(status.code()), absl::StatusCodeToString(status.code()),
      std::string(hrx::ReasonToken(status)), std::string(status.message()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())),
                  error.ptr());
  throw py::error_already_set();
}

[[noreturn]] void RaiseInvalid(const std::string& message) {
  Raise(absl::InvalidArgumentError(message));
}

void Ok(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Ok(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

// Runs `call` without the GIL.
template <typename Call>
auto Unlocked(Call&& call) {
  py::gil_scoped_release release;
  return call();
}

// pybind11 holders whose deleter releases the GIL: destroying a Buffer,
// Kernel, Mapping or GraphExec tells the daemon, which may take a while.
template <typename T>
struct UnlockedDelete {
  void operator()(T* object) const {
    if (object == nullptr) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      delete object;
    } else {
      delete object;
    }
  }
};
template <typename T>
using Holder = std::unique_ptr<T, UnlockedDelete<T>>;

std::string TypeName(const py::handle& value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

// A non-negative Python integer (anything with __index__) below `limit`.
uint64_t Unsigned(const py::handle& value, const char* what,
                  uint64_t limit = std::numeric_limits<uint64_t>::max()) {
  py::int_ number;
  try {
    number = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
    if (!number) throw py::error_already_set();
  } catch (const py::error_already_set&) {
    RaiseInvalid(absl::StrFormat(
        "%s is a %s, not an integer. Fix: pass an int.", what,
        TypeName(value)));
  }
  if (number < py::int_(0) || number > py::int_(limit)) {
    RaiseInvalid(absl::StrFormat(
        "%s is %s, outside [0, %u]. Fix: pass an integer in that range.", what,
        std::string(py::str(number)), limit));
  }
  return number.cast<uint64_t>();
}

// timeout in seconds; None waits the client's default_timeout.
absl::Time Deadline(std::optional<double> timeout) {
  if (!timeout) return hrx::kDefaultDeadline;
  return absl::Now() + absl::Seconds(*timeout);
}

// A dtype whose elements are plain bytes: not object references (raw
// device bytes written there would be taken for pointers), not empty.
py::dtype PlainDtype(const py::object& dtype) {
  py::dtype type = py::dtype::from_args(dtype);
  if (type.itemsize() == 0 || py::bool_(type.attr("hasobject"))) {
    RaiseInvalid(absl::StrFormat(
        "dtype %s holds %s. Fix: use a numeric dtype such as numpy.uint8 or "
        "numpy.float32.",
        std::string(py::str(py::object(type))),
        type.itemsize() == 0 ? "0-byte elements" : "Python object references"));
  }
  return type;
}

// A C-contiguous view of any object exposing the buffer protocol (numpy
// arrays, bytes, bytearray, memoryview), kept alive by `keep`.
std::span<const uint8_t> BytesOf(const py::object& data, py::object* keep) {
  *keep = py::module_::import("numpy").attr("ascontiguousarray")(data);
  PlainDtype(keep->attr("dtype"));
  py::buffer_info info = py::buffer(*keep).request();
  return {static_cast<const uint8_t*>(info.ptr),
          static_cast<size_t>(info.size * info.itemsize)};
}

// Where a Buffer or a View is accepted, a Buffer means all of it.
hrx::View ViewOf(const py::handle& target, const char* what = "the target") {
  if (py::isinstance<hrx::Buffer>(target)) {
    return target.cast<const hrx::Buffer&>().Binding();
  }
  if (py::isinstance<hrx::View>(target)) return target.cast<hrx::View>();
  RaiseInvalid(absl::StrFormat(
      "%s is a %s. Fix: pass an hrx.Buffer or an hrx.View (buffer.view()).",
      what, TypeName(target)));
}

std::vector<hrx::View> ViewsOf(const py::iterable& targets) {
  std::vector<hrx::View> views;
  for (const py::handle& target : targets) {
    views.push_back(ViewOf(target, "a buffer argument"));
  }
  return views;
}

std::vector<hrx::Node> NodesOf(const py::iterable& nodes) {
  std::vector<hrx::Node> out;
  for (const py::handle& node : nodes) {
    if (!py::isinstance<hrx::Node>(node)) {
      RaiseInvalid(absl::StrFormat(
          "`after` holds a %s. Fix: pass nodes this graph returned.",
          TypeName(node)));
    }
    out.push_back(node.cast<hrx::Node>());
  }
  return out;
}

// grid and block: an int or up to three ints, each in [1, 2^32).
hrx::Dim3 Dim3Of(const py::handle& value, const char* what) {
  hrx::Dim3 dims = {1, 1, 1};
  if (!py::isinstance<py::iterable>(value)) {
    dims[0] = static_cast<uint32_t>(Unsigned(value, what, UINT32_MAX));
    return dims;
  }
  const py::tuple items = py::tuple(py::reinterpret_borrow<py::object>(value));
  if (items.size() == 0 || items.size() > 3) {
    RaiseInvalid(absl::StrFormat(
        "%s has %u dimensions. Fix: give 1 to 3 sizes.", what, items.size()));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    dims[i] = static_cast<uint32_t>(Unsigned(items[i], what, UINT32_MAX));
  }
  return dims;
}

hrx::Constants ConstantsOf(const py::object& packed) {
  // Packed bytes are taken as they are: numpy makes an empty bytes object a
  // one-element array (one byte), which a kernel without scalars refuses.
  if (py::isinstance<py::bytes>(packed) ||
      py::isinstance<py::bytearray>(packed)) {
    py::buffer_info info = py::buffer(packed).request();
    return Ok(hrx::Constants::FromBytes(
        {static_cast<const uint8_t*>(info.ptr),
         static_cast<size_t>(info.size * info.itemsize)}));
  }
  py::object keep;
  std::span<const uint8_t> bytes = BytesOf(packed, &keep);
  return Ok(hrx::Constants::FromBytes(bytes));
}

// A libhrx object shared by Python threads: calls are serialized, close()
// waits for the call in progress.
template <typename T>
class Shared {
 public:
  explicit Shared(std::unique_ptr<T> object, const char* closed_message)
      : object_(std::move(object)), closed_message_(closed_message) {}
  ~Shared() { Close(); }

  // Runs `call(object)` without the GIL, after the calls before it.
  template <typename Call>
  auto Run(Call&& call) {
    std::shared_ptr<T> object = object_;  // under the GIL
    if (object == nullptr) Raise(absl::FailedPreconditionError(closed_message_));
    return Unlocked([&] {
      std::lock_guard<std::mutex> lock(*mu_);
      return call(*object);
    });
  }
  // Ends the object once no call is using it; later calls are refused.
  void Close() {
    std::shared_ptr<T> ending = std::move(object_);
    object_.reset();
    if (ending == nullptr) return;
    Unlocked([&] {
      std::lock_guard<std::mutex> lock(*mu_);
      ending.reset();  // a calling thread may still hold its own reference
      return 0;
    });
  }
  bool closed() const { return object_ == nullptr; }

 private:
  std::shared_ptr<T> object_;
  std::shared_ptr<std::mutex> mu_ = std::make_shared<std::mutex>();
  const char* closed_message_;
};

using PyClient = Shared<hrx::Client>;
using PyStream = Shared<hrx::Stream>;

constexpr char kClientClosed[] =
    "the client is closed. Fix: use it inside its `with` block, or connect "
    "again.";
constexpr char kStreamClosed[] =
    "the stream is closed. Fix: use it inside its `with` block, or create "
    "another.";

// How many `type` elements `bytes` bytes hold; a refusal naming both sizes
// when they do not divide (`what`: "range", "buffer"; `fix`: the remedy).
uint64_t ElementsOf(uint64_t bytes, const py::dtype& type, const char* what,
                    const char* fix) {
  const uint64_t item = static_cast<uint64_t>(type.itemsize());
  if (bytes % item != 0) {
    RaiseInvalid(absl::StrFormat(
        "a %u-byte %s is not a whole number of %u-byte %s elements. Fix: %s",
        bytes, what, item, std::string(py::str(py::object(type))), fix));
  }
  return bytes / item;
}

py::array Read(PyStream& self, const py::object& source,
               const py::object& dtype, std::optional<double> timeout) {
  const hrx::View view = ViewOf(source, "src");
  const py::dtype type = PlainDtype(dtype);
  const uint64_t count = ElementsOf(view.length(), type, "range",
                                    "read a view sized for the dtype.");
  py::array out = py::module_::import("numpy").attr("empty")(count, type);
  std::span<uint8_t> bytes(static_cast<uint8_t*>(out.mutable_data()),
                           view.length());
  Ok(self.Run([&](hrx::Stream& s) {
    return s.ReadBlocking(view, bytes, Deadline(timeout));
  }));
  return out;
}

void ReadInto(PyStream& self, const py::object& source, py::array out,
              std::optional<double> timeout) {
  const hrx::View view = ViewOf(source, "src");
  PlainDtype(out.attr("dtype"));
  if (!(out.flags() & py::array::c_style) || !out.writeable()) {
    RaiseInvalid(absl::StrFormat(
        "the destination (%u bytes, %s) is not a writable C-contiguous "
        "array. Fix: pass numpy.empty(...) or numpy.ascontiguousarray(...).",
        out.nbytes(), out.writeable() ? "writable" : "read-only"));
  }
  if (static_cast<uint64_t>(out.nbytes()) != view.length()) {
    RaiseInvalid(absl::StrFormat(
        "the destination holds %u bytes, the source %u. Fix: pass an array "
        "of exactly the source's size.",
        out.nbytes(), view.length()));
  }
  std::span<uint8_t> bytes(static_cast<uint8_t*>(out.mutable_data()),
                           static_cast<size_t>(out.nbytes()));
  Ok(self.Run([&](hrx::Stream& s) {
    return s.ReadBlocking(view, bytes, Deadline(timeout));
  }));
}

Holder<hrx::Kernel> LoadKernel(PyStream& self, const py::object& code,
                               const std::string& entry) {
  if (py::isinstance<py::str>(code) || py::hasattr(code, "__fspath__")) {
    const std::string path =
        py::str(py::module_::import("os").attr("fspath")(code));
    return Holder<hrx::Kernel>(new hrx::Kernel(Ok(self.Run(
        [&](hrx::Stream& s) { return s.LoadKernelFile(path, entry); }))));
  }
  py::object keep;
  std::span<const uint8_t> bytes = BytesOf(code, &keep);
  return Holder<hrx::Kernel>(new hrx::Kernel(
      Ok(self.Run([&](hrx::Stream& s) { return s.LoadKernel(bytes, entry); }))));
}

// The zero-copy array over a buffer's mapping: numpy.frombuffer over the
// Mapping, which the array keeps alive (unmapped when the last view goes).
py::array Map(const hrx::Buffer& buffer, const py::object& dtype) {
  const py::dtype type = PlainDtype(dtype);
  ElementsOf(buffer.bytes(), type, "buffer",
             "map it as a dtype that divides its size, or as uint8.");
  Holder<hrx::Mapping> mapping(new hrx::Mapping(
      Ok(Unlocked([&] { return buffer.Map(); }))));
  py::object owner = py::cast(std::move(mapping));
  return py::module_::import("numpy").attr("frombuffer")(owner, type);
}

template <typename T>
Holder<T> Held(T value) {
  return Holder<T>(new T(std::move(value)));
}

}  // namespace

PYBIND11_MODULE(_hrx, m) {
  m.doc() = "libhrx bound for Python; import hrx, not this module.";
  m.def("_set_error_factory",
        [](py::object factory) { ErrorFactory() = std::move(factory); });

  py::class_<hrx::View>(m, "View", "A checked byte range of a buffer.")
      .def_property_readonly("offset", &hrx::View::offset)
      .def_property_readonly("nbytes", &hrx::View::length)
      .def(
          "slice",
          [](const hrx::View& self, const py::object& offset,
             const py::object& length) {
            return Ok(self.Slice(Unsigned(offset, "offset"),
                                 Unsigned(length, "nbytes")));
          },
          py::arg("offset"), py::arg("nbytes"))
      .def("__repr__", [](const hrx::View& self) {
        return absl::StrFormat("<hrx.View offset=%u nbytes=%u>", self.offset(),
                               self.length());
      });

  py::class_<hrx::Mapping, Holder<hrx::Mapping>>(m, "Mapping",
                                                 py::buffer_protocol())
      .def_buffer([](hrx::Mapping& self) {
        return py::buffer_info(self.bytes().data(), 1,
                               py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(self.size())}, {1},
                               /*readonly=*/false);
      });

  py::class_<hrx::Buffer, Holder<hrx::Buffer>>(
      m, "Buffer", "Device memory owned by the daemon.")
      .def_property_readonly("nbytes", &hrx::Buffer::bytes)
      .def_property_readonly("allocation_id", &hrx::Buffer::allocation_id)
      .def(
          "view",
          [](const hrx::Buffer& self, const py::object& offset,
             const py::object& length) {
            const uint64_t start = Unsigned(offset, "offset");
            const uint64_t size =
                length.is_none() ? self.bytes() - std::min(start, self.bytes())
                                 : Unsigned(length, "nbytes");
            return Ok(self.Slice(start, size));
          },
          py::arg("offset") = 0, py::arg("nbytes") = py::none())
      .def("map", &Map, py::arg("dtype") = "uint8",
           "A numpy array over the buffer's memory, shared with the daemon "
           "(shared buffers only; docs/resident-handles.md for coherence).")
      .def("grant_to_session",
           [](const hrx::Buffer& self, const py::object& session) {
             const uint64_t id = Unsigned(session, "session");
             return Ok(Unlocked([&] { return self.GrantToSession(id); }));
           })
      .def("grant_to_tenant",
           [](const hrx::Buffer& self, const std::string& tenant) {
             return Ok(Unlocked([&] { return self.GrantToTenant(tenant); }));
           })
      .def("revoke",
           [](const hrx::Buffer& self, const py::object& grant) {
             const uint64_t id = Unsigned(grant, "grant");
             Ok(Unlocked([&] { return self.Revoke(id); }));
           })
      .def("free",
           [](hrx::Buffer& self) { Ok(Unlocked([&] { return self.Free(); })); })
      .def("__repr__", [](const hrx::Buffer& self) {
        return absl::StrFormat("<hrx.Buffer nbytes=%u>", self.bytes());
      });

  py::class_<hrx::Kernel, Holder<hrx::Kernel>>(m, "Kernel")
      .def_property_readonly("symbol", &hrx::Kernel::symbol)
      .def_property_readonly("constant_bytes",
                             [](const hrx::Kernel& self) {
                               return self.info().constant_byte_length;
                             })
      .def_property_readonly(
          "buffer_count",
          [](const hrx::Kernel& self) { return self.info().binding_count; })
      .def_property_readonly("scalar_sizes", [](const hrx::Kernel& self) {
        std::vector<uint32_t> sizes;  // scalars only, in declaration order
        for (const hrx::KernelArgument& argument : self.layout()) {
          if (argument.kind == 1) sizes.push_back(argument.size);
        }
        return sizes;
      });

  py::class_<hrx::Event, Holder<hrx::Event>>(m, "Event",
                                             "A point of a stream's timeline.")
      .def_property_readonly("id", &hrx::Event::id)
      .def(
          "is_complete",
          [](const hrx::Event& self, std::optional<double> timeout) {
            return Ok(
                Unlocked([&] { return self.IsComplete(Deadline(timeout)); }));
          },
          py::arg("timeout") = py::none())
      .def(
          "synchronize",
          [](const hrx::Event& self, std::optional<double> timeout) {
            Ok(Unlocked([&] { return self.Synchronize(Deadline(timeout)); }));
          },
          py::arg("timeout") = py::none());

  py::class_<hrx::Node>(m, "Node").def_readonly("index", &hrx::Node::index);
  py::class_<hrx::GraphExec, Holder<hrx::GraphExec>>(m, "GraphExec")
      .def_property_readonly("node_count", &hrx::GraphExec::node_count)
      .def("clear_failure", [](hrx::GraphExec& self) {
        Ok(Unlocked([&] { return self.ClearFailure(); }));
      });
  py::class_<hrx::Graph, Holder<hrx::Graph>>(
      m, "Graph", "Commands recorded once and replayed by launch().")
      .def_property_readonly("size", &hrx::Graph::size)
      .def(
          "fill",
          [](hrx::Graph& self, const py::object& dst, const py::object& value,
             const py::iterable& after) {
            const hrx::View view = ViewOf(dst, "dst");
            const auto byte = static_cast<uint8_t>(Unsigned(value, "value", 255));
            const std::vector<hrx::Node> nodes = NodesOf(after);
            return Ok(Unlocked([&] { return self.Fill(nodes, view, byte); }));
          },
          py::arg("dst"), py::arg("value"), py::arg("after") = py::tuple())
      .def(
          "copy",
          [](hrx::Graph& self, const py::object& dst, const py::object& src,
             const py::iterable& after) {
            const hrx::View to = ViewOf(dst, "dst"), from = ViewOf(src, "src");
            const std::vector<hrx::Node> nodes = NodesOf(after);
            return Ok(Unlocked([&] { return self.Copy(nodes, to, from); }));
          },
          py::arg("dst"), py::arg("src"), py::arg("after") = py::tuple())
      .def("_dispatch",
           [](hrx::Graph& self, const hrx::Kernel& kernel,
              const py::object& grid, const py::object& block,
              const py::object& constants, const py::iterable& buffers,
              const py::iterable& after) {
             const hrx::Dim3 g = Dim3Of(grid, "grid"), b = Dim3Of(block, "block");
             const hrx::Constants packed = ConstantsOf(constants);
             const std::vector<hrx::View> views = ViewsOf(buffers);
             const std::vector<hrx::Node> nodes = NodesOf(after);
             return Ok(Unlocked([&] {
               return self.Dispatch(nodes, kernel, g, b, packed, views);
             }));
           })
      .def(
          "join",
          [](hrx::Graph& self, const py::iterable& after) {
            const std::vector<hrx::Node> nodes = NodesOf(after);
            return Ok(Unlocked([&] { return self.Join(nodes); }));
          },
          py::arg("after"))
      .def("finish", [](hrx::Graph& self) {
        return Held(Ok(Unlocked([&] { return self.Finish(); })));
      });

  py::class_<PyStream>(m, "Stream", "An ordered timeline of device work.")
      .def("__enter__", [](PyStream& self) -> PyStream& { return self; })
      .def("__exit__",
           [](PyStream& self, const py::object& type, const py::object&,
              const py::object&) {
             // Leaving normally waits for the work; leaving by an exception
             // only ends the stream (hrxd drains it). Either way it ends.
             if (type.is_none() && !self.closed()) {
               absl::Status synced =
                   self.Run([](hrx::Stream& s) { return s.Synchronize(); });
               self.Close();
               Ok(synced);
             }
             self.Close();
             return false;
           })
      .def("close", &PyStream::Close)
      .def_property_readonly(
          "queue",
          [](PyStream& self) {
            return self.Run([](hrx::Stream& s) { return s.queue(); });
          })
      .def(
          "allocate",
          [](PyStream& self, const py::object& nbytes, bool zeroed,
             bool shared) {
            const uint64_t size = Unsigned(nbytes, "nbytes");
            return Held(Ok(self.Run([&](hrx::Stream& s) {
              return shared   ? s.AllocateShared(size)
                     : zeroed ? s.AllocateZeroed(size)
                              : s.Allocate(size);
            })));
          },
          py::arg("nbytes"), py::arg("zeroed") = false,
          py::arg("shared") = false,
          "Device memory; shared=True gives memory a client can map "
          "(zero-filled), zeroed=True device memory of zeros.")
      .def("import_grant",
           [](PyStream& self, const py::object& grant) {
             const uint64_t id = Unsigned(grant, "grant");
             return Held(
                 Ok(self.Run([&](hrx::Stream& s) { return s.Import(id); })));
           })
      .def("fill",
           [](PyStream& self, const py::object& dst, const py::object& value) {
             const hrx::View view = ViewOf(dst, "dst");
             const auto byte = static_cast<uint8_t>(Unsigned(value, "value", 255));
             Ok(self.Run([&](hrx::Stream& s) { return s.Fill(view, byte); }));
           })
      .def("copy",
           [](PyStream& self, const py::object& dst, const py::object& src) {
             const hrx::View to = ViewOf(dst, "dst"), from = ViewOf(src, "src");
             Ok(self.Run([&](hrx::Stream& s) { return s.Copy(to, from); }));
           })
      .def(
          "upload",
          [](PyStream& self, const py::object& dst, const py::object& data) {
            const hrx::View view = ViewOf(dst, "dst");
            py::object keep;
            std::span<const uint8_t> bytes = BytesOf(data, &keep);
            Ok(self.Run([&](hrx::Stream& s) { return s.Upload(view, bytes); }));
          },
          py::arg("dst"), py::arg("data"),
          "Writes the array's bytes at dst's start (copied before return).")
      .def("read", &Read, py::arg("src"), py::arg("dtype") = "uint8",
           py::arg("timeout") = py::none(),
           "A new numpy array of src's bytes, after all earlier work.")
      .def("read_into", &ReadInto, py::arg("src"), py::arg("out"),
           py::arg("timeout") = py::none())
      .def("load_kernel", &LoadKernel, py::arg("code"), py::arg("entry"),
           "A kernel from a path or from the code object's bytes.")
      .def("_dispatch",
           [](PyStream& self, const hrx::Kernel& kernel, const py::object& grid,
              const py::object& block, const py::object& constants,
              const py::iterable& buffers) {
             const hrx::Dim3 g = Dim3Of(grid, "grid"), b = Dim3Of(block, "block");
             const hrx::Constants packed = ConstantsOf(constants);
             const std::vector<hrx::View> views = ViewsOf(buffers);
             Ok(self.Run([&](hrx::Stream& s) {
               return s.Dispatch(kernel, g, b, packed, views);
             }));
           })
      .def("record_event",
           [](PyStream& self) {
             return Held(
                 Ok(self.Run([](hrx::Stream& s) { return s.RecordEvent(); })));
           })
      .def("wait_event",
           [](PyStream& self, const hrx::Event& event) {
             Ok(self.Run([&](hrx::Stream& s) { return s.WaitEvent(event); }));
           })
      .def("graph",
           [](PyStream& self) {
             return Held(self.Run([](hrx::Stream& s) { return s.BeginGraph(); }));
           })
      .def("launch",
           [](PyStream& self, const hrx::GraphExec& exec) {
             Ok(self.Run([&](hrx::Stream& s) { return s.Launch(exec); }));
           })
      .def(
          "flush",
          [](PyStream& self, std::optional<double> timeout) {
            Ok(self.Run(
                [&](hrx::Stream& s) { return s.Flush(Deadline(timeout)); }));
          },
          py::arg("timeout") = py::none())
      .def(
          "synchronize",
          [](PyStream& self, std::optional<double> timeout) {
            Ok(self.Run(
                [&](hrx::Stream& s) { return s.Synchronize(Deadline(timeout)); }));
          },
          py::arg("timeout") = py::none())
      .def(
          "is_idle",
          [](PyStream& self, std::optional<double> timeout) {
            return Ok(self.Run(
                [&](hrx::Stream& s) { return s.IsIdle(Deadline(timeout)); }));
          },
          py::arg("timeout") = py::none());

  py::class_<hrx::Device>(m, "Device")
      .def_property_readonly(
          "backend", [](const hrx::Device& d) { return d.info().backend; })
      .def_property_readonly("name",
                             [](const hrx::Device& d) { return d.info().name; })
      .def_property_readonly("target", &hrx::Device::target)
      .def_property_readonly(
          "memory_bytes",
          [](const hrx::Device& d) { return d.info().memory_bytes; })
      .def("stream", [](const hrx::Device& self) {
        auto stream = std::make_unique<hrx::Stream>(
            Ok(Unlocked([&] { return self.CreateStream(); })));
        return std::make_unique<PyStream>(std::move(stream), kStreamClosed);
      });

  py::class_<PyClient>(m, "Client", "A session with hrxd.")
      .def("__enter__", [](PyClient& self) -> PyClient& { return self; })
      .def("__exit__",
           [](PyClient& self, const py::object&, const py::object&,
              const py::object&) {
             self.Close();
             return false;
           })
      .def("close", &PyClient::Close)
      .def_property_readonly("session",
                             [](PyClient& self) {
                               return self.Run([](hrx::Client& c) {
                                 return c.session().session;
                               });
                             })
      .def_property_readonly("socket_path",
                             [](PyClient& self) {
                               return self.Run(
                                   [](hrx::Client& c) { return c.socket_path(); });
                             })
      .def(
          "device",
          [](PyClient& self, const py::object& index) {
            const int device = static_cast<int>(Unsigned(index, "index", INT32_MAX));
            return Ok(
                self.Run([&](hrx::Client& c) { return c.OpenDevice(device); }));
          },
          py::arg("index") = 0);

  m.def(
      "connect",
      [](const std::string& socket, const std::string& name,
         std::optional<double> timeout) {
        hrx::ConnectOptions options;
        options.socket_path = socket;
        options.client_name = name;
        if (timeout) options.default_timeout = absl::Seconds(*timeout);
        return std::make_unique<PyClient>(
            Ok(Unlocked([&] { return hrx::Client::Connect(options); })),
            kClientClosed);
      },
      py::arg("socket") = "", py::arg("name") = "",
      py::arg("timeout") = py::none());
}
