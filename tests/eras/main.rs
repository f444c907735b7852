//! The library's integration tests of MCP's two eras over the stack, in one binary: the bridge
//! between them (`ProtocolBridgeLayer`), clients of 2026-07-28 (rmcp, reqwest, hand-written),
//! the emulator's servers of one era, the Tasks extension (`TaskPollingLayer`, the emulator's
//! tasks) and one session's concurrent calls. A binary of its own so that no test crate's
//! compilation needs much more than 0.9 GB (see `tests/layers/main.rs`).

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
mod emulator_eras;
mod emulator_tasks;
#[cfg(all(feature = "rmcp", feature = "reqwest"))]
mod modern_clients;
mod tasks;

/// The emulator, started as the tests of `tests/doors/` start it.
mod emulator {
    use agentcore_tower_emulator::{Emulator, EmulatorConfig};

    /// An emulator started with `config`.
    pub(crate) async fn start(config: EmulatorConfig) -> Emulator {
        Emulator::start(config).await.unwrap()
    }
}
