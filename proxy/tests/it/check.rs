//! `agentcore-mcp-proxy check` through the built binary, against the emulator: exit 0 and the
//! server, the tools and their replay status when all is well; non-zero with the kind of what
//! went wrong otherwise.

use std::process::{Command, Output};

use agentcore_tower::emulator::{Emulator, EmulatorConfig};

const SECRET: &str = "check-token-s3cr3t";

/// `check` with `args`, the emulator's credentials in the environment and nothing else of AWS.
fn check(emulator: &Emulator, arn: &str, args: &[&str]) -> Output {
    let credentials = emulator.credentials();
    let endpoint = emulator.endpoint();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentcore-mcp-proxy"));
    command
        .args(["check", "--runtime-arn", arn, "--endpoint", &endpoint])
        .args(args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AWS_") {
            command.env_remove(name);
        }
    }
    let nowhere = std::env::temp_dir().join("agentcore-mcp-proxy-check-no-such-aws-config");
    command
        .env("AWS_CONFIG_FILE", &nowhere)
        .env("AWS_SHARED_CREDENTIALS_FILE", &nowhere)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", credentials.access_key_id())
        .env("AWS_SECRET_ACCESS_KEY", credentials.secret_access_key())
        .env("AWS_SESSION_TOKEN", credentials.session_token().unwrap())
        .env("CHECK_TOKEN", SECRET)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_passes_against_a_healthy_runtime() {
    // A server of the initialize era: `check` probes with server/discover, then falls back.
    let config = EmulatorConfig::default().newest_protocol_version("2025-11-25");
    let emulator = Emulator::start(config).await.unwrap();
    let output = check(
        &emulator,
        emulator.runtime_arn(),
        &["--idempotent-tool", "add", "--strict-tool", "echo"],
    );
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("credentials: SigV4, from EnvironmentVariable"),
        "{text}"
    );
    assert!(text.contains("region:      us-east-1"), "{text}");
    assert!(
        text.contains("server:      agentcore-tower-emulator"),
        "{text}"
    );
    assert!(
        text.contains("protocol:    2025-06-18 (initialize)"),
        "{text}"
    );
    // Probed with the current revision first; the emulator's server is met as an older one.
    assert!(text.contains("server/discover: not known"), "{text}");
    assert!(
        text.contains("  add: declared idempotent (--idempotent-tool)"),
        "{text}"
    );
    assert!(text.contains("  echo: strict (--strict-tool)"), "{text}");
    assert!(text.contains(": not replayable"), "{text}");
    // The attempt record of each request.
    assert!(text.contains("#1 "), "{text}");
    assert!(text.ends_with("ok\n"), "{text}");
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
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let output = check(
        &emulator,
        emulator.runtime_arn(),
        &["--idempotent-tool", "add"],
    );
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("server:      agentcore-tower-emulator"),
        "{text}"
    );
    assert!(
        text.contains("protocol:    2026-07-28 (server/discover; no initialize)"),
        "{text}"
    );
    // The tools of the current revision are listed to a client of it.
    assert!(
        text.contains("  add: declared idempotent (--idempotent-tool)"),
        "{text}"
    );
    assert!(text.contains("  confirm: not replayable"), "{text}");
    assert!(text.ends_with("ok\n"), "{text}");
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
async fn check_fails_with_the_kind_for_an_unknown_runtime_and_the_wrong_door() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let output = check(
        &emulator,
        "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/nobody-AbC123",
        &[],
    );
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("kind:        not_found"), "{text}");
    assert!(text.contains("ResourceNotFoundException"), "{text}");

    let emulator = Emulator::start(EmulatorConfig::default().bearer_tokens([SECRET]))
        .await
        .unwrap();
    let output = check(&emulator, emulator.runtime_arn(), &[]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("kind:        auth_method_mismatch"), "{text}");
    assert!(
        text.contains("give --bearer-token-env VAR or --bearer-token-command CMD"),
        "{text}"
    );
    // With the token, it passes, and says where the token came from.
    let output = check(
        &emulator,
        emulator.runtime_arn(),
        &["--bearer-token-env", "CHECK_TOKEN"],
    );
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(
        text.contains("credentials: bearer token from $CHECK_TOKEN (--bearer-token-env)"),
        "{text}"
    );
    assert!(!text.contains(SECRET), "{text}");
    assert!(!String::from_utf8_lossy(&output.stderr).contains(SECRET));
}

#[test]
fn check_does_not_listen() {
    let output = Command::new(env!("CARGO_BIN_EXE_agentcore-mcp-proxy"))
        .args([
            "check",
            "--runtime-arn",
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x-AbC123",
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not take --listen"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_fails_with_the_kind_for_expired_credentials_a_denial_and_throttling() {
    use agentcore_tower::contract::PlatformError;
    use agentcore_tower::emulator::{Fault, PlatformForm, RetryAfter};
    let cases: [(&[Fault], &str, &str); 3] = [
        // Re-signed once with credentials resolved again (the same here), then delivered.
        (
            &[Fault::ExpiredToken; 2],
            "expired_credentials",
            "the AWS credentials have expired: refresh them (for an SSO profile: aws sso login \
             --profile NAME)",
        ),
        (
            &[Fault::Platform {
                error: PlatformError::AccessDenied,
                form: PlatformForm::Http,
            }],
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
        let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
        for fault in faults {
            emulator.push_request_fault(*fault);
        }
        let output = check(&emulator, emulator.runtime_arn(), &[]);
        let text = stdout(&output);
        assert_eq!(output.status.code(), Some(1), "{text}");
        assert!(text.contains(&format!("kind:        {kind}")), "{text}");
        assert!(text.contains(advice), "{text}");
        assert!(!text.contains("\nok\n"), "{text}");
    }
}

/// An SSO profile whose cached token expired: check says so and names the login to run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_the_sso_login_for_an_expired_sso_session() {
    let emulator = Emulator::start(EmulatorConfig::default()).await.unwrap();
    let home = std::env::temp_dir().join(format!("agentcore-check-sso-{}", std::process::id()));
    let cache = home.join(".aws/sso/cache");
    std::fs::create_dir_all(&cache).unwrap();
    // The cache file of an sso-session is named by the SHA-1 of the session's name.
    std::fs::write(
        cache.join("eb14ee413f71370f02c4d13f6204a61ec4e69bb2.json"),
        r#"{"accessToken": "expired-sso-access-token", "expiresAt": "2020-01-01T00:00:00Z",
            "region": "us-east-1", "startUrl": "https://example.awsapps.com/start"}"#,
    )
    .unwrap();
    let config = home.join("config");
    std::fs::write(
        &config,
        "[profile work]\nsso_session = check-sso\nsso_account_id = 123456789012\n\
         sso_role_name = Dev\nregion = us-east-1\n\n[sso-session check-sso]\n\
         sso_start_url = https://example.awsapps.com/start\nsso_region = us-east-1\n",
    )
    .unwrap();
    let endpoint = emulator.endpoint();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentcore-mcp-proxy"));
    command.args([
        "check",
        "--runtime-arn",
        emulator.runtime_arn(),
        "--endpoint",
        &endpoint,
        "--profile",
        "work",
    ]);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("AWS_") {
            command.env_remove(name);
        }
    }
    let output = command
        .env("HOME", &home)
        .env("AWS_CONFIG_FILE", &config)
        .env("AWS_SHARED_CREDENTIALS_FILE", home.join("none"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&home);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("credentials: SigV4, cannot be resolved, profile work"),
        "{text}"
    );
    assert!(
        text.contains("run `aws sso login --profile work`"),
        "{text}"
    );
    assert!(!text.contains("expired-sso-access-token"), "{text}");
}
