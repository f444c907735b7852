//! `agentcore-mcp-proxy`: an MCP proxy for AgentCore Runtime (feature `proxy`).
fn main() {}
