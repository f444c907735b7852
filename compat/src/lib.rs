//! `agentcore-tower` measured and checked against the official AWS SDK (`aws-sdk-bedrockagentcore`):
//! the criterion benchmarks (`benches/`) and the byte-for-byte differential tests of the signer
//! (`tests/`). A workspace member of its own, so that the crate's build — and the first command of
//! its README — never compiles the AWS SDK or criterion. Not published.
#![forbid(unsafe_code)]
