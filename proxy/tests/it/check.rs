//! `agentcore-mcp-proxy check` through the built binary, against the emulator: exit 0 and the
//! server, the tools and their replay status when all is well; non-zero with the kind of what
//! went wrong otherwise.

use std::process::Command;

use agentcore_tower_emulator::{Emulator, EmulatorConfig};

use crate::common::{
    ARN, ExpiredSso, NOBODY, command, credentials_env, http_refusal, pairs, run, runtime_args,
    start_emulator, strs,
};

const SECRET: &str = "check-token-s3cr3t";

/// `check` with `args` and `env` ([`command`]; no `RUST_LOG`).
fn check_command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    let mut command = command(&all, env);
    command.env_remove("RUST_LOG");
    command
}

/// `check` of the runtime `arn` at `emulator`'s endpoint with `args`, the emulator's
/// credentials in the environment and nothing else of AWS.
fn check_of(emulator: &Emulator, arn: &str, args: &[&str]) -> Command {
    let endpoint = emulator.endpoint();
    let mut all = vec!["--runtime-arn", arn, "--endpoint", &endpoint];
    all.extend_from_slice(args);
    let credentials = credentials_env(emulator);
    let mut env = pairs(&credentials);
    env.push(("CHECK_TOKEN", SECRET));
    check_command(&all, &env)
}

/// [`check_of`], which must exit with `code`: what it printed.
fn check(emulator: &Emulator, arn: &str, args: &[&str], code: i32) -> String {
    printed(check_of(emulator, arn, args), code)
}

/// [`check`] of `emulator`'s runtime with `args` passes: what it printed, which holds each of
/// `lines` and ends with `ok`.
fn passes(emulator: &Emulator, args: &[&str], lines: &[&str]) -> String {
    let text = check(emulator, emulator.runtime_arn(), args, 0);
    says(&text, lines);
    assert!(text.ends_with("ok\n"), "{text}");
    text
}

/// `text` holds each of `lines`.
fn says(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
}

/// What `command` printed on stdout; it must exit with `code`.
fn printed(command: Command, code: i32) -> String {
    let (stdout, _) = run(command, code);
    String::from_utf8_lossy(&stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_against_a_healthy_runtime() {
    // A server of the initialize era: `check` probes with server/discover, then falls back.
    let config = EmulatorConfig::default().newest_protocol_version("2025-11-25");
    let emulator = start_emulator(config).await;
    let args = ["--idempotent-tool", "add", "--strict-tool", "echo"];
    let text = passes(
        &emulator,
        &args,
        &[
            "credentials: SigV4, from EnvironmentVariable",
            "region:      us-east-1",
            "server:      agentcore-tower-emulator",
            "protocol:    2025-06-18 (initialize)",
            "era:         initialize only (no server/discover): a client pinned to 2026-07-28 \
             needs --bridge-modern-clients",
            // Probed with the current revision first; the emulator's server is met as an older
            // one.
            "server/discover: not known",
            "  add: declared idempotent (--idempotent-tool)",
            "  echo: strict (--strict-tool)",
            ": not replayable",
            // The attempt record of each request.
            "#1 ",
        ],
    );
    let credentials = emulator.credentials();
    assert!(!text.contains(credentials.secret_access_key()), "{text}");
    assert!(
        !text.contains(credentials.session_token().unwrap()),
        "{text}"
    );
    assert_eq!(emulator.audit().signature_failures, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_meets_a_server_of_the_current_revision_without_initialize() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let text = passes(
        &emulator,
        &["--idempotent-tool", "add"],
        &[
            "server:      agentcore-tower-emulator",
            "protocol:    2026-07-28 (server/discover; no initialize)",
            "era:         both (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28)",
            // The tools of the current revision are listed to a client of it.
            "  add: declared idempotent (--idempotent-tool)",
            "  confirm: not replayable",
        ],
    );
    let audit = emulator.audit();
    let methods: Vec<_> = audit
        .received
        .iter()
        .filter_map(|r| r.method.as_deref())
        .collect();
    assert_eq!(methods, ["server/discover", "tools/list"], "{text}");
    assert_eq!(audit.mcp_sessions_started, 0);
    assert_eq!(audit.header_mismatches, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_a_server_of_2026_07_28_only() {
    let config = EmulatorConfig::default().oldest_protocol_version("2026-07-28");
    let emulator = start_emulator(config).await;
    passes(
        &emulator,
        &[],
        &[
            "protocol:    2026-07-28 (server/discover; no initialize)",
            "era:         2026-07-28 only: a client of the initialize era is bridged",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_with_the_kind_for_an_unknown_runtime_and_the_wrong_door() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let text = check(&emulator, NOBODY, &[], 1);
    says(
        &text,
        &["kind:        not_found", "ResourceNotFoundException"],
    );

    let emulator = start_emulator(EmulatorConfig::default().bearer_tokens([SECRET])).await;
    let text = check(&emulator, emulator.runtime_arn(), &[], 1);
    says(
        &text,
        &[
            "kind:        auth_method_mismatch",
            "give --bearer-token-env VAR or --bearer-token-command CMD",
        ],
    );
    // With the token, it passes, and says where the token came from.
    let args = ["--bearer-token-env", "CHECK_TOKEN"];
    let (stdout, stderr) = run(check_of(&emulator, emulator.runtime_arn(), &args), 0);
    let text = String::from_utf8_lossy(&stdout);
    assert!(
        text.contains("credentials: bearer token from $CHECK_TOKEN (--bearer-token-env)"),
        "{text}"
    );
    assert!(!text.contains(SECRET), "{text}");
    assert!(!stderr.contains(SECRET));
}

#[test]
fn check_does_not_listen() {
    let check = check_command(&["--runtime-arn", ARN, "--listen", "127.0.0.1:0"], &[]);
    let (_, stderr) = run(check, 2);
    assert!(stderr.contains("does not take --listen"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_with_the_kind_for_expired_credentials_a_denial_and_throttling() {
    use agentcore_tower::contract::PlatformError;
    use agentcore_tower_emulator::{Fault, RetryAfter};
    let cases: [(&[Fault], &str, &str); 3] = [
        // Re-signed once with credentials resolved again (the same here), then delivered.
        (
            &[Fault::ExpiredToken; 2],
            "expired_credentials",
            "the AWS credentials have expired: refresh them (for an SSO profile: aws sso login \
             --profile NAME)",
        ),
        (
            &[http_refusal(PlatformError::AccessDenied)],
            "access_denied",
            "not allowed bedrock-agentcore:InvokeAgentRuntime",
        ),
        (
            &[Fault::Throttle {
                retry_after: Some(RetryAfter::Seconds(0)),
            }; 64],
            "throttled",
            "still throttled after the proxy's waits",
        ),
    ];
    for (faults, kind, advice) in cases {
        let emulator = start_emulator(EmulatorConfig::default()).await;
        for fault in faults {
            emulator.push_request_fault(*fault);
        }
        let text = check(&emulator, emulator.runtime_arn(), &[], 1);
        assert!(text.contains(&format!("kind:        {kind}")), "{text}");
        assert!(text.contains(advice), "{text}");
        assert!(!text.contains("\nok\n"), "{text}");
    }
}

/// An SSO profile whose cached token expired: check says so and names the login to run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_the_sso_login_for_an_expired_sso_session() {
    let emulator = start_emulator(EmulatorConfig::default()).await;
    let sso = ExpiredSso::new("check-sso");
    let args = runtime_args(&emulator, &["--profile", "work"]);
    let mut command = check_command(&strs(&args), &sso.env());
    // The region is the profile's.
    command.env_remove("AWS_REGION");
    let text = printed(command, 1);
    says(
        &text,
        &[
            "credentials: SigV4, cannot be resolved, profile work",
            "run `aws sso login --profile work`",
        ],
    );
    assert!(!text.contains("expired-sso-access-token"), "{text}");
}
