//! The differential tests of the signatures, in one binary: `SigV4InvokeLayer` against the
//! official AWS SDK's `InvokeAgentRuntime` (`sigv4_differential`), and `McpEndpointLayer`
//! against the SDK's SigV4 signer for a Gateway's MCP URL (`gateway_differential`), sharing what
//! a request puts on the wire (`wire`).

mod wire;

mod gateway_differential;
mod sigv4_differential;
