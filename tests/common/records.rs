//! rmcp's exchanges and their attempt records, as the record tap hands them over: for the test
//! crates that build the crate's `rmcp` feature (each includes this file by its path).

use std::sync::{Arc, Mutex};

/// rmcp's exchanges, each with its attempt record, as a tap hands them over ([`tap_into`]).
pub type Records = Arc<
    Mutex<
        Vec<(
            agentcore_tower::rmcp::Exchange,
            agentcore_tower::AttemptRecord,
        )>,
    >,
>;

/// A record tap that keeps every exchange and its attempt record in `records`, in order.
pub fn tap_into(records: &Records) -> agentcore_tower::rmcp::RecordTapLayer {
    let sink = records.clone();
    agentcore_tower::rmcp::RecordTapLayer::new(move |exchange, record| {
        sink.lock()
            .unwrap()
            .push((exchange.clone(), record.clone()));
    })
}
