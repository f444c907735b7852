use clap::CommandFactory;

use super::*;

const ARN: &str = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x-AbC123";
const GATEWAY: &str = "https://gw-abc.gateway.bedrock-agentcore.us-west-2.amazonaws.com/mcp";

fn parse(args: &[&str]) -> Result<Parsed, String> {
    parse_args(args.iter().map(OsString::from))
}

#[test]
fn check_takes_the_door_options() {
    let Parsed::Check(args) =
        parse(&["check", "--runtime-arn", ARN, "--region", "eu-west-1"]).unwrap()
    else {
        panic!()
    };
    assert_eq!(args.door, Door::Runtime(ARN.into()));
    assert_eq!(args.region.as_deref(), Some("eu-west-1"));
    assert_eq!(parse(&["check", "--help"]).unwrap(), Parsed::Help);
    // Only as the first argument.
    assert_eq!(
        parse(&["--runtime-arn", ARN, "check"]).unwrap_err(),
        "unexpected argument `check`"
    );
}

#[test]
fn every_option_is_read_in_both_spellings() {
    let parsed = parse(&[
        "--runtime-arn",
        ARN,
        "--region=eu-west-1",
        "--qualifier",
        "prod",
        "--endpoint=http://127.0.0.1:9",
        "--idempotent-tool",
        "add",
        "--idempotent-tool=echo",
        "--stop-session-on-exit",
        "--listen",
        "127.0.0.1:0",
        "--listen-token-file=/tmp/token",
        "--bearer-token-env=MCP_TOKEN",
        "--strict-tool",
        "charge",
        "--trust-tool-annotations",
        "--allow-tool=get_*",
        "--allow-tool",
        "list_?",
        "--deny-tool",
        "get_secret",
        "--read-only",
        "--timeout",
        "5m",
        "--idle-timeout=1500ms",
        "--no-tasks",
        "--max-task-duration=2d",
        "--bridge-modern-clients",
        "--runtime-user-id",
        "user-1",
        "--runtime-idle-timeout=2h",
        "--runtime-max-lifetime",
        "14d",
        "--header",
        "X-Amzn-Bedrock-AgentCore-Runtime-Custom-A=1",
        "--header=x-amzn-bedrock-agentcore-runtime-custom-b=x=y",
    ])
    .unwrap();
    let mut headers = Headers::default();
    headers.0.insert(
        "x-amzn-bedrock-agentcore-runtime-custom-a",
        "1".parse().unwrap(),
    );
    headers.0.insert(
        "x-amzn-bedrock-agentcore-runtime-custom-b",
        "x=y".parse().unwrap(),
    );
    assert_eq!(
        parsed,
        Parsed::Run(Box::new(Args {
            door: Door::Runtime(ARN.into()),
            region: Some("eu-west-1".into()),
            qualifier: Some("prod".into()),
            endpoint: Some("http://127.0.0.1:9".into()),
            signing_name: None,
            tokens: Some(TokenSource::Env("MCP_TOKEN".into())),
            idempotent_tools: vec!["add".into(), "echo".into()],
            strict_tools: vec!["charge".into()],
            trust_tool_annotations: true,
            allow_tools: vec!["get_*".into(), "list_?".into()],
            deny_tools: vec!["get_secret".into()],
            read_only: true,
            timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_millis(1500),
            tasks: false,
            max_task_duration: Some(Duration::from_secs(2 * 86_400)),
            bridge_modern_clients: true,
            runtime_user_id: Some("user-1".into()),
            runtime_idle_timeout: Some(Duration::from_secs(7200)),
            runtime_max_lifetime: Some(Duration::from_secs(1_209_600)),
            profile: None,
            stop_session_on_exit: true,
            listen: Some("127.0.0.1:0".parse().unwrap()),
            listen_token_file: Some("/tmp/token".into()),
            headers,
        }))
    );
    let Parsed::Run(args) = parse(&["--runtime-arn", ARN, "--profile", "dev"]).unwrap() else {
        panic!()
    };
    assert_eq!(args.profile.as_deref(), Some("dev"));
    // The defaults: AgentCore's 15 minutes for a synchronous request; 5 minutes idle.
    assert_eq!(args.timeout, Duration::from_secs(900));
    assert_eq!(args.idle_timeout, Duration::from_secs(300));
    assert!(!args.trust_tool_annotations && !args.read_only);
    assert!(args.tasks && args.max_task_duration.is_none() && !args.bridge_modern_clients);
    // The runtime's own settings: the library's defaults, AgentCore's.
    assert_eq!(
        (args.runtime_idle_timeout, args.runtime_max_lifetime),
        (None, None)
    );
    assert_eq!(parse(&["--runtime-arn", ARN, "-h"]).unwrap(), Parsed::Help);
    assert_eq!(parse(&["-V"]).unwrap(), Parsed::Version);
}

#[test]
fn each_door_is_read_with_its_auth() {
    let Parsed::Run(args) = parse(&[
        "--gateway-url",
        GATEWAY,
        "--bearer-token-command=get-token --audience 'x y'",
    ])
    .unwrap() else {
        panic!()
    };
    assert_eq!(args.door, Door::Gateway(GATEWAY.parse().unwrap()));
    assert_eq!(
        args.tokens,
        Some(TokenSource::Command("get-token --audience 'x y'".into()))
    );
    assert_eq!(args.signing_name, None);

    let Parsed::Run(args) = parse(&["--gateway-url", GATEWAY, "--region", "us-west-2"]).unwrap()
    else {
        panic!()
    };
    assert_eq!((args.tokens, args.region), (None, Some("us-west-2".into())));

    let url = "https://abc.execute-api.us-west-2.amazonaws.com/prod/mcp?stage=1";
    let Parsed::Run(args) = parse(&["--url", url, "--signing-name", "execute-api"]).unwrap() else {
        panic!()
    };
    assert_eq!(args.door, Door::Url(url.parse().unwrap()));
    assert_eq!(args.signing_name.as_deref(), Some("execute-api"));

    let Parsed::Run(args) = parse(&[
        "--url",
        "http://localhost:8080/mcp",
        "--bearer-token-env",
        "T",
    ])
    .unwrap() else {
        panic!()
    };
    assert_eq!(args.tokens, Some(TokenSource::Env("T".into())));
}

/// Each command line is refused with its message, which shows no secret.
fn assert_refused(cases: &[(&[&str], &str)]) {
    for (args, expected) in cases {
        let error = parse(args).unwrap_err();
        assert_eq!(&error, expected, "{args:?}");
        assert!(
            !error.contains("s3cr3t") && !error.contains("pa55"),
            "{error}"
        );
    }
}

/// What clap refuses, in the proxy's words.
#[test]
fn mistakes_in_the_argument_list_are_named() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[],
            "one of --runtime-arn, --gateway-url or --url is required",
        ),
        (
            &["--region", "us-east-1"],
            "one of --runtime-arn, --gateway-url or --url is required",
        ),
        (&["--runtime-arn"], "--runtime-arn needs a value"),
        (&["--runtime-arn="], "--runtime-arn needs a non-empty value"),
        (
            &["--runtime-arn", ARN, "--runtime-arn", ARN],
            "--runtime-arn is given twice",
        ),
        (&["--runtime-arn", ARN, "--nope"], "unknown option `--nope`"),
        (
            &["--runtime-arn", ARN, "stray"],
            "unexpected argument `stray`",
        ),
        (
            &["--runtime-arn", ARN, "--stop-session-on-exit=yes"],
            "--stop-session-on-exit takes no value",
        ),
        (
            &["--runtime-arn", ARN, "--listen-token-file", "/tmp/t"],
            "--listen-token-file needs --listen",
        ),
        (
            &["--runtime-arn", ARN, "--listen", "8080"],
            "--listen 8080: not an ADDRESS:PORT (e.g. 127.0.0.1:8765, [::1]:8765, \
             localhost:8765)",
        ),
    ];
    assert_refused(cases);
}

/// One door, one token source; a door's own options with that door only.
#[test]
fn options_that_do_not_go_together_are_named() {
    let url = "https://example.com/mcp";
    let cases: &[(&[&str], &str)] = &[
        // One door.
        (
            &[
                "--url",
                url,
                "--runtime-arn",
                ARN,
                "--bearer-token-env",
                "T",
            ],
            "--runtime-arn and --url exclude each other: give one of them",
        ),
        (
            &["--gateway-url", GATEWAY, "--url", url],
            "--gateway-url and --url exclude each other: give one of them",
        ),
        // One token source.
        (
            &[
                "--url",
                url,
                "--bearer-token-env",
                "T",
                "--bearer-token-command",
                "get-token",
            ],
            "--bearer-token-env and --bearer-token-command exclude each other: give one of \
             them",
        ),
        (
            &["--url", url, "--bearer-token-env", "A=B"],
            "--bearer-token-env A=B: not an environment variable name",
        ),
        // Runtime flags with a URL.
        (
            &["--gateway-url", GATEWAY, "--qualifier", "prod"],
            "--qualifier applies to --runtime-arn only, not to --gateway-url",
        ),
        (
            &["--url", url, "--bearer-token-env", "T", "--endpoint", url],
            "--endpoint applies to --runtime-arn only, not to --url",
        ),
        (
            &["--gateway-url", GATEWAY, "--stop-session-on-exit"],
            "--stop-session-on-exit applies to --runtime-arn only, not to --gateway-url",
        ),
        (
            &["--gateway-url", GATEWAY, "--runtime-user-id", "u"],
            "--runtime-user-id applies to --runtime-arn only, not to --gateway-url",
        ),
        (
            &["--gateway-url", GATEWAY, "--runtime-idle-timeout", "1h"],
            "--runtime-idle-timeout applies to --runtime-arn only, not to --gateway-url",
        ),
        (
            &[
                "--url",
                url,
                "--bearer-token-env",
                "T",
                "--runtime-max-lifetime=1d",
            ],
            "--runtime-max-lifetime applies to --runtime-arn only, not to --url",
        ),
        // The signing name.
        (
            &["--url", url],
            "--url needs --signing-name NAME (SigV4: e.g. execute-api for API Gateway, \
             lambda for a Lambda function URL) or a bearer token (--bearer-token-env or \
             --bearer-token-command)",
        ),
        (
            &[
                "--url",
                url,
                "--signing-name",
                "lambda",
                "--bearer-token-command",
                "t",
            ],
            "--signing-name is for SigV4, and --bearer-token-command sends a bearer token \
             instead: give one of them",
        ),
        (
            &["--gateway-url", GATEWAY, "--signing-name", "lambda"],
            "--signing-name applies to --url only: --gateway-url signs for bedrock-agentcore",
        ),
        (
            &["--runtime-arn", ARN, "--signing-name", "lambda"],
            "--signing-name applies to --url only: --runtime-arn signs for bedrock-agentcore",
        ),
    ];
    assert_refused(cases);
}

/// A value read alone: a DURATION; the daily-use options.
#[test]
fn bad_values_are_named() {
    let cases: &[(&[&str], &str)] = &[
        // The daily-use options.
        (
            &["--runtime-arn", ARN, "--timeout", "soon"],
            "--timeout soon: not a DURATION (a whole number and a unit: 1500ms, 90s, 5m, \
             1h, 2d; alone, seconds)",
        ),
        (
            &["--runtime-arn", ARN, "--max-task-duration", "15d"],
            "--max-task-duration 15d: the duration must be at most 14d",
        ),
        (
            &["--runtime-arn", ARN, "--runtime-idle-timeout", "1209601s"],
            "--runtime-idle-timeout 1209601s: the duration must be at most 14d",
        ),
        (
            &["--runtime-arn", ARN, "--runtime-max-lifetime=337h"],
            "--runtime-max-lifetime 337h: the duration must be at most 14d",
        ),
        (
            &["--runtime-arn", ARN, "--runtime-max-lifetime", "8 h"],
            "--runtime-max-lifetime 8 h: not a DURATION (a whole number and a unit: \
             1500ms, 90s, 5m, 1h, 2d; alone, seconds)",
        ),
        (
            &[
                "--runtime-arn",
                ARN,
                "--runtime-idle-timeout=1h",
                "--runtime-idle-timeout=2h",
            ],
            "--runtime-idle-timeout is given twice",
        ),
        (
            &["--runtime-arn", ARN, "--no-tasks=yes"],
            "--no-tasks takes no value",
        ),
        (
            &["--runtime-arn", ARN, "--idle-timeout=0s"],
            "--idle-timeout 0s: the duration must be more than zero",
        ),
        (
            &["--runtime-arn", ARN, "--timeout", "1m", "--timeout", "2m"],
            "--timeout is given twice",
        ),
        (
            &["--runtime-arn", ARN, "--read-only=yes"],
            "--read-only takes no value",
        ),
        (
            &["--runtime-arn", ARN, "--trust-tool-annotations=no"],
            "--trust-tool-annotations takes no value",
        ),
        (
            &["--runtime-arn", ARN, "--allow-tool="],
            "--allow-tool needs a non-empty value",
        ),
        (
            &[
                "--runtime-arn",
                ARN,
                "--idempotent-tool",
                "a",
                "--strict-tool",
                "a",
            ],
            "a is given to both --idempotent-tool and --strict-tool: a tool is one or the \
             other",
        ),
        (
            &[
                "--runtime-arn",
                ARN,
                "--profile",
                "dev",
                "--bearer-token-env",
                "T",
            ],
            "--profile is for SigV4 (the AWS credentials of that profile), and \
             --bearer-token-env sends a bearer token instead: give one of them",
        ),
    ];
    assert_refused(cases);
}

/// A URL: absolute, https (http for loopback only), no user, password or fragment; shown
/// without its query.
#[test]
fn bad_urls_are_named() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--url", "example.com/mcp"],
            "--url: not a URL (https://HOST/PATH, e.g. https://example.com/mcp)",
        ),
        (
            &["--gateway-url", "https://"],
            "--gateway-url: not a URL (https://HOST/PATH, e.g. https://example.com/mcp)",
        ),
        (
            &["--url", "ftp://example.com/mcp"],
            "--url: the scheme `ftp` is not https",
        ),
        (
            &["--url", "https://user:pa55@example.com/mcp"],
            "--url: the URL carries a user or password; give a token with \
             --bearer-token-env or --bearer-token-command instead",
        ),
        (
            &["--url", "http://example.com/mcp?key=s3cr3t"],
            "--url http://example.com/mcp?…: http:// is for a loopback test server only \
             (localhost, 127.0.0.1, [::1]): the request's credentials would cross the \
             network in the clear; use https://",
        ),
        (
            &["--url", "https://example.com/mcp#part"],
            "--url: the URL has a fragment (#…), which is never sent",
        ),
    ];
    assert_refused(cases);
}

/// `--header`: the message names the rule, never the value.
#[test]
fn bad_headers_are_named_without_their_value() {
    let cases: &[(&[&str], &str)] = &[
        // The headers: the message names the rule, never the value.
        (
            &["--gateway-url", GATEWAY, "--header", "x-key"],
            "--header takes NAME=VALUE",
        ),
        (
            &["--gateway-url", GATEWAY, "--header", "x key=s3cr3t"],
            "--header \"x key\": not a header name (letters, digits, `-`, `_`)",
        ),
        (
            &["--gateway-url", GATEWAY, "--header", "x-key=s3cr3t\n"],
            "--header x-key: the value is not a header value (visible text, no line breaks)",
        ),
        (
            &[
                "--gateway-url",
                GATEWAY,
                "--header",
                "X-Key=s3cr3t",
                "--header",
                "x-key=b",
            ],
            "--header x-key is given twice (names are case-insensitive)",
        ),
    ];
    assert_refused(cases);
}

/// Each value is the next argument, whatever it looks like: a value is never taken for an
/// option (`--bearer-token-command '--flag'`, a tool named like an option, `check`).
#[test]
fn a_value_that_looks_like_an_option_is_a_value() {
    let Parsed::Run(args) = parse(&[
        "--runtime-arn",
        "check",
        "--idempotent-tool",
        "--read-only",
        "--strict-tool=-h",
        "--bearer-token-command",
        "--version",
    ])
    .unwrap() else {
        panic!()
    };
    assert_eq!(args.door, Door::Runtime("check".into()));
    assert_eq!(args.idempotent_tools, ["--read-only"]);
    assert_eq!(args.strict_tools, ["-h"]);
    assert!(!args.read_only);
    assert_eq!(args.tokens, Some(TokenSource::Command("--version".into())));
}

/// A flag given twice is the flag given; `--help` and `--version` answer whatever comes after
/// them, not what comes before.
#[test]
fn flags_may_repeat_and_help_is_read_where_it_stands() {
    let Parsed::Run(args) = parse(&[
        "--runtime-arn",
        ARN,
        "--read-only",
        "--read-only",
        "--no-tasks",
        "--no-tasks",
    ])
    .unwrap() else {
        panic!()
    };
    assert!(args.read_only && !args.tasks);
    assert_eq!(parse(&["--help", "--nope"]).unwrap(), Parsed::Help);
    assert_eq!(parse(&["check", "-V", "stray"]).unwrap(), Parsed::Version);
    assert_eq!(
        parse(&["--nope", "--help"]).unwrap_err(),
        "unknown option `--nope`"
    );
}

/// The options clap knows, each with the word its value is named by (`--timeout DURATION`),
/// `...` after a repeatable one.
fn declared() -> Vec<String> {
    let command = options::Cli::command();
    command
        .get_arguments()
        .filter_map(|arg| {
            let long = arg.get_long()?;
            let mut named = format!("--{long}");
            if arg.get_action().takes_values() {
                for value in arg.get_value_names().into_iter().flatten() {
                    named.push_str(&format!(" {value}"));
                }
            }
            Some(named)
        })
        .collect()
}

#[test]
fn the_synopsis_names_every_option_and_no_other() {
    let synopsis = manual::SYNOPSIS;
    for option in declared() {
        assert!(
            synopsis.contains(&option),
            "{option} is not in the synopsis"
        );
    }
    let long: Vec<String> = declared()
        .iter()
        .map(|named| named.split(' ').next().unwrap().to_owned())
        .collect();
    for word in synopsis.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        if word.starts_with("--") {
            assert!(long.iter().any(|l| l == word), "{word} is no option");
        }
    }
    // A repeatable option says so.
    let command = options::Cli::command();
    for arg in command.get_arguments() {
        if matches!(arg.get_action(), clap::ArgAction::Append) {
            let long = arg.get_long().unwrap();
            assert!(synopsis.contains(&format!("--{long} ")), "{long}");
            let at = synopsis.find(&format!("[--{long} ")).unwrap();
            assert!(synopsis[at..].split_once(']').unwrap().1.starts_with("..."));
        }
    }
}

#[test]
fn the_manual_and_the_usage_come_from_the_same_command() {
    options::Cli::command().debug_assert();
    let page = help();
    let synopsis = &page[page.find("SYNOPSIS\n").unwrap()..page.find("DESCRIPTION\n").unwrap()];
    let usage = usage();
    assert!(usage.starts_with("usage: agentcore-mcp-proxy --runtime-arn ARN"));
    // The same lines, said at another indentation.
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        words(&synopsis["SYNOPSIS".len()..]),
        words(&usage["usage:".len()..])
    );
    // Every option has its entry, its heading four columns in.
    for option in declared()
        .iter()
        .filter(|o| !["--help", "--version"].contains(&o.as_str()))
    {
        assert!(page.contains(&format!("\n    {option}\n")), "{option}");
    }
    assert!(page.contains("\n    -h, --help\n") && page.contains("\n    -V, --version\n"));
    // A default is said in its option's entry.
    let command = options::Cli::command();
    for arg in command.get_arguments() {
        for default in arg.get_default_values() {
            let entry = arg.get_long_help().or(arg.get_help()).unwrap().to_string();
            let default = default.to_str().unwrap();
            assert!(entry.contains(&format!("Default: {default}")), "{default}");
        }
    }
    for line in page.lines().chain(usage.lines()) {
        assert!(line.chars().count() <= 80, "{line}");
    }
}
