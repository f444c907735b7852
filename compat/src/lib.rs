//! `agentcore-tower` measured and checked against the official AWS SDK (`aws-sdk-bedrockagentcore`):
//! the criterion benchmarks (`benches/`) and the byte-for-byte differential tests of the signer
//! (`tests/`). A workspace of its own, outside the main one, so that neither the crate's build nor
//! `cargo test --workspace` compiles the AWS SDK or criterion. Not published.
#![forbid(unsafe_code)]
