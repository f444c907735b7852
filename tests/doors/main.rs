//! The library's integration tests of its doors (an OAuth runtime, `McpEndpointLayer` for a
//! Gateway or any MCP URL), of the emulator as AgentCore behaves, and of MCP clients over the
//! stack (rmcp, reqwest), in one binary; MCP's eras, the bridge and Tasks are `tests/eras/`
//! (see `tests/layers/main.rs` for why the integration tests are several binaries).

#[path = "../common/audit.rs"]
mod audit;
#[path = "../common/mod.rs"]
mod common;
#[cfg(feature = "rmcp")]
#[path = "../common/records.rs"]
mod records;

mod doors;
mod emulator;
mod emulator_doors;
mod emulator_lifecycle;
mod refusal_model;
#[cfg(feature = "reqwest")]
mod reqwest_stack;
#[cfg(feature = "rmcp")]
mod rmcp_client;
