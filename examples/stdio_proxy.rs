//! The stdio proxy is now the installable binary `agentcore-mcp-proxy` (feature `proxy`), with
//! a local Streamable HTTP endpoint besides stdio (`--listen`):
//!
//! ```text
//! cargo install agentcore-tower --features proxy    # or: cargo install --path . --features proxy
//! agentcore-mcp-proxy --help
//! cargo run --bin agentcore-mcp-proxy --features proxy -- --runtime-arn ARN
//! ```
//!
//! Its source is `src/bin/agentcore-mcp-proxy.rs`.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "the stdio proxy is now the `agentcore-mcp-proxy` binary:\n\
         \x20   cargo run --bin agentcore-mcp-proxy --features proxy -- --help\n\
         or install it: cargo install agentcore-tower --features proxy"
    );
    ExitCode::from(2)
}
