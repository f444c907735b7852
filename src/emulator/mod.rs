//! A local AgentCore Runtime emulator for tests and demos (cargo feature `emulator`).
//!
//! Today it offers the service's side of SigV4: [`SignatureVerifier`] recomputes a received
//! request's signature as AWS does, so a test server can check what a client signed.

mod verify;

pub use verify::{SignatureError, SignatureVerifier};
