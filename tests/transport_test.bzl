"""Integration tests over both stream transports."""

def transport_test(name, **kwargs):
    """Defines the test `name` twice: as `name`, with libhrx's default
    transport (the shared-memory ring, which tests assert is in use where a
    stream is opened), and as `name`_grpc, with every stream on a
    Streams.Open gRPC call (HRX_TRANSPORT=grpc, inherited by the client
    processes the test starts)."""
    env = kwargs.pop("env", {})
    native.cc_test(name = name, env = env, **kwargs)
    grpc_env = dict(env)
    grpc_env["HRX_TRANSPORT"] = "grpc"
    native.cc_test(name = name + "_grpc", env = grpc_env, **kwargs)
