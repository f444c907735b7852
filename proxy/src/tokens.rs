//! The bearer token of `--bearer-token-env` and `--bearer-token-command`: read when asked, and
//! asked again after a 401. A token is a secret: it is never logged, printed or put in an
//! error, and neither is what a token command prints on its standard output.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentcore_tower::BoxError;
use agentcore_tower::auth::{BearerToken, ProvideToken, TokenFuture};
use serde_json::Value;
use tracing::{debug, warn};

use crate::cli::TokenSource;

/// A JWT whose `exp` is this close is fetched anew before it is used.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(60);
/// The longest a token command may run.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of a token command's output is read.
const OUTPUT_LIMIT: u64 = 64 * 1024;

/// The token provider for `source`, its first token read: a variable not set or a command that
/// fails is known before anything starts. The error is the message, and never has the token.
pub async fn provider(source: &TokenSource) -> Result<Tokens, TokenError> {
    match source {
        TokenSource::Env(name) => Ok(Tokens::Env(Arc::new(EnvToken::new(name)?))),
        TokenSource::Command(command) => {
            let tokens = CommandToken::new(command.clone());
            tokens
                .get(None)
                .await
                .map_err(|e| TokenError::Failed(e.to_string()))?;
            Ok(Tokens::Command(tokens))
        }
    }
}

/// Why there is no first token.
#[derive(Debug)]
pub enum TokenError {
    /// The command line names something unusable (a variable not set): exit code 2.
    Usage(String),
    /// The command failed: exit code 1.
    Failed(String),
}

/// Either provider, as the layers take one.
#[derive(Clone)]
pub enum Tokens {
    Env(Arc<EnvToken>),
    Command(CommandToken),
}

impl ProvideToken for Tokens {
    /// A variable cannot change under a running process: a refused token from one is
    /// answered, not sent again with the same value.
    fn can_refresh(&self) -> bool {
        !matches!(self, Tokens::Env(_))
    }

    fn provide_token(&self, refused: Option<&BearerToken>) -> TokenFuture {
        match self {
            Tokens::Env(env) => {
                let result = env.get(refused.is_some());
                Box::pin(async move { result })
            }
            Tokens::Command(command) => {
                let command = command.clone();
                let refused = refused.cloned();
                Box::pin(async move { command.get(refused.as_ref()).await })
            }
        }
    }
}

/// `--bearer-token-env VAR`: the variable's value, read at start (and again if asked to
/// refresh, which the proxy does not do: see [`Tokens::can_refresh`]).
pub struct EnvToken {
    name: String,
    token: Mutex<BearerToken>,
}

impl EnvToken {
    fn new(name: &str) -> Result<Self, TokenError> {
        let token = read_env(name).map_err(TokenError::Usage)?;
        Ok(Self {
            name: name.to_owned(),
            token: Mutex::new(token),
        })
    }

    fn get(&self, refresh: bool) -> Result<BearerToken, BoxError> {
        let mut token = self.token.lock().unwrap_or_else(|p| p.into_inner());
        if refresh {
            debug!(variable = %self.name, "the bearer token was refused: reading it again");
            *token = read_env(&self.name)?;
        }
        Ok(token.clone())
    }
}

/// The token in the variable `name`; the error names the variable, never its value.
fn read_env(name: &str) -> Result<BearerToken, String> {
    let shown = format!("--bearer-token-env {name}");
    let value = match std::env::var(name) {
        Ok(value) => value,
        Err(std::env::VarError::NotPresent) => {
            return Err(format!("{shown}: the variable is not set"));
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            return Err(format!("{shown}: the variable's value is not text"));
        }
    };
    check_token(value.trim()).map_err(|why| match why {
        None => format!("{shown}: the variable is empty"),
        Some(why) => format!("{shown}: the variable is not a usable bearer token ({why})"),
    })
}

/// A token as it may go in `Authorization: Bearer …`, by the library's own check of every
/// attempt ([`BearerToken::check`]), so a token taken at start is never refused per request.
/// `Err(None)` for no token at all, else which rule it breaks — never what was there.
fn check_token(token: &str) -> Result<BearerToken, Option<String>> {
    if token.is_empty() {
        return Err(None);
    }
    let token = BearerToken::new(token);
    token.check().map_err(Some)?;
    Ok(token)
}

/// `--bearer-token-command CMD`: the trimmed standard output of CMD run by the shell, cached;
/// run again when the server refused the cached token, or when the token is a JWT that expires
/// within [`EXPIRY_MARGIN`]. One run at a time: requests that wait for it take its token, and a
/// request refused with a token already replaced takes the replacement.
#[derive(Clone)]
pub struct CommandToken(Arc<CommandInner>);

struct CommandInner {
    command: String,
    cached: Mutex<Option<Cached>>,
    /// Held while the command runs.
    running: tokio::sync::Mutex<()>,
    /// How many tokens were fetched: which fetch a cached token came from.
    fetched: AtomicU64,
}

#[derive(Clone)]
struct Cached {
    token: BearerToken,
    /// The JWT's `exp` (seconds since the epoch), when it is one.
    expires: Option<u64>,
    /// Its number in [`CommandInner::fetched`].
    generation: u64,
}

impl CommandToken {
    pub fn new(command: String) -> Self {
        Self(Arc::new(CommandInner {
            command,
            cached: Mutex::new(None),
            running: tokio::sync::Mutex::new(()),
            fetched: AtomicU64::new(0),
        }))
    }

    fn cached(&self) -> Option<Cached> {
        self.0
            .cached
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The token: the cached one, unless it is the one the server `refused` or it expires
    /// soon; else the command's. Requests refused with one token run the command once: the
    /// others take its token, whether they waited for the run or came after it — even when
    /// the command printed the refused token again (a CLI that hands out its cached token).
    pub async fn get(&self, refused: Option<&BearerToken>) -> Result<BearerToken, BoxError> {
        // The fetch this request saw: one made after it is a fresh answer, whatever it holds.
        let seen = self.cached().map(|c| c.generation);
        let usable = || {
            self.cached()
                .filter(|c| {
                    (refused != Some(&c.token) || Some(c.generation) != seen)
                        && !expires_soon(c.expires, SystemTime::now())
                })
                .map(|c| c.token)
        };
        if let Some(token) = usable() {
            return Ok(token);
        }
        let _running = self.0.running.lock().await;
        // Fetched while this request waited.
        if let Some(token) = usable() {
            return Ok(token);
        }
        let command = self.0.command.clone();
        let token = tokio::task::spawn_blocking(move || run_command(&command, COMMAND_TIMEOUT))
            .await
            .map_err(|e| format!("--bearer-token-command: {e}"))??;
        let expires = jwt_expiry(&token);
        if expires_soon(expires, SystemTime::now()) {
            warn!(
                "the token --bearer-token-command printed expires within {} s",
                EXPIRY_MARGIN.as_secs()
            );
        }
        let generation = self.0.fetched.fetch_add(1, Ordering::SeqCst) + 1;
        debug!(
            generation,
            jwt_expiry = expires,
            "--bearer-token-command gave a token"
        );
        *self.0.cached.lock().unwrap_or_else(|p| p.into_inner()) = Some(Cached {
            token: token.clone(),
            expires,
            generation,
        });
        Ok(token)
    }
}

/// The `exp` claim of a JWT (seconds since the epoch; see [`BearerToken::jwt_claims`]). `None`
/// for a token that is not a JWT, or has no `exp`.
pub fn jwt_expiry(token: &BearerToken) -> Option<u64> {
    match token.jwt_claims()?.get("exp")? {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0)
                .map(|f| f as u64)
        }),
        _ => None,
    }
}

/// Whether a token expiring at `expires` is within [`EXPIRY_MARGIN`] of `now` (or past).
pub fn expires_soon(expires: Option<u64>, now: SystemTime) -> bool {
    let Some(expires) = expires else {
        return false;
    };
    let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    expires <= now.saturating_add(EXPIRY_MARGIN.as_secs())
}

/// The shell that runs a token command: `sh -c` (`cmd /C` on Windows). On Unix it leads a
/// process group of its own, so that [`stop`] reaches whatever the command started too.
fn shell(command: &str) -> Command {
    #[cfg(windows)]
    {
        use std::os::windows::process::CommandExt;
        let mut shell = Command::new("cmd");
        shell.arg("/C").raw_arg(command);
        shell
    }
    #[cfg(not(windows))]
    {
        let mut shell = Command::new("sh");
        shell.arg("-c").arg(command);
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut shell, 0);
        shell
    }
}

/// Runs a token command (its stdin empty: the proxy's is the MCP client's) and returns its
/// trimmed standard output as the token. The error names the exit status and the first line of
/// its standard error, never its standard output.
pub fn run_command(command: &str, timeout: Duration) -> Result<BearerToken, String> {
    let mut child = shell(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("--bearer-token-command: cannot start the shell: {e}"))?;
    let outputs = [
        child.stdout.take().map(|p| reader(Box::new(p))),
        child.stderr.take().map(|p| reader(Box::new(p))),
    ];
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                stop(&mut child);
                return Err(format!(
                    "--bearer-token-command ran longer than {timeout:?}: stopped"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("--bearer-token-command: cannot wait for it: {e}")),
        }
    };
    // A process the command left running may hold the pipes open: wait a little, not forever.
    let [stdout, stderr] = outputs.map(|output| {
        output
            .and_then(|rx| rx.recv_timeout(Duration::from_secs(2)).ok())
            .unwrap_or_default()
    });
    let stdout = String::from_utf8_lossy(&stdout);
    let stdout = stdout.trim();
    let failure = |what: &str| {
        format!(
            "--bearer-token-command {what} ({}; stderr: {})",
            describe_status(status),
            first_line(&stderr, stdout)
        )
    };
    if !status.success() {
        return Err(failure("failed"));
    }
    check_token(stdout).map_err(|why| {
        failure(&match why {
            None => "printed no token".to_owned(),
            Some(why) => format!("printed something that is not a usable bearer token ({why})"),
        })
    })
}

/// Stops a token command that ran too long, and on Unix every process of its group: what the
/// shell started (a `curl`, a login helper, their children) would otherwise run on, unowned,
/// holding the pipes open. The command's own descendants that left the group (`setsid`) are
/// beyond reach, as they are for any supervisor.
fn stop(child: &mut Child) {
    #[cfg(unix)]
    {
        use rustix::process::{Pid, Signal, kill_process_group};
        let _ = kill_process_group(Pid::from_child(child), Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Reads a pipe to its end (or [`OUTPUT_LIMIT`]) on a thread of its own.
fn reader(pipe: Box<dyn Read + Send>) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.take(OUTPUT_LIMIT).read_to_end(&mut bytes);
        let _ = tx.send(bytes);
    });
    rx
}

fn describe_status(status: ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}

/// The first line of a command's standard error, quoted, at most 200 characters, with what it
/// printed on standard output (the token, or part of it) masked should it appear there.
fn first_line(stderr: &[u8], stdout: &str) -> String {
    let text = String::from_utf8_lossy(stderr);
    let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return "empty".to_owned();
    };
    let mut line: String = line.chars().filter(|c| !c.is_control()).collect();
    for word in stdout.split_whitespace().filter(|w| w.len() >= 8) {
        line = line.replace(word, "[redacted]");
    }
    if line.chars().count() > 200 {
        line = line.chars().take(200).collect::<String>() + "…";
    }
    format!("{line:?}")
}

/// The scratch directory of the integration tests, with their token command.
#[cfg(test)]
#[path = "../tests/it/common/temp_dir.rs"]
#[allow(dead_code)]
mod temp_dir;

#[cfg(test)]
mod tests {
    use super::temp_dir::TempDir;
    use super::*;
    use base64::Engine;

    fn jwt(claims: &str) -> String {
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!(
            "{}.{}.c2lnbmF0dXJl",
            engine.encode(r#"{"alg":"RS256","typ":"JWT"}"#),
            engine.encode(claims)
        )
    }

    #[test]
    fn the_expiry_of_a_jwt_is_read_off_its_payload() {
        let jwt_expiry = |token: &str| jwt_expiry(&BearerToken::new(token));
        assert_eq!(
            jwt_expiry(&jwt(r#"{"sub":"u","exp":1700000000}"#)),
            Some(1_700_000_000)
        );
        assert_eq!(
            jwt_expiry(&jwt(r#"{"exp":1700000000.75}"#)),
            Some(1_700_000_000)
        );
        // Padded base64url is read too.
        let padded = {
            let engine = base64::engine::general_purpose::URL_SAFE;
            format!("a.{}.b", engine.encode(r#"{"exp":12}"#))
        };
        assert!(padded.contains('='), "{padded}");
        assert_eq!(jwt_expiry(&padded), Some(12));
        for not in [
            jwt(r#"{"sub":"u"}"#),
            jwt(r#"{"exp":"soon"}"#),
            jwt(r#"{"exp":-5}"#),
            jwt("not json"),
            "opaque-token-0123456789".to_owned(),
            "a.b".to_owned(),
            "a.!!!.c".to_owned(),
            format!("{}.d", jwt(r#"{"exp":1}"#)),
        ] {
            assert_eq!(jwt_expiry(&not), None, "{not}");
        }
    }

    #[test]
    fn a_token_expiring_within_a_minute_is_stale() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert!(!expires_soon(None, now));
        assert!(!expires_soon(Some(1_000_061), now));
        assert!(expires_soon(Some(1_000_060), now));
        assert!(expires_soon(Some(1_000_000), now));
        assert!(expires_soon(Some(5), now));
    }

    #[cfg(unix)]
    #[test]
    fn a_command_gives_its_trimmed_output_and_a_failure_names_status_and_stderr_only() {
        let token = run_command("printf '  tok-en.1_~\\n\\n'", COMMAND_TIMEOUT).unwrap();
        assert_eq!(token.as_str(), "tok-en.1_~");

        let error = run_command(
            "echo s3cr3t-partial-token; echo 'login required: run sso' >&2; echo more >&2; exit 3",
            COMMAND_TIMEOUT,
        )
        .unwrap_err();
        assert_eq!(
            error,
            "--bearer-token-command failed (exit status 3; stderr: \"login required: run sso\")"
        );

        let error = run_command("echo >&2; echo '  '", COMMAND_TIMEOUT).unwrap_err();
        assert_eq!(
            error,
            "--bearer-token-command printed no token (exit status 0; stderr: empty)"
        );

        let error = run_command(
            "echo 'two s3cr3t-words'; echo 'got s3cr3t-words' >&2",
            COMMAND_TIMEOUT,
        )
        .unwrap_err();
        assert_eq!(
            error,
            "--bearer-token-command printed something that is not a usable bearer token (RFC \
             6750: letters, digits, `-._~+/` then `=`s; at least 8 characters; this one has 16) \
             (exit status 0; stderr: \"got [redacted]\")"
        );
        assert!(!error.contains("s3cr3t"), "{error}");

        let error = run_command("sleep 5", Duration::from_millis(200)).unwrap_err();
        assert_eq!(
            error,
            "--bearer-token-command ran longer than 200ms: stopped"
        );
    }

    /// A command that runs too long is stopped with what it started: a `sleep` the shell left in
    /// the background would otherwise outlive the proxy's wait.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_command_that_ran_too_long_is_stopped_with_what_it_started() {
        let dir = TempDir::new("group");
        let pid_file = dir.0.join("pid");
        let command = format!("sleep 60 & echo $! > '{}'; wait", pid_file.display());
        let error = run_command(&command, Duration::from_secs(1)).unwrap_err();
        assert_eq!(error, "--bearer-token-command ran longer than 1s: stopped");

        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Alive: a `/proc` entry in a state other than zombie (a reaper may come late).
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(") ")
                    .is_some_and(|(_, rest)| !rest.starts_with('Z'))
            })
        };
        // SIGKILL lands at once, but the kernel tears the process down in its own time.
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !alive(),
            "the command's background sleep ({pid}) still runs"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_command_runs_again_on_refresh_only_and_waiters_share_a_run() {
        let dir = TempDir::new("refresh");
        let tokens =
            CommandToken::new(dir.token_command(&["token-1-abc", "token-2-abc", "token-3-abc"]));
        let first = tokens.get(None).await.unwrap();
        assert_eq!(first.as_str(), "token-1-abc");
        assert_eq!(tokens.get(None).await.unwrap().as_str(), "token-1-abc");
        assert_eq!(dir.runs(), 1, "cached");
        let second = tokens.get(Some(&first)).await.unwrap();
        assert_eq!(second.as_str(), "token-2-abc");
        assert_eq!(tokens.get(None).await.unwrap().as_str(), "token-2-abc");
        assert_eq!(dir.runs(), 2);

        // Refused with the token already replaced (its answer came late): the replacement.
        let late = tokens.get(Some(&first)).await.unwrap();
        assert_eq!(late.as_str(), "token-2-abc");
        assert_eq!(dir.runs(), 2, "not run for a token already replaced");

        // Three requests refused at once: one run, all take its token.
        let (a, b, c) = tokio::join!(
            tokens.get(Some(&second)),
            tokens.get(Some(&second)),
            tokens.get(Some(&second))
        );
        let got: Vec<String> = [a, b, c]
            .into_iter()
            .map(|t| t.unwrap().as_str().to_owned())
            .collect();
        assert_eq!(got, ["token-3-abc"; 3]);
        assert_eq!(dir.runs(), 3);
    }

    /// A command that prints the same token again (a CLI handing out its cached token): the
    /// requests refused together still share one run, and take what it printed.
    #[cfg(unix)]
    #[tokio::test]
    async fn requests_refused_together_share_one_run_that_prints_the_same_token() {
        let dir = TempDir::new("same");
        let tokens = CommandToken::new(dir.token_command(&["same-token"]));
        let token = tokens.get(None).await.unwrap();
        assert_eq!(dir.runs(), 1);
        let (a, b, c) = tokio::join!(
            tokens.get(Some(&token)),
            tokens.get(Some(&token)),
            tokens.get(Some(&token))
        );
        for got in [a, b, c] {
            assert_eq!(got.unwrap().as_str(), "same-token");
        }
        assert_eq!(dir.runs(), 2, "one run for the three");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_jwt_about_to_expire_is_fetched_again_before_use() {
        let dir = TempDir::new("expiry");
        // A JWT that expired long ago: every use runs the command.
        let expired = jwt(r#"{"exp":1000}"#);
        let tokens = CommandToken::new(
            dir.token_command(&[&format!("token-1-{expired}"), &format!("token-2-{expired}")]),
        );
        let first = tokens.get(None).await.unwrap();
        assert!(first.as_str().starts_with("token-1-"));
        let second = tokens.get(None).await.unwrap();
        assert!(second.as_str().starts_with("token-2-"));
        assert_eq!(dir.runs(), 2);
        drop(dir);

        // One good for an hour: cached.
        let dir = TempDir::new("fresh");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let fresh = jwt(&format!(r#"{{"exp":{}}}"#, now + 3600));
        let tokens = CommandToken::new(dir.token_command(&[&format!("token-1-{fresh}")]));
        tokens.get(None).await.unwrap();
        tokens.get(None).await.unwrap();
        assert_eq!(dir.runs(), 1);
    }

    #[test]
    fn an_env_token_is_read_again_on_refresh_and_never_shown() {
        let name = "AGENTCORE_MCP_PROXY_TEST_TOKEN_UNSET_0";
        let error = EnvToken::new(name).err().unwrap();
        assert!(
            matches!(&error, TokenError::Usage(m) if m == &format!("--bearer-token-env {name}: the variable is not set")),
            "{error:?}"
        );
        // cargo sets it for the tests it runs.
        let tokens = EnvToken::new("CARGO_PKG_NAME").unwrap();
        assert_eq!(tokens.get(false).unwrap().as_str(), "agentcore-mcp-proxy");
        assert_eq!(tokens.get(true).unwrap().as_str(), "agentcore-mcp-proxy");
        assert_eq!(
            check_token("a b").err(),
            Some(Some(
                "RFC 6750: letters, digits, `-._~+/` then `=`s; at least 8 characters; this \
                 one has 3"
                    .to_owned()
            ))
        );
        // What every request would have refused is refused at start.
        assert!(check_token("short").is_err());
        assert!(check_token("a-usable.token_1").is_ok());
        assert_eq!(check_token("").err(), Some(None));
    }
}
