//! rmcp (the official Rust MCP SDK) over this crate's stack (feature `rmcp`).
