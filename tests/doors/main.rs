//! The library's integration tests of its doors (an OAuth runtime, `McpEndpointLayer` for a
//! Gateway or any MCP URL), of the emulator as AgentCore behaves, and of MCP clients over the
//! stack (rmcp, reqwest, hand-written clients of both protocol eras), in one binary (feature
//! `emulator`; see `tests/layers/main.rs` for why the integration tests are two binaries).

#[path = "../common/audit.rs"]
mod audit;
#[path = "../common/mod.rs"]
mod common;
#[cfg(feature = "rmcp")]
#[path = "../common/records.rs"]
mod records;

mod bridge;
#[cfg(feature = "rmcp")]
mod concurrency;
mod doors;
mod emulator;
mod emulator_doors;
mod emulator_eras;
mod emulator_lifecycle;
mod emulator_tasks;
#[cfg(all(feature = "rmcp", feature = "reqwest"))]
mod modern_clients;
mod refusal_model;
#[cfg(feature = "reqwest")]
mod reqwest_stack;
#[cfg(feature = "rmcp")]
mod rmcp_client;
mod tasks;
