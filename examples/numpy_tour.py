#!/usr/bin/env python3
# %% [markdown]
# # A tour of hrx from Python
#
# Notebook-style: each `# %%` cell runs on its own in Jupyter or VS Code, or
# run the whole file against `make run`'s daemon (in another terminal):
#
#     bazel run //examples:numpy_tour
#
# or, with the python3-hrx package installed, `python3 numpy_tour.py`.
# Optional argument: the path of a CPU-backend saxpy kernel
# (tests/kernels/saxpy.c; `bazel run` passes the one it builds).

# %%
import sys

import numpy as np

import hrx

client = hrx.connect(name="numpy-tour")
device = client.device()
print(f"{device.name} ({device.backend}), {device.memory_bytes / 2**30:.1f} GiB")

# %% [markdown]
# ## Upload an array, work on it, read it back
# Commands are batched and sent at the next synchronisation (here the read).

# %%
stream = device.stream()
data = np.linspace(0.0, 1.0, 1 << 20, dtype=np.float32)
x = stream.allocate(data.nbytes)
stream.upload(x, data)
back = stream.read(x, dtype=np.float32)
print("round trip exact:", np.array_equal(back, data))

# %% [markdown]
# ## A shared buffer is a numpy array with no copy
# The device and this process see the same pages: synchronise before
# reading what the device wrote.

# %%
shared = stream.allocate(4096 * 4, shared=True)
view = shared.map(np.float32)
view[:] = np.arange(view.size, dtype=np.float32)
stream.fill(shared.view(0, 16), 0)  # the first four floats, on the device
stream.synchronize()
print("through the mapping:", view[:6])

# %% [markdown]
# ## A kernel with constants: y = a * x + y

# %%
if len(sys.argv) > 1:
    saxpy = stream.load_kernel(sys.argv[1], "saxpy")
    y = stream.allocate(data.nbytes)
    stream.upload(y, np.ones_like(data))
    stream.dispatch(saxpy, data.size // 256, 256,
                    constants=(data.size, np.float32(3.0)), buffers=(x, y))
    result = stream.read(y, dtype=np.float32)
    print("saxpy max error:", float(np.abs(result - (3.0 * data + 1.0)).max()))
    assert np.allclose(result, 3.0 * data + 1.0)
else:
    print("(no kernel path given: skipping saxpy)")

# %% [markdown]
# ## Refusals are exceptions with the daemon's reason

# %%
refusal = ""
try:
    x.view(data.nbytes, 1)
except hrx.InvalidArgument as refused:
    refusal = refused.reason
    print(f"refused: {refused.code} / {refused.reason}")

# %%
stream.close()
client.close()
ok = (np.array_equal(back, data) and view[0] == 0 and view[5] == 5
      and refusal == "view_out_of_range")
print("numpy_tour:", "ok" if ok else "WRONG")
sys.exit(0 if ok else 1)
