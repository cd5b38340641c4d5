"""hrx: the Python client of hrxd, the daemon that shares one GPU among the
processes of several tenants.

    import numpy as np
    import hrx

    with hrx.connect() as client:                 # $HRXD_SOCKET, else the default
        with client.device().stream() as stream:  # synchronizes when the block ends
            x = stream.allocate(4 * 1024)
            stream.upload(x, np.arange(1024, dtype=np.float32))
            print(stream.read(x, dtype=np.float32)[:4])

Buffers of shared placement (stream.allocate(n, shared=True)) map into the
process: buffer.map(dtype) is a numpy array over the very memory the device
uses, with no copy. Every refusal raises an hrx.Error subclass named after
its status code (hrx.NotFound, hrx.InvalidArgument, ...) whose `reason` is
the daemon's reason token, e.g. "stale_handle" (docs/protocol.md).
"""
import operator as _operator

import numpy as _np

from hrx import _hrx
from hrx._hrx import Buffer, Client, Device, Event, Graph, GraphExec, Kernel, Node, Stream, View

__all__ = [
    "connect", "constants", "Client", "Device", "Stream", "Buffer", "View",
    "Kernel", "Event", "Graph", "GraphExec", "Node", "Error",
]


class Error(Exception):
    """A call refused by hrxd or by libhrx.

    code: the canonical status code's name ("NOT_FOUND"); code_value: its
    number; reason: the reason token ("stale_handle"), empty when the
    refusal carries none; message: the daemon's message, ending "Fix: ...".
    """

    def __init__(self, code_value, code, reason, message):
        super().__init__(f"{code}" + (f" ({reason})" if reason else "") + f": {message}")
        self.code_value = code_value
        self.code = code
        self.reason = reason
        self.message = message

    def __reduce__(self):  # picklable, e.g. across a multiprocessing pool
        return (type(self), (self.code_value, self.code, self.reason, self.message))


def _error_class(name):
    return type(name, (Error,), {"__doc__": f"hrx.Error for status {name}."})


# One subclass per canonical status code, so callers can catch precisely.
_CODES = {
    1: "Cancelled", 2: "Unknown", 3: "InvalidArgument", 4: "DeadlineExceeded",
    5: "NotFound", 6: "AlreadyExists", 7: "PermissionDenied",
    8: "ResourceExhausted", 9: "FailedPrecondition", 10: "Aborted",
    11: "OutOfRange", 12: "Unimplemented", 13: "Internal", 14: "Unavailable",
    15: "DataLoss", 16: "Unauthenticated",
}
_BY_CODE = {}
for _value, _name in _CODES.items():
    _BY_CODE[_value] = globals()[_name] = _error_class(_name)
    __all__.append(_name)


def _make_error(code_value, code, reason, message):
    return _BY_CODE.get(code_value, Error)(code_value, code, reason, message)


_hrx._set_error_factory(_make_error)


def connect(socket="", name="", timeout=None):
    """A session with hrxd at `socket`, else $HRXD_SOCKET, else the default.

    timeout: seconds every blocking call may wait when not given its own
    (default 60). Use as a context manager, or call close().
    """
    return _hrx.connect(socket, name, timeout)


def constants(kernel, *values):
    """Packs a kernel's scalar arguments (little-endian, declaration order).

    numpy scalars keep their type (np.float32(2.5), np.uint64(7)); a Python
    int takes the width the kernel declares for that argument; a Python
    float needs a numpy type, since 4 and 8 bytes are both possible.
    """
    sizes = kernel.scalar_sizes
    if len(values) != len(sizes):
        raise InvalidArgument(3, "INVALID_ARGUMENT", "", (
            f"kernel {kernel.symbol} takes {len(sizes)} scalars, {len(values)} given. "
            "Fix: pass one value per scalar argument, in declaration order."))
    packed = b""
    for index, (value, size) in enumerate(zip(values, sizes)):
        if isinstance(value, _np.generic):
            data = value.tobytes()
        elif isinstance(value, (bool, float)):
            raise InvalidArgument(3, "INVALID_ARGUMENT", "", (
                f"scalar {index} of kernel {kernel.symbol} is a Python {type(value).__name__}. "
                "Fix: give it a numpy type, e.g. numpy.float32(x)."))
        else:
            number = _operator.index(value)
            low, high = (-(1 << (8 * size - 1)), (1 << (8 * size)) - 1)
            if not low <= number <= high:
                raise InvalidArgument(3, "INVALID_ARGUMENT", "", (
                    f"scalar {index} of kernel {kernel.symbol} is {number}, which does not fit "
                    f"its {size} bytes [{low}, {high}]. Fix: pass a value in that range."))
            data = number.to_bytes(size, "little", signed=number < 0)
        if len(data) != size:
            raise InvalidArgument(3, "INVALID_ARGUMENT", "", (
                f"scalar {index} of kernel {kernel.symbol} is {size} bytes, "
                f"the value given is {len(data)}. Fix: pass a {size}-byte numpy scalar."))
        packed += data
    return packed


def _packed(kernel, values):
    return values if isinstance(values, (bytes, bytearray, memoryview)) else constants(kernel, *values)


def _stream_dispatch(self, kernel, grid, block, constants=(), buffers=()):
    """Enqueues kernel over `grid` workgroups of `block` work-items.

    constants: the scalar arguments (see hrx.constants) or packed bytes;
    buffers: one Buffer or View per buffer argument, in declaration order.
    """
    self._dispatch(kernel, grid, block, _packed(kernel, constants), buffers)


def _graph_dispatch(self, kernel, grid, block, constants=(), buffers=(), after=()):
    """Records a dispatch node that runs after the nodes in `after`."""
    return self._dispatch(kernel, grid, block, _packed(kernel, constants), buffers, after)


Stream.dispatch = _stream_dispatch
Graph.dispatch = _graph_dispatch
