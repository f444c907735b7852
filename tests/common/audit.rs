//! What the emulator's audit shows of a client's runtime sessions, for the test crates that
//! build the emulator (each includes this file by its path).

use agentcore_tower_emulator::Audit;

/// Every request the emulator received was signed and went to one runtime session, which
/// started `microvms` microVMs (one per cold start): that session's id.
pub fn one_runtime_session(audit: &Audit, microvms: u64) -> String {
    let sessions: Vec<&str> = audit
        .received
        .iter()
        .map(|r| {
            assert!(r.signed, "{r:?}");
            r.runtime_session_id
                .as_deref()
                .expect("every request names its runtime session")
        })
        .collect();
    assert!(!sessions.is_empty());
    assert!(
        sessions.iter().all(|s| *s == sessions[0]),
        "one runtime session for every request: {sessions:?}"
    );
    assert_eq!(audit.sessions_started, 1);
    assert_eq!(audit.microvms_started, microvms);
    assert_eq!(audit.signature_failures, 0);
    sessions[0].to_owned()
}
