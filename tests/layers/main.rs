//! The library's integration tests of its layers and of the call's promises, in one binary (one
//! link, not one per file): each layer alone over in-memory services, then the stack together,
//! in memory and against the emulator. Their companion binaries, `tests/doors` (the doors, the
//! emulator itself, MCP clients over the stack) and `tests/eras` (MCP's two eras, Tasks), are
//! split from it so that no test crate's compilation needs much more than 0.9 GB. The tests
//! that install a counting global allocator (`tests/allocations.rs`, `tests/memory.rs`) stay
//! binaries of their own: an allocator is the whole process's, and the other tests' allocations
//! would count.
//! Modules that need a feature of the crate are built with it.

#[path = "../common/mod.rs"]
mod common;

mod bridge;
mod budget;
mod call;
mod contract;
mod deadline;
mod lifecycle;
mod load;
mod mcp_session;
mod module_graph;
mod replay;
mod secrets;
mod session_busy;
mod sigv4;
mod tasks;
mod telemetry;
mod telemetry_emulator;
mod throttle;
