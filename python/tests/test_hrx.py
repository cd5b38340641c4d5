"""The Python package against a real hrxd (run_pytest.sh starts it)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import hrx


def test_upload_and_read_numpy_arrays(stream):
    data = np.arange(100_000, dtype=np.float32)
    buffer = stream.allocate(data.nbytes)
    stream.upload(buffer, data)
    assert np.array_equal(stream.read(buffer, dtype=np.float32), data)
    # A view: the second half, read as bytes and into an existing array.
    half = buffer.view(data.nbytes // 2)
    out = np.empty(data.size // 2, dtype=np.float32)
    stream.read_into(half, out)
    assert np.array_equal(out, data[data.size // 2:])


def test_fill_copy_and_views(stream):
    a = stream.allocate(4096, zeroed=True)
    b = stream.allocate(4096)
    stream.fill(a.view(0, 1024), 0x5A)
    stream.copy(b, a)
    got = stream.read(b)
    assert got[:1024].tolist() == [0x5A] * 1024
    assert not got[1024:].any()


def test_refusal_carries_code_and_reason(stream):
    buffer = stream.allocate(64)
    with pytest.raises(hrx.InvalidArgument) as refused:
        buffer.view(32, 64)
    assert refused.value.code == "INVALID_ARGUMENT"
    assert refused.value.reason == "view_out_of_range"
    assert "Fix:" in refused.value.message
    # A freed buffer's handle is refused by the daemon.
    view = buffer.view()
    buffer.free()
    with pytest.raises(hrx.NotFound) as stale:
        stream.fill(view, 1)
        stream.synchronize()
    assert stale.value.reason == "stale_handle"
    assert isinstance(stale.value, hrx.Error)


def test_read_with_a_dtype_that_does_not_divide_is_refused(stream):
    buffer = stream.allocate(6)
    with pytest.raises(hrx.InvalidArgument, match="6-byte range is not a whole number of 4-byte"):
        stream.read(buffer, dtype=np.float32)


def test_map_is_a_zero_copy_array(stream):
    buffer = stream.allocate(1 << 16, shared=True)
    mapped = buffer.map(np.uint8)
    assert mapped.size == 1 << 16 and not mapped.any()
    mapped[:] = 7  # written through the mapping ...
    assert stream.read(buffer)[-1] == 7  # ... seen by the daemon
    stream.fill(buffer.view(0, 16), 9)  # written by the device ...
    stream.synchronize()
    assert mapped[:16].tolist() == [9] * 16  # ... seen through the mapping
    assert mapped[16] == 7
    typed = buffer.map(np.float64)
    assert typed.dtype == np.float64 and typed.size == (1 << 16) // 8


def test_map_outlives_its_buffer_object(stream):
    buffer = stream.allocate(4096, shared=True)
    mapped = buffer.map()
    stream.fill(buffer, 3)
    stream.synchronize()
    del buffer  # the array keeps the mapping alive
    assert mapped.sum() == 3 * 4096


def test_a_kernel_without_scalars_takes_no_constants(stream):
    # wait_flag takes one buffer and no scalar: the default constants (none)
    # and empty packed bytes are both no bytes at all.
    path = os.path.join(os.environ["HRX_TEST_KERNELS"], "wait_flag.so")
    kernel = stream.load_kernel(path, "wait_flag")
    assert kernel.scalar_sizes == [] and kernel.buffer_count == 1
    flag = stream.allocate(1)
    stream.fill(flag, 1)  # open: the kernel returns at once
    stream.dispatch(kernel, 1, 1, buffers=(flag,))
    stream.dispatch(kernel, 1, 1, constants=b"", buffers=(flag,))
    stream.synchronize()


def test_saxpy_kernel_with_constants(stream, saxpy_path):
    n = 1 << 16
    x = np.linspace(0, 1, n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    xb, yb = stream.allocate(x.nbytes), stream.allocate(y.nbytes)
    stream.upload(xb, x)
    stream.upload(yb, y)
    kernel = stream.load_kernel(saxpy_path, "saxpy")
    assert kernel.scalar_sizes == [4, 4] and kernel.buffer_count == 2
    stream.dispatch(kernel, n // 256, 256, constants=(n, np.float32(2.0)), buffers=(xb, yb))
    np.testing.assert_allclose(stream.read(yb, dtype=np.float32), 2.0 * x + 1.0, rtol=1e-6)
    # From bytes, too.
    with open(saxpy_path, "rb") as code:
        assert stream.load_kernel(code.read(), "saxpy").symbol == "saxpy"


def test_constants_are_checked_before_sending(stream, saxpy_path):
    kernel = stream.load_kernel(saxpy_path, "saxpy")
    with pytest.raises(hrx.InvalidArgument, match="takes 2 scalars, 1 given"):
        hrx.constants(kernel, 1)
    with pytest.raises(hrx.InvalidArgument, match="Python float"):
        hrx.constants(kernel, 1, 2.0)
    assert hrx.constants(kernel, 3, np.float32(1.5)) == (
        (3).to_bytes(4, "little") + np.float32(1.5).tobytes())


def test_events_order_two_streams(client):
    device = client.device()
    with device.stream() as first, device.stream() as second:
        buffer = first.allocate(1 << 20)
        first.fill(buffer, 0x42)
        event = first.record_event()
        second.wait_event(event)  # second's read runs after first's fill
        assert second.read(buffer)[-1] == 0x42
        event.synchronize()
        assert event.is_complete()


def test_graph_replays(stream):
    a = stream.allocate(4096, zeroed=True)
    b = stream.allocate(4096, zeroed=True)
    graph = stream.graph()
    fill = graph.fill(a, 0x11)
    graph.copy(b, a, after=[fill])
    exec_ = graph.finish()
    assert exec_.node_count == 2
    for _ in range(50):
        stream.launch(exec_)
    stream.synchronize()
    assert stream.read(b)[0] == 0x11


def test_stream_context_synchronizes_and_closes(client):
    with client.device().stream() as stream:
        buffer = stream.allocate(1 << 20, shared=True)
        stream.fill(buffer, 0x33)
    # Leaving the block waited for the fill ...
    assert buffer.map()[-1] == 0x33
    # ... and closed the stream.
    with pytest.raises(hrx.FailedPrecondition, match="stream is closed"):
        stream.fill(buffer, 0)


def test_closed_client_is_refused():
    client = hrx.connect()
    session = client.session
    assert session != 0
    client.close()
    with pytest.raises(hrx.FailedPrecondition, match="client is closed"):
        client.device()


def test_no_daemon_is_unavailable(tmp_path):
    with pytest.raises(hrx.Unavailable) as refused:
        hrx.connect(socket=str(tmp_path / "nobody.sock"), timeout=2)
    assert "nobody.sock" in refused.value.message


def test_two_processes_share_a_buffer(stream, client):
    """Two Python processes: grant, import, map on both sides, an event."""
    peer = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(__file__), "share_peer.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        peer_session = int(peer.stdout.readline())
        buffer = stream.allocate(1 << 16, shared=True)
        mine = buffer.map(np.uint32)
        mine[:] = np.arange(mine.size, dtype=np.uint32) * 3
        grant = buffer.grant_to_session(peer_session)
        peer.stdin.write(f"{grant}\n")
        peer.stdin.flush()
        assert peer.stdout.readline().split() == ["owner-bytes", "ok"]
        assert peer.stdout.readline().strip() == "done"
        half = mine.size // 2
        assert (mine[:half] == 0xFFFFFFFF).all()  # the peer's device fill
        assert np.array_equal(mine[half:], np.arange(half, mine.size, dtype=np.uint32) * 3)
    finally:
        peer.stdin.close()
        assert peer.wait(timeout=60) == 0


def test_a_grant_to_another_session_is_not_importable_here(stream, client):
    buffer = stream.allocate(64, shared=True)
    with hrx.connect() as other:
        grant = buffer.grant_to_session(other.session)
        with pytest.raises(hrx.PermissionDenied) as refused:
            stream.import_grant(grant)
    assert refused.value.reason == "grant_not_yours"


@pytest.mark.parametrize("dtype", [str, "S", "V", object, [("a", "i4"), ("b", "O")]])
def test_dtypes_without_plain_bytes_are_refused(stream, dtype):
    buffer = stream.allocate(64, shared=True)
    with pytest.raises(hrx.InvalidArgument, match="Fix: use a numeric dtype"):
        stream.read(buffer, dtype=dtype)
    with pytest.raises(hrx.InvalidArgument, match="Fix: use a numeric dtype"):
        buffer.map(dtype)
    if dtype is object:
        with pytest.raises(hrx.InvalidArgument, match="Python object references"):
            stream.upload(buffer, np.array([object()] * 8, dtype=object))
        with pytest.raises(hrx.InvalidArgument, match="Python object references"):
            stream.read_into(buffer, np.empty(8, dtype=object))


def test_bad_arguments_are_refused_with_numbers(stream):
    buffer = stream.allocate(64)
    with pytest.raises(hrx.InvalidArgument, match=r"nbytes is -1, outside \[0, "):
        stream.allocate(-1)
    with pytest.raises(hrx.InvalidArgument, match=r"value is 256, outside \[0, 255\]"):
        stream.fill(buffer, 256)
    with pytest.raises(hrx.InvalidArgument, match="dst is a bytes. Fix: pass an hrx.Buffer"):
        stream.fill(b"x", 1)
    with pytest.raises(hrx.InvalidArgument, match="destination holds 32 bytes, the source 64"):
        stream.read_into(buffer, np.empty(32, dtype=np.uint8))
    with pytest.raises(hrx.InvalidArgument, match="64-byte buffer is not a whole number of 24-byte"):
        stream.allocate(64, shared=True).map(np.dtype((np.uint8, 24)))


def test_bad_launch_shapes_are_refused(stream, saxpy_path):
    kernel = stream.load_kernel(saxpy_path, "saxpy")
    x = stream.allocate(1024)
    packed = hrx.constants(kernel, 256, np.float32(1))
    with pytest.raises(hrx.InvalidArgument, match="grid has 4 dimensions"):
        stream.dispatch(kernel, (1, 1, 1, 1), 256, constants=packed, buffers=(x, x))
    with pytest.raises(hrx.InvalidArgument, match=r"block is 4294967296, outside \[0, 4294967295\]"):
        stream.dispatch(kernel, 1, 1 << 32, constants=packed, buffers=(x, x))
    with pytest.raises(hrx.InvalidArgument, match=r"scalar 0 of kernel saxpy is 4294967296"):
        hrx.constants(kernel, 1 << 32, np.float32(1))
    # numpy integers and bytearray constants are accepted.
    stream.dispatch(kernel, np.int64(1), [256], constants=bytearray(packed), buffers=(x, x))
    stream.synchronize()


def test_errors_pickle(stream):
    import pickle
    with pytest.raises(hrx.InvalidArgument) as refused:
        stream.allocate(64).view(100, 1)
    again = pickle.loads(pickle.dumps(refused.value))
    assert type(again) is hrx.InvalidArgument
    assert (again.code, again.reason) == ("INVALID_ARGUMENT", "view_out_of_range")


def test_closing_a_stream_while_another_thread_waits_on_it(client):
    """close() waits for the call in progress; later calls are refused."""
    import threading
    stream = client.device().stream()
    buffer = stream.allocate(8 << 20)
    results = []

    def reader():
        for _ in range(20):
            try:
                results.append(int(stream.read(buffer)[-1]))
            except hrx.FailedPrecondition as closed:
                results.append(closed.message)
                return

    thread = threading.Thread(target=reader)
    stream.fill(buffer, 5)
    thread.start()
    stream.close()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert all(r == 5 or "stream is closed" in r for r in results)
