// The Python module hrx._hrx: libhrx's stream API bound with pybind11.
// hrx/__init__.py builds the Python idiom on it (exceptions by status code,
// constants packing); everything that touches the daemon is here.
//
// Every call that can wait (a round trip to hrxd, a blocking read) releases
// the GIL, so other Python threads run meanwhile. A refusal becomes an
// hrx.Error subclass carrying the status code, the reason token and the
// daemon's message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
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

void Ok(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Ok(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

// Runs `call` without the GIL: it may wait on the daemon.
template <typename Call>
auto Unlocked(Call&& call) {
  py::gil_scoped_release release;
  return call();
}

// timeout in seconds; None waits the client's default_timeout.
absl::Time Deadline(std::optional<double> timeout) {
  if (!timeout) return hrx::kDefaultDeadline;
  return absl::Now() + absl::Seconds(*timeout);
}

// A C-contiguous view of any object exposing the buffer protocol (numpy
// arrays, bytes, bytearray, memoryview), kept alive by `keep`.
std::span<const uint8_t> BytesOf(const py::object& data, py::object* keep) {
  *keep = py::module_::import("numpy").attr("ascontiguousarray")(data);
  py::buffer_info info = py::buffer(*keep).request();
  return {static_cast<const uint8_t*>(info.ptr),
          static_cast<size_t>(info.size * info.itemsize)};
}

// Where a Buffer or a View is accepted, a Buffer means all of it.
hrx::View ViewOf(const py::handle& target) {
  if (py::isinstance<hrx::Buffer>(target)) {
    return target.cast<const hrx::Buffer&>().Binding();
  }
  return target.cast<hrx::View>();
}

std::vector<hrx::View> ViewsOf(const py::sequence& targets) {
  std::vector<hrx::View> views;
  for (const py::handle& target : targets) views.push_back(ViewOf(target));
  return views;
}

std::vector<hrx::Node> NodesOf(const py::sequence& nodes) {
  std::vector<hrx::Node> out;
  for (const py::handle& node : nodes) out.push_back(node.cast<hrx::Node>());
  return out;
}

hrx::Constants ConstantsOf(const py::bytes& packed) {
  const std::string bytes = packed;
  return Ok(hrx::Constants::FromBytes(
      {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}));
}

// A client: a session with hrxd. close() (or leaving its `with` block) ends
// this reference; the session ends when its streams and buffers are gone.
class PyClient {
 public:
  explicit PyClient(std::unique_ptr<hrx::Client> client)
      : client_(std::move(client)) {}
  hrx::Client& get() {
    if (client_ == nullptr) {
      Raise(absl::FailedPreconditionError(
          "the client is closed. Fix: use it inside its `with` block, or "
          "connect again."));
    }
    return *client_;
  }
  template <typename Call>
  auto Unlocked(Call&& call) {
    hrx::Client& client = get();
    return ::Unlocked([&] { return call(client); });
  }
  void Close() { client_.reset(); }

 private:
  std::unique_ptr<hrx::Client> client_;
};

// A stream; leaving its `with` block synchronizes (unless an exception is
// leaving it) and ends the stream.
class PyStream {
 public:
  explicit PyStream(hrx::Stream stream) : stream_(std::move(stream)) {}
  hrx::Stream& get() {
    if (!stream_) {
      Raise(absl::FailedPreconditionError(
          "the stream is closed. Fix: use it inside its `with` block, or "
          "create another."));
    }
    return *stream_;
  }
  // Runs `call` on the stream without the GIL (the closed check first,
  // since raising needs the GIL).
  template <typename Call>
  auto Unlocked(Call&& call) {
    hrx::Stream& stream = get();
    return ::Unlocked([&] { return call(stream); });
  }
  void Close() {
    if (!stream_) return;
    std::optional<hrx::Stream> ending = std::move(stream_);
    stream_.reset();
    ::Unlocked([&] {
      ending.reset();  // sends pending commands; hrxd drains the stream
      return 0;
    });
  }

 private:
  std::optional<hrx::Stream> stream_;
};

py::array Read(PyStream& self, const py::object& source, const py::object& dtype,
               std::optional<double> timeout) {
  const hrx::View view = ViewOf(source);
  const py::dtype type = py::dtype::from_args(dtype);
  const uint64_t item = static_cast<uint64_t>(type.itemsize());
  if (view.length() % item != 0) {
    Raise(absl::InvalidArgumentError(absl::StrFormat(
        "a %u-byte range is not a whole number of %u-byte %s elements. Fix: "
        "read a view sized for the dtype.",
        view.length(), item, std::string(py::str(dtype)))));
  }
  py::array out = py::module_::import("numpy").attr("empty")(
      view.length() / item, type);
  std::span<uint8_t> bytes(static_cast<uint8_t*>(out.mutable_data()),
                           view.length());
  Ok(self.Unlocked([&](hrx::Stream& s) { return s.ReadBlocking(view, bytes, Deadline(timeout));
  }));
  return out;
}

void ReadInto(PyStream& self, const py::object& source, py::array out,
              std::optional<double> timeout) {
  const hrx::View view = ViewOf(source);
  if (!(out.flags() & py::array::c_style) || !out.writeable()) {
    Raise(absl::InvalidArgumentError(
        "the destination is not a writable C-contiguous array. Fix: pass "
        "numpy.empty(...) or numpy.ascontiguousarray(...)."));
  }
  std::span<uint8_t> bytes(static_cast<uint8_t*>(out.mutable_data()),
                           static_cast<size_t>(out.nbytes()));
  Ok(self.Unlocked([&](hrx::Stream& s) { return s.ReadBlocking(view, bytes, Deadline(timeout));
  }));
}

hrx::Kernel LoadKernel(PyStream& self, const py::object& code,
                       const std::string& entry) {
  if (py::isinstance<py::str>(code) ||
      py::hasattr(code, "__fspath__")) {
    const std::string path = py::str(
        py::module_::import("os").attr("fspath")(code));
    return Ok(self.Unlocked([&](hrx::Stream& s) { return s.LoadKernelFile(path, entry); }));
  }
  py::object keep;
  std::span<const uint8_t> bytes = BytesOf(code, &keep);
  return Ok(self.Unlocked([&](hrx::Stream& s) { return s.LoadKernel(bytes, entry); }));
}

// The zero-copy array over a buffer's mapping: numpy.frombuffer over the
// Mapping, which the array keeps alive (unmapped when the last view goes).
py::array Map(const hrx::Buffer& buffer, const py::object& dtype) {
  hrx::Mapping mapping = Ok(Unlocked([&] { return buffer.Map(); }));
  py::object owner = py::cast(std::move(mapping));
  return py::module_::import("numpy").attr("frombuffer")(owner, dtype);
}

}  // namespace

PYBIND11_MODULE(_hrx, m) {
  m.doc() = "libhrx bound for Python; import hrx, not this module.";
  m.def("_set_error_factory",
        [](py::object factory) { ErrorFactory() = std::move(factory); });

  py::class_<hrx::View>(m, "View", "A checked byte range of a buffer.")
      .def_property_readonly("offset", &hrx::View::offset)
      .def_property_readonly("nbytes", &hrx::View::length)
      .def("slice",
           [](const hrx::View& self, uint64_t offset, uint64_t length) {
             return Ok(self.Slice(offset, length));
           },
           py::arg("offset"), py::arg("nbytes"))
      .def("__repr__", [](const hrx::View& self) {
        return absl::StrFormat("<hrx.View offset=%u nbytes=%u>", self.offset(),
                               self.length());
      });

  py::class_<hrx::Mapping>(m, "Mapping", py::buffer_protocol())
      .def_buffer([](hrx::Mapping& self) {
        return py::buffer_info(self.bytes().data(), 1,
                               py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(self.size())}, {1},
                               /*readonly=*/false);
      });

  py::class_<hrx::Buffer>(m, "Buffer", "Device memory owned by the daemon.")
      .def_property_readonly("nbytes", &hrx::Buffer::bytes)
      .def_property_readonly("allocation_id", &hrx::Buffer::allocation_id)
      .def("view",
           [](const hrx::Buffer& self, uint64_t offset,
              std::optional<uint64_t> length) {
             return Ok(self.Slice(
                 offset, length.value_or(self.bytes() - std::min(offset, self.bytes()))));
           },
           py::arg("offset") = 0, py::arg("nbytes") = py::none())
      .def("map", &Map, py::arg("dtype") = "uint8",
           "A numpy array over the buffer's memory, shared with the daemon "
           "(shared buffers only; docs/resident-handles.md for coherence).")
      .def("grant_to_session",
           [](const hrx::Buffer& self, uint64_t session) {
             return Ok(Unlocked([&] { return self.GrantToSession(session); }));
           })
      .def("grant_to_tenant",
           [](const hrx::Buffer& self, const std::string& tenant) {
             return Ok(Unlocked([&] { return self.GrantToTenant(tenant); }));
           })
      .def("revoke",
           [](const hrx::Buffer& self, uint64_t grant) {
             Ok(Unlocked([&] { return self.Revoke(grant); }));
           })
      .def("free",
           [](hrx::Buffer& self) { Ok(Unlocked([&] { return self.Free(); })); })
      .def("__repr__", [](const hrx::Buffer& self) {
        return absl::StrFormat("<hrx.Buffer nbytes=%u>", self.bytes());
      });

  py::class_<hrx::Kernel>(m, "Kernel")
      .def_property_readonly("symbol", &hrx::Kernel::symbol)
      .def_property_readonly(
          "constant_bytes",
          [](const hrx::Kernel& self) { return self.info().constant_byte_length; })
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

  py::class_<hrx::Event>(m, "Event", "A point of a stream's timeline.")
      .def_property_readonly("id", &hrx::Event::id)
      .def("is_complete",
           [](const hrx::Event& self, std::optional<double> timeout) {
             return Ok(Unlocked([&] { return self.IsComplete(Deadline(timeout)); }));
           },
           py::arg("timeout") = py::none())
      .def("synchronize",
           [](const hrx::Event& self, std::optional<double> timeout) {
             Ok(Unlocked([&] { return self.Synchronize(Deadline(timeout)); }));
           },
           py::arg("timeout") = py::none());

  py::class_<hrx::Node>(m, "Node")
      .def_readonly("index", &hrx::Node::index);
  py::class_<hrx::GraphExec>(m, "GraphExec")
      .def_property_readonly("node_count", &hrx::GraphExec::node_count)
      .def("clear_failure", [](hrx::GraphExec& self) {
        Ok(Unlocked([&] { return self.ClearFailure(); }));
      });
  py::class_<hrx::Graph>(m, "Graph",
                         "Commands recorded once and replayed by launch().")
      .def_property_readonly("size", &hrx::Graph::size)
      .def("fill",
           [](hrx::Graph& self, const py::object& dst, uint8_t value,
              const py::sequence& after) {
             return Ok(self.Fill(NodesOf(after), ViewOf(dst), value));
           },
           py::arg("dst"), py::arg("value"), py::arg("after") = py::tuple())
      .def("copy",
           [](hrx::Graph& self, const py::object& dst, const py::object& src,
              const py::sequence& after) {
             return Ok(self.Copy(NodesOf(after), ViewOf(dst), ViewOf(src)));
           },
           py::arg("dst"), py::arg("src"), py::arg("after") = py::tuple())
      .def("_dispatch",
           [](hrx::Graph& self, const hrx::Kernel& kernel, hrx::Dim3 grid,
              hrx::Dim3 block, const py::bytes& constants,
              const py::sequence& buffers, const py::sequence& after) {
             const std::vector<hrx::View> views = ViewsOf(buffers);
             return Ok(self.Dispatch(NodesOf(after), kernel, grid, block,
                                     ConstantsOf(constants), views));
           })
      .def("join",
           [](hrx::Graph& self, const py::sequence& after) {
             return Ok(self.Join(NodesOf(after)));
           },
           py::arg("after"))
      .def("finish", [](hrx::Graph& self) {
        return Ok(Unlocked([&] { return self.Finish(); }));
      });

  py::class_<PyStream>(m, "Stream", "An ordered timeline of device work.")
      .def("__enter__", [](PyStream& self) -> PyStream& { return self; })
      .def("__exit__",
           [](PyStream& self, const py::object& type, const py::object&,
              const py::object&) {
             // Leaving normally waits for the work; leaving by an exception
             // only ends the stream (hrxd drains it).
             if (type.is_none()) {
               Ok(self.Unlocked([&](hrx::Stream& s) { return s.Synchronize(); }));
             }
             self.Close();
             return false;
           })
      .def("close", &PyStream::Close)
      .def_property_readonly("queue",
                             [](PyStream& self) { return self.get().queue(); })
      .def("allocate",
           [](PyStream& self, uint64_t nbytes, bool zeroed, bool shared) {
             return Ok(self.Unlocked([&](hrx::Stream& s) {
               return shared   ? s.AllocateShared(nbytes)
                      : zeroed ? s.AllocateZeroed(nbytes)
                               : s.Allocate(nbytes);
             }));
           },
           py::arg("nbytes"), py::arg("zeroed") = false,
           py::arg("shared") = false,
           "Device memory; shared=True gives memory a client can map "
           "(zero-filled), zeroed=True device memory of zeros.")
      .def("import_grant",
           [](PyStream& self, uint64_t grant) {
             return Ok(self.Unlocked([&](hrx::Stream& s) { return s.Import(grant); }));
           })
      .def("fill",
           [](PyStream& self, const py::object& dst, uint8_t value) {
             Ok(self.get().Fill(ViewOf(dst), value));
           })
      .def("copy",
           [](PyStream& self, const py::object& dst, const py::object& src) {
             Ok(self.get().Copy(ViewOf(dst), ViewOf(src)));
           })
      .def("upload",
           [](PyStream& self, const py::object& dst, const py::object& data) {
             py::object keep;
             std::span<const uint8_t> bytes = BytesOf(data, &keep);
             const hrx::View view = ViewOf(dst);
             Ok(self.Unlocked([&](hrx::Stream& s) { return s.Upload(view, bytes); }));
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
           [](PyStream& self, const hrx::Kernel& kernel, hrx::Dim3 grid,
              hrx::Dim3 block, const py::bytes& constants,
              const py::sequence& buffers) {
             const std::vector<hrx::View> views = ViewsOf(buffers);
             Ok(self.get().Dispatch(kernel, grid, block, ConstantsOf(constants),
                                    views));
           })
      .def("record_event",
           [](PyStream& self) { return Ok(self.get().RecordEvent()); })
      .def("wait_event",
           [](PyStream& self, const hrx::Event& event) {
             Ok(self.get().WaitEvent(event));
           })
      .def("graph", [](PyStream& self) { return self.get().BeginGraph(); })
      .def("launch",
           [](PyStream& self, const hrx::GraphExec& exec) {
             Ok(self.get().Launch(exec));
           })
      .def("flush",
           [](PyStream& self, std::optional<double> timeout) {
             Ok(self.Unlocked([&](hrx::Stream& s) { return s.Flush(Deadline(timeout)); }));
           },
           py::arg("timeout") = py::none())
      .def("synchronize",
           [](PyStream& self, std::optional<double> timeout) {
             Ok(self.Unlocked([&](hrx::Stream& s) { return s.Synchronize(Deadline(timeout)); }));
           },
           py::arg("timeout") = py::none())
      .def("is_idle",
           [](PyStream& self, std::optional<double> timeout) {
             return Ok(
                 self.Unlocked([&](hrx::Stream& s) { return s.IsIdle(Deadline(timeout)); }));
           },
           py::arg("timeout") = py::none());

  py::class_<hrx::Device>(m, "Device")
      .def_property_readonly("backend",
                             [](const hrx::Device& d) { return d.info().backend; })
      .def_property_readonly("name",
                             [](const hrx::Device& d) { return d.info().name; })
      .def_property_readonly("target", &hrx::Device::target)
      .def_property_readonly(
          "memory_bytes", [](const hrx::Device& d) { return d.info().memory_bytes; })
      .def("stream", [](const hrx::Device& self) {
        return PyStream(Ok(Unlocked([&] { return self.CreateStream(); })));
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
      .def_property_readonly(
          "session", [](PyClient& self) { return self.get().session().session; })
      .def_property_readonly(
          "socket_path", [](PyClient& self) { return self.get().socket_path(); })
      .def("device",
           [](PyClient& self, int index) {
             return Ok(self.Unlocked([&](hrx::Client& c) { return c.OpenDevice(index); }));
           },
           py::arg("index") = 0);

  m.def("connect",
        [](const std::string& socket, const std::string& name,
           std::optional<double> timeout) {
          hrx::ConnectOptions options;
          options.socket_path = socket;
          options.client_name = name;
          if (timeout) options.default_timeout = absl::Seconds(*timeout);
          return PyClient(
              Ok(Unlocked([&] { return hrx::Client::Connect(options); })));
        },
        py::arg("socket") = "", py::arg("name") = "",
        py::arg("timeout") = py::none());
}
