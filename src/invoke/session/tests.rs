use super::*;

fn answer(id: &str, mcp: Option<&str>) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(RUNTIME_SESSION_ID, id.parse().unwrap());
    if let Some(mcp) = mcp {
        h.insert("mcp-session-id", mcp.parse().unwrap());
    }
    h
}

fn per_mcp_session(idle_timeout: Duration, max_bound: usize) -> Sessions {
    living(idle_timeout, DEFAULT_MAX_LIFETIME, max_bound)
}

/// Per MCP session, with a lifetime.
fn living(idle_timeout: Duration, max_lifetime: Duration, max_bound: usize) -> Sessions {
    Sessions::new(
        RuntimeSessions::PerMcpSession,
        "d".repeat(36),
        idle_timeout,
        max_lifetime,
        max_bound,
    )
}

fn per_layer(id: String) -> Sessions {
    Sessions::new(
        RuntimeSessions::PerLayer,
        id,
        DEFAULT_IDLE_TIMEOUT,
        DEFAULT_MAX_LIFETIME,
        DEFAULT_MAX_BOUND,
    )
}

fn renewing(old: &str) -> RenewedFrom {
    RenewedFrom(old.into())
}

/// Two MCP sessions bound, "old" then "other", and an `initialize` renewing "old": the
/// sessions, the runtime session of each, and the one the renewal was given.
fn renewal_of_old_beside_other() -> (Sessions, Arc<str>, Arc<str>, Chosen) {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
    let old = s.choose(Some("old"), None, true).id;
    let other = s.choose(Some("other"), None, true).id;
    let init = s.choose(None, Some(&renewing("old")), true);
    (s, old, other, init)
}

impl Sessions {
    /// How many MCP sessions are bound (those idle too long among them, until dropped).
    fn bound(&self) -> usize {
        self.lock_bound().len()
    }

    /// The runtime session bound to `mcp_session`, its use left as it is.
    fn bound_to(&self, mcp_session: &str) -> Option<Arc<str>> {
        self.lock_bound().peek(mcp_session, Instant::now())
    }

    /// The MCP sessions bound, from the least recently used to the most, after checking
    /// that the maps and the list agree.
    fn by_use(&self) -> Vec<String> {
        let bound = self.lock_bound();
        let mut order = Vec::new();
        let (mut slot, mut older) = (bound.oldest, NIL);
        while slot != NIL {
            let s = &bound.slots[slot];
            assert_eq!(s.older, older, "links agree");
            assert_eq!(bound.by_mcp_session[&s.mcp_session], slot);
            assert_eq!(bound.by_runtime_session[&s.runtime_session], slot);
            order.push(s.mcp_session.to_string());
            (older, slot) = (slot, s.newer);
        }
        assert_eq!(bound.newest, older);
        assert_eq!(order.len(), bound.slots.len());
        assert_eq!(bound.by_mcp_session.len(), bound.slots.len());
        assert_eq!(bound.by_runtime_session.len(), bound.slots.len());
        order
    }
}

#[test]
fn requests_in_no_mcp_session_that_open_none_share_the_layers_runtime_session() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
    let first = s.choose(None, None, false);
    let second = s.choose(None, None, false);
    assert_eq!(&*first.id, "d".repeat(36).as_str(), "the layer's own");
    assert_eq!(second.id, first.id, "one microVM for sessionless requests");
    let initialize = s.choose(None, None, true);
    assert_ne!(
        initialize.id, first.id,
        "an initialize opens a session of its own"
    );
}

#[test]
fn per_layer_adopts_only_over_what_the_request_used() {
    let s = per_layer("a".repeat(36));
    let first = s.choose(None, None, true);
    let b = "b".repeat(36);
    s.adopt(&first, &answer(&b, None));
    assert_eq!(&*s.default_id(), b.as_str());
    // A late answer to a request that used the old id does not switch it back.
    s.adopt(&first, &answer(&"c".repeat(36), None));
    assert_eq!(&*s.default_id(), b.as_str());
    // Invalid or redacted ids are never adopted.
    let now = s.choose(None, None, true);
    s.adopt(&now, &answer("[redacted]", None));
    assert_eq!(&*s.default_id(), b.as_str());
}

#[test]
fn per_mcp_session_binds_and_separates() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
    let init_a = s.choose(None, None, true);
    let init_b = s.choose(None, None, true);
    assert_ne!(init_a.id, init_b.id, "each initialize gets its own");
    s.adopt(&init_a, &answer(&init_a.id, Some("mcp-a")));
    s.adopt(&init_b, &answer(&init_b.id, Some("mcp-b")));
    assert_eq!(s.choose(Some("mcp-a"), None, true).id, init_a.id);
    assert_eq!(s.choose(Some("mcp-b"), None, true).id, init_b.id);
    // An answer to A's request never changes B's session, nor puts A in B's.
    let a = s.choose(Some("mcp-a"), None, true);
    s.adopt(&a, &answer(&init_b.id, Some("mcp-b")));
    assert_eq!(
        s.choose(Some("mcp-a"), None, true).id,
        init_a.id,
        "B's id is B's"
    );
    s.adopt(&a, &answer(&"e".repeat(36), Some("mcp-b")));
    assert_eq!(s.choose(Some("mcp-b"), None, true).id, init_b.id);
    assert_eq!(
        &*s.choose(Some("mcp-a"), None, true).id,
        "e".repeat(36).as_str()
    );
    s.forget(&s.choose(Some("mcp-b"), None, true));
    assert_ne!(
        s.choose(Some("mcp-b"), None, true).id,
        init_b.id,
        "stopped: a new one"
    );
    s.by_use();
}

#[test]
fn the_cap_forgets_the_least_recently_used() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, 3);
    let a = s.choose(Some("a"), None, true).id;
    let b = s.choose(Some("b"), None, true).id;
    let c = s.choose(Some("c"), None, true).id;
    // A is used again: B is now the least recently used, and goes for D.
    assert_eq!(s.choose(Some("a"), None, true).id, a);
    let d = s.choose(Some("d"), None, true).id;
    assert_eq!(s.by_use(), ["c", "a", "d"]);
    assert_eq!(s.bound_to("b"), None);
    assert_eq!(s.bound_to("a"), Some(a));
    assert_eq!(s.bound_to("c"), Some(c));
    assert_eq!(s.bound_to("d"), Some(d.clone()));
    // An answer confirming D's session is a use too: C goes next.
    let chosen = s.choose(Some("d"), None, true);
    s.adopt(&chosen, &answer(&d, None));
    let b_again = s.choose(Some("b"), None, true).id;
    assert_ne!(b_again, b, "forgotten: a new microVM");
    assert_eq!(s.by_use(), ["a", "d", "b"]);
    assert_eq!(s.bound(), 3);
}

#[test]
fn the_cap_holds_at_scale_and_forgets_in_order() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, 1_000);
    let ids: Vec<_> = (0..1_010)
        .map(|i| s.choose(Some(&format!("mcp-{i}")), None, true).id)
        .collect();
    assert_eq!(s.bound(), 1_000);
    for (i, id) in ids.iter().enumerate() {
        let kept = s.bound_to(&format!("mcp-{i}"));
        assert_eq!(kept.as_ref(), (i >= 10).then_some(id), "mcp-{i}");
    }
    let order = s.by_use();
    assert_eq!(order.first().map(String::as_str), Some("mcp-10"));
    assert_eq!(order.last().map(String::as_str), Some("mcp-1009"));
}

#[test]
fn a_zero_cap_keeps_one() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, 0);
    let a = s.choose(Some("a"), None, true).id;
    assert_eq!(s.bound_to("a"), Some(a));
    let b = s.choose(Some("b"), None, true).id;
    assert_eq!(s.by_use(), ["b"]);
    assert_eq!(s.bound_to("b"), Some(b));
}

#[tokio::test(start_paused = true)]
async fn a_binding_idle_longer_than_the_timeout_is_forgotten() {
    let s = per_mcp_session(Duration::from_secs(900), DEFAULT_MAX_BOUND);
    let a = s.choose(Some("a"), None, true).id;
    tokio::time::advance(Duration::from_secs(900)).await;
    assert_eq!(s.bound_to("a"), Some(a.clone()), "idle 900 s: not longer");
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(s.bound_to("a"), None, "idle longer: forgotten");
    assert_eq!(s.bound(), 0, "dropped when looked up");
    let again = s.choose(Some("a"), None, true).id;
    assert_ne!(again, a, "a new microVM");
    assert_eq!(s.bound_to("a"), Some(again));
}

#[tokio::test(start_paused = true)]
async fn a_use_keeps_a_binding() {
    let s = per_mcp_session(Duration::from_secs(900), DEFAULT_MAX_BOUND);
    let a = s.choose(Some("a"), None, true).id;
    let b = s.choose(Some("b"), None, true).id;
    tokio::time::advance(Duration::from_secs(600)).await;
    assert_eq!(s.choose(Some("a"), None, true).id, a, "a request uses it");
    tokio::time::advance(Duration::from_secs(600)).await;
    // An answer is a use too.
    let chosen = s.choose(Some("a"), None, true);
    tokio::time::advance(Duration::from_secs(600)).await;
    s.adopt(&chosen, &answer(&a, None));
    tokio::time::advance(Duration::from_secs(600)).await;
    assert_eq!(s.bound_to("a"), Some(a), "idle 600 s");
    assert_eq!(s.bound_to("b"), None, "idle 2,400 s");
    assert_ne!(s.choose(Some("b"), None, true).id, b);
}

#[tokio::test(start_paused = true)]
async fn a_bind_drops_the_expired_at_the_least_recent_end() {
    let s = per_mcp_session(Duration::from_secs(60), DEFAULT_MAX_BOUND);
    s.choose(Some("a"), None, true);
    s.choose(Some("b"), None, true);
    tokio::time::advance(Duration::from_secs(30)).await;
    let c = s.choose(Some("c"), None, true).id;
    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(s.bound(), 3, "nothing dropped before it is touched");
    let d = s.choose(Some("d"), None, true).id;
    assert_eq!(s.by_use(), ["c", "d"], "A and B dropped, C is idle 31 s");
    assert_eq!(s.bound_to("c"), Some(c));
    assert_eq!(s.bound_to("d"), Some(d));
}

#[tokio::test(start_paused = true)]
async fn an_idle_time_below_agentcores_least_is_taken_as_60_seconds() {
    let s = per_mcp_session(Duration::ZERO, DEFAULT_MAX_BOUND);
    let a = s.choose(Some("a"), None, true).id;
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(s.bound_to("a"), Some(a));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(s.bound_to("a"), None);
    assert!(format!("{s:?}").contains("runtime_session_idle_timeout: 60s"));
}

#[tokio::test(start_paused = true)]
async fn a_binding_past_its_lifetime_is_forgotten_however_busy() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
    let a = s.choose(Some("a"), None, true).id;
    // A request every 10 minutes for 28,200 s: never idle.
    for _ in 0..47 {
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(s.choose(Some("a"), None, true).id, a);
    }
    tokio::time::advance(Duration::from_secs(599)).await;
    assert_eq!(s.choose(Some("a"), None, true).id, a, "28,799 s: kept");
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(s.bound_to("a"), None, "28,801 s: the microVM has ended");
    let again = s.choose(Some("a"), None, true).id;
    assert_ne!(again, a, "a new microVM");
    // The new runtime session's lifetime counts from its binding.
    tokio::time::advance(Duration::from_secs(600)).await;
    assert_eq!(s.bound_to("a"), Some(again));
}

#[tokio::test(start_paused = true)]
async fn a_renewal_takes_the_lifetime_of_the_microvm_it_takes_over() {
    let hour = Duration::from_secs(3600);
    let s = living(hour, hour, DEFAULT_MAX_BOUND);
    let old = s.choose(Some("old"), None, true).id;
    tokio::time::advance(Duration::from_secs(3000)).await;
    let init = s.choose(None, Some(&renewing("old")), true);
    assert_eq!(init.id, old);
    s.adopt(&init, &answer(&old, Some("new")));
    tokio::time::advance(Duration::from_secs(599)).await;
    assert_eq!(s.bound_to("new"), Some(old), "3,599 s since it was bound");
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(s.bound_to("new"), None, "3,601 s");
}

#[tokio::test(start_paused = true)]
async fn a_lifetime_below_agentcores_least_is_taken_as_60_seconds() {
    let s = living(DEFAULT_IDLE_TIMEOUT, Duration::ZERO, DEFAULT_MAX_BOUND);
    let a = s.choose(Some("a"), None, true).id;
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(s.choose(Some("a"), None, true).id, a);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(s.bound_to("a"), None);
    assert!(format!("{s:?}").contains("runtime_session_max_lifetime: 60s"));
}

/// AgentCore Instances: both up to 14 days.
#[tokio::test(start_paused = true)]
async fn a_binding_lives_14_days_on_instances() {
    let days = MAX_RUNTIME_SESSION_TIME;
    assert_eq!(days, Duration::from_secs(1_209_600));
    let s = living(days, days, DEFAULT_MAX_BOUND);
    let a = s.choose(Some("a"), None, true).id;
    tokio::time::advance(days - Duration::from_secs(1)).await;
    assert_eq!(s.choose(Some("a"), None, true).id, a, "idle 14 days - 1 s");
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(s.bound_to("a"), None, "bound 14 days + 1 s ago");
}

#[test]
fn the_builder_takes_14_days_and_refuses_more() {
    use crate::error::ConfigError;
    use crate::invoke::{InvokeTarget, SigV4InvokeLayer, SigV4InvokeLayerBuilder};
    use aws_credential_types::Credentials;
    let builder = |mode| -> SigV4InvokeLayerBuilder {
        SigV4InvokeLayer::builder(
            InvokeTarget::arn("arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/a-1"),
            Credentials::new("AKID", "secret", None, None, "test"),
        )
        .runtime_sessions(mode)
    };
    let per_mcp_session = || builder(RuntimeSessions::PerMcpSession);
    let days = Duration::from_secs(14 * 86_400);
    let layer = per_mcp_session()
        .runtime_session_idle_timeout(days)
        .runtime_session_max_lifetime(days)
        .build()
        .unwrap();
    let shown = format!("{layer:?}");
    assert!(
        shown.contains("runtime_session_idle_timeout: 1209600s"),
        "{shown}"
    );
    assert!(
        shown.contains("runtime_session_max_lifetime: 1209600s"),
        "{shown}"
    );
    let defaults = format!("{:?}", per_mcp_session());
    assert!(
        defaults.contains("runtime_session_idle_timeout: 900s"),
        "{defaults}"
    );
    assert!(
        defaults.contains("runtime_session_max_lifetime: 28800s"),
        "{defaults}"
    );

    let over = days + Duration::from_secs(1);
    let too_long = |setting| ConfigError::RuntimeSessionTimeTooLong {
        setting,
        given: over,
        max: days,
    };
    let idle = per_mcp_session().runtime_session_idle_timeout(over);
    assert_eq!(
        idle.build().err(),
        Some(too_long("runtime_session_idle_timeout"))
    );
    let lifetime = per_mcp_session()
        .runtime_session_max_lifetime(over)
        .build()
        .err();
    assert_eq!(lifetime, Some(too_long("runtime_session_max_lifetime")));
    assert_eq!(
        lifetime.unwrap().to_string(),
        "runtime_session_max_lifetime is 1209601s: AgentCore takes at most 1209600s (14 \
         days, for a runtime on AgentCore Instances; 8 hours on microVMs)"
    );
    // Checked with either mode.
    let per_layer = builder(RuntimeSessions::PerLayer).runtime_session_max_lifetime(over);
    assert_eq!(
        per_layer.build().err(),
        Some(too_long("runtime_session_max_lifetime"))
    );
}

#[tokio::test(start_paused = true)]
async fn an_expired_binding_has_nothing_to_stop() {
    let s = per_mcp_session(Duration::from_secs(60), DEFAULT_MAX_BOUND);
    let a = s.choose(Some("a"), None, true).id;
    let mut delete = HeaderMap::new();
    delete.insert("mcp-session-id", "a".parse().unwrap());
    assert_eq!(s.to_stop(&delete).map(|c| c.id), Some(a));
    tokio::time::advance(Duration::from_secs(61)).await;
    assert!(s.to_stop(&delete).is_none());
}

#[test]
fn forget_unbinds_only_what_was_stopped() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
    let a = s.choose(Some("a"), None, true);
    let b = s.choose(Some("b"), None, true);
    // A stop of a session the MCP session no longer has changes nothing.
    s.adopt(&a, &answer(&"f".repeat(36), None));
    s.forget(&a);
    assert_eq!(&*s.bound_to("a").unwrap(), "f".repeat(36).as_str());
    s.forget(&s.choose(Some("a"), None, true));
    assert_eq!(s.bound_to("a"), None);
    assert_eq!(s.bound_to("b"), Some(b.id));
    assert_eq!(s.by_use(), ["b"]);
}

#[test]
fn a_renewal_goes_to_the_expired_sessions_microvm_and_takes_it_over() {
    let (s, old, other, init) = renewal_of_old_beside_other();
    assert_eq!(init.id, old, "the microVM the old session provisioned");
    s.adopt(&init, &answer(&old, Some("new")));
    assert_eq!(s.bound_to("new"), Some(old.clone()));
    assert_eq!(s.bound_to("old"), None, "the old id is dead");
    assert_eq!(s.bound_to("other"), Some(other));
    assert_eq!(s.by_use(), ["other", "new"]);
    assert_eq!(s.choose(Some("new"), None, true).id, old);
    assert_ne!(s.choose(Some("old"), None, true).id, old, "never shared");
}

#[test]
fn a_renewal_holds_for_every_attempt_and_an_answer_without_the_header() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
    let old = s.choose(Some("old"), None, true).id;
    let first = s.choose(None, Some(&renewing("old")), true);
    // A later attempt of the call: the id its first attempt had, the same hint.
    let again = s.pinned(first.id.clone(), None, Some(&renewing("old")));
    let mut headers = HeaderMap::new();
    headers.insert("mcp-session-id", "new".parse().unwrap());
    s.adopt(&again, &headers);
    assert_eq!(s.bound_to("new"), Some(old));
    assert_eq!(s.by_use(), ["new"]);
}

#[test]
fn a_renewal_of_a_session_bound_to_none_gets_a_new_microvm() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
    let other = s.choose(Some("other"), None, true).id;
    let init = s.choose(None, Some(&renewing("unknown")), true);
    assert_ne!(init.id, other);
    s.adopt(&init, &answer(&init.id, Some("new")));
    assert_eq!(s.bound_to("new"), Some(init.id));
    assert_eq!(s.bound_to("other"), Some(other));
    assert_eq!(s.by_use(), ["other", "new"]);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_of_an_idle_binding_gets_a_new_microvm() {
    let s = per_mcp_session(Duration::from_secs(900), DEFAULT_MAX_BOUND);
    let old = s.choose(Some("old"), None, true).id;
    tokio::time::advance(Duration::from_secs(901)).await;
    let init = s.choose(None, Some(&renewing("old")), true);
    assert_ne!(init.id, old, "that microVM is gone");
    s.adopt(&init, &answer(&init.id, Some("new")));
    assert_eq!(s.by_use(), ["new"]);
}

#[test]
fn two_renewals_of_one_session_never_share_its_microvm() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
    let old = s.choose(Some("old"), None, true).id;
    let first = s.choose(None, Some(&renewing("old")), true);
    let second = s.choose(None, Some(&renewing("old")), true);
    assert_eq!((&first.id, &second.id), (&old, &old));
    s.adopt(&first, &answer(&old, Some("new-1")));
    s.adopt(&second, &answer(&old, Some("new-2")));
    assert_eq!(s.bound_to("new-1"), Some(old));
    assert_eq!(s.bound_to("new-2"), None, "the first took it over");
    assert_eq!(s.by_use(), ["new-1"]);
}

#[test]
fn a_renewal_never_takes_a_third_sessions_microvm() {
    let (s, old, other, init) = renewal_of_old_beside_other();
    s.adopt(&init, &answer(&other, Some("new")));
    assert_eq!(s.bound_to("new"), None);
    assert_eq!(
        s.bound_to("old"),
        Some(old),
        "nothing taken over: nothing dropped"
    );
    assert_eq!(s.bound_to("other"), Some(other));
}

#[test]
fn the_hint_changes_nothing_in_an_mcp_session_nor_per_layer() {
    let s = per_mcp_session(DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BOUND);
    let old = s.choose(Some("old"), None, true).id;
    let a = s.choose(Some("a"), Some(&renewing("old")), true);
    assert_ne!(a.id, old, "a request of an MCP session goes to its own");
    s.adopt(&a, &answer(&a.id, None));
    assert_eq!(s.bound_to("old"), Some(old));

    let layer = per_layer("a".repeat(36));
    let chosen = layer.choose(None, Some(&renewing("old")), true);
    assert_eq!(&*chosen.id, "a".repeat(36).as_str());
    layer.adopt(&chosen, &answer(&chosen.id, Some("new")));
    assert_eq!(layer.bound(), 0);
}

/// Bindings, lookups, stops and time in a seeded random mix, against a plain list kept in
/// order of use. The lifetime is longer than the run (some 16 hours): the idle time forgets.
#[tokio::test(start_paused = true)]
async fn the_bindings_match_a_plain_model() {
    const MAX: usize = 8;
    let idle = Duration::from_secs(60);
    let s = living(idle, MAX_RUNTIME_SESSION_TIME, MAX);
    let mut rng = fastrand::Rng::with_seed(7);
    // (MCP session, runtime session, last used), least recently used first.
    let mut model: Vec<(String, Arc<str>, Instant)> = Vec::new();
    for _ in 0..20_000 {
        let key = format!("mcp-{}", rng.usize(..16));
        let now = Instant::now();
        model.retain(|(_, _, used)| now.saturating_duration_since(*used) <= idle);
        let at = model.iter().position(|(k, _, _)| *k == key);
        match rng.u8(..10) {
            0..=5 => {
                let id = s.choose(Some(&key), None, true).id;
                match at {
                    Some(at) => {
                        let (k, kept, _) = model.remove(at);
                        assert_eq!(kept, id, "{key}");
                        model.push((k, kept, now));
                    }
                    None => {
                        if model.len() == MAX {
                            model.remove(0);
                        }
                        model.push((key, id, now));
                    }
                }
            }
            6 => {
                if let Some(chosen) = s.to_stop(&answer(&"x".repeat(36), Some(&key))) {
                    s.forget(&chosen);
                }
                if let Some(at) = at {
                    model.remove(at);
                }
            }
            _ => tokio::time::advance(Duration::from_secs(rng.u64(..20))).await,
        }
        let live: Vec<_> = model.iter().map(|(k, _, _)| k.clone()).collect();
        let kept = s.by_use();
        // Expired bindings may still be there until touched: they are the oldest.
        assert!(kept.ends_with(&live), "{kept:?} {live:?}");
    }
}
