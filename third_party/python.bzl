"""Debian 12's Python 3 and pybind11, for extension modules (python/)."""

PYTHON_VERSION = "3.11"

# pybind11's headers live in /usr/include (pybind11-dev); Python's own in a
# versioned directory outside the workspace, hence a flag, not `includes`.
PYTHON_COPTS = ["-isystem", "/usr/include/python" + PYTHON_VERSION]

# The file name suffix Debian's python3 looks for (python3-config
# --extension-suffix).
PYTHON_EXTENSION_SUFFIX = ".cpython-311-x86_64-linux-gnu.so"
