"""The second process of test_two_processes_share_a_buffer.

Connects, prints its session id, reads a grant id from stdin, imports and
maps the buffer, checks the owner's bytes through the mapping, fills the
first half on the device, waits on an event for it and prints "done".
"""
import sys

import numpy as np

import hrx

with hrx.connect(name="share-peer") as client:
    with client.device().stream() as stream:
        print(client.session, flush=True)
        grant = int(sys.stdin.readline())
        buffer = stream.import_grant(grant)
        shared = buffer.map(np.uint32)
        expected = np.arange(shared.size, dtype=np.uint32) * 3
        print("owner-bytes", "ok" if np.array_equal(shared, expected) else "WRONG", flush=True)
        stream.fill(buffer.view(0, buffer.nbytes // 2), 0xFF)
        stream.record_event().synchronize()
        del shared
        print("done", flush=True)
