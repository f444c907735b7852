//! `agentcore-tower` with software its own build leaves out, in tests (`tests/it/`): rmcp's
//! Streamable HTTP server at the far end of the stack, what the crate exports as the
//! OpenTelemetry SDK receives it, and tower-http's layers in the stack; and proptest's
//! generated requests, signed by the crate and by `aws-sigv4` (`tests/sigv4_reference.rs`). A
//! workspace member of its own, so that the crate's dev-dependencies, and with them the first
//! command of its README, leave those crates out. Not published.
#![forbid(unsafe_code)]
