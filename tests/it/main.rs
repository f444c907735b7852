//! The library's integration tests, in one binary (one link, not one per file): each module is
//! the tests of one promise or part, named as it was when each was a binary of its own. The tests
//! that install a counting global allocator (`tests/allocations.rs`, `tests/memory.rs`) stay
//! binaries of their own: an allocator is the whole process's, and the other tests' allocations
//! would count. Modules that need a feature of the crate are built with it.

#[path = "../common/mod.rs"]
mod common;

mod budget;
#[cfg(feature = "emulator")]
mod call;
#[cfg(feature = "emulator")]
mod contract;
mod deadline;
#[cfg(feature = "emulator")]
mod doors;
#[cfg(feature = "emulator")]
mod emulator;
#[cfg(feature = "emulator")]
mod emulator_doors;
#[cfg(feature = "emulator")]
mod emulator_lifecycle;
#[cfg(feature = "emulator")]
mod lifecycle;
#[cfg(feature = "emulator")]
mod load;
mod mcp_session;
#[cfg(all(feature = "emulator", feature = "rmcp", feature = "reqwest"))]
mod modern_clients;
mod module_graph;
#[cfg(all(feature = "emulator", feature = "opentelemetry"))]
mod opentelemetry_export;
#[cfg(feature = "emulator")]
mod refusal_model;
mod replay;
#[cfg(all(feature = "emulator", feature = "reqwest"))]
mod reqwest_stack;
#[cfg(all(feature = "emulator", feature = "rmcp"))]
mod rmcp_client;
mod secrets;
mod session_busy;
#[cfg(feature = "emulator")]
mod sigv4;
mod telemetry;
#[cfg(feature = "emulator")]
mod telemetry_emulator;
mod throttle;
#[cfg(feature = "emulator")]
mod with_tower_http;
