//! The tests of the library with software its own build leaves out, in one binary: rmcp's
//! Streamable HTTP server at the far end of the stack (`rmcp_server`), what the crate exports as
//! OpenTelemetry's SDK receives it (`opentelemetry_export`), and tower-http's layers in the stack
//! (`with_tower_http`). The library's test doubles are shared by path.

#[path = "../../../tests/common/mod.rs"]
mod common;
#[path = "../../../tests/common/records.rs"]
mod records;

mod opentelemetry_export;
mod rmcp_server;
mod with_tower_http;
