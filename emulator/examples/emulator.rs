//! The local AgentCore Runtime emulator as a process of its own, for a program that is not Rust
//! code — `agentcore-mcp-proxy`, an MCP client, a shell script — to talk to.
//!
//! It starts `agentcore_tower_emulator::Emulator` with its defaults on 127.0.0.1 (an ephemeral
//! port), prints what a client needs as `NAME=value` lines on stdout — the runtime ARN, the
//! endpoint in the variable the AWS SDKs and the proxy read, the region and the emulator's test
//! credentials (not secrets: the emulator accepts only these) — then serves until it is stopped
//! (Ctrl-C, or a signal).
//!
//! ```text
//! cargo run -p agentcore-tower-emulator --example emulator > emulator.env &
//! set -a; . ./emulator.env; set +a
//! agentcore-mcp-proxy check --runtime-arn "$AGENTCORE_RUNTIME_ARN"
//! ```

use agentcore_tower_emulator::{Emulator, EmulatorConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let emulator = Emulator::start(EmulatorConfig::default()).await?;
    let credentials = emulator.credentials();
    // stdout is line-buffered: each line is out as soon as it is printed, for a reader waiting
    // on the file.
    println!("AGENTCORE_RUNTIME_ARN={}", emulator.runtime_arn());
    println!("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE={}", emulator.endpoint());
    println!("AWS_REGION={}", emulator.region());
    println!("AWS_ACCESS_KEY_ID={}", credentials.access_key_id());
    println!("AWS_SECRET_ACCESS_KEY={}", credentials.secret_access_key());
    if let Some(token) = credentials.session_token() {
        println!("AWS_SESSION_TOKEN={token}");
    }
    eprintln!(
        "the AgentCore Runtime emulator serves {} at {}; stop it with Ctrl-C",
        emulator.runtime_arn(),
        emulator.endpoint()
    );
    std::future::pending::<()>().await;
    Ok(())
}
