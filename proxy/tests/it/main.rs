//! The proxy's integration tests, in one binary (one link, not one per file): each module is the
//! tests of one part of the proxy, named as it was when each was a binary of its own; `common`
//! is what they share (the built binary run as a child process, the messages a client sends).
//! The Python the `python_sdk` tests run is in `proxy/tests/python_sdk/`.

mod common;

mod bridge;
mod check;
mod concurrency;
mod daily_use;
mod lifecycle;
mod modern;
mod modern_runtime;
mod otlp;
mod python_sdk;
mod python_sdk_eras;
mod refusals;
mod stdio_proxy;
mod tasks;
