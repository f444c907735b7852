//! The proxy's `--listen` endpoint (MCP Streamable HTTP on loopback) and a minimal MCP client
//! of it: the session id and protocol version from the `initialize` answer, sent with every
//! later request; a bearer token when given; the answers as they came.

use std::process::ExitStatus;
use std::time::Duration;

use agentcore_tower_emulator::Emulator;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use super::{LINE_TIMEOUT, Proxy, initialize, initialized};

/// hyper's HTTP/1 client, as the tests use it.
pub type Hyper = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

pub fn hyper_client() -> Hyper {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// `--listen 127.0.0.1:0`, then `args`.
pub fn listen_args<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    all
}

/// The proxy serving HTTP, and the URL it logged.
pub struct Listening {
    pub proxy: Proxy,
    pub url: String,
    pub port: u16,
}

impl Listening {
    /// Starts the proxy for `emulator`'s runtime ([`Proxy::start`]) with `--listen 127.0.0.1:0`
    /// and `args`; waits for the URL in the log.
    pub async fn start(emulator: &Emulator, args: &[&str]) -> Listening {
        Self::of(Proxy::start(emulator, &listen_args(args))).await
    }

    /// `--listen 127.0.0.1:0` in front of the MCP server at `url` ([`Proxy::for_url`]).
    pub async fn for_url(url: &str, token: &str, args: &[&str]) -> Listening {
        Self::of(Proxy::for_url(url, token, &listen_args(args))).await
    }

    /// A proxy started with `--listen 127.0.0.1:0`, once it logged its URL.
    pub async fn of(proxy: Proxy) -> Listening {
        let url = proxy.listen_url().await;
        let port = url
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp")
            .parse()
            .unwrap_or_else(|_| panic!("not a loopback URL at /mcp: {url}"));
        Listening { proxy, url, port }
    }

    /// A client without a token whose MCP session is open.
    pub async fn client(&self) -> HttpClient {
        let mut client = HttpClient::new(&self.url, None);
        client.open().await;
        client
    }

    /// SIGTERM, then the exit status.
    #[cfg(unix)]
    pub async fn terminate(mut self) -> (ExitStatus, Proxy) {
        self.proxy.sigterm();
        let status = self.proxy.exited("SIGTERM").await;
        (status, self.proxy)
    }

    /// SIGTERM: the proxy exits 0.
    #[cfg(unix)]
    pub async fn terminated_cleanly(self) -> Proxy {
        let (status, proxy) = self.terminate().await;
        assert_eq!(status.code(), Some(0), "stderr:\n{}", proxy.stderr());
        proxy
    }
}

/// An answer of the endpoint.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// The body as one JSON value.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// The messages of an SSE body, each event's data.
    pub fn events(&self) -> Vec<Value> {
        assert_eq!(
            self.header("content-type"),
            Some("text/event-stream"),
            "{self:?}"
        );
        let text = std::str::from_utf8(&self.body).unwrap();
        text.split("\n\n")
            .filter(|event| !event.trim().is_empty())
            .map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data: "))
                    .collect();
                serde_json::from_str(&data.join("\n")).unwrap()
            })
            .collect()
    }

    /// The one message of the answer, JSON or SSE.
    pub fn message(&self) -> Value {
        if self.header("content-type") == Some("text/event-stream") {
            let mut events = self.events();
            assert_eq!(events.len(), 1, "{self:?}");
            events.remove(0)
        } else {
            self.json()
        }
    }

    /// The answer's last message: a JSON body, or the last message of an SSE stream; `Null`
    /// for an empty body.
    pub fn last_message(&self) -> Value {
        let text = std::str::from_utf8(&self.body).unwrap().trim();
        if text.is_empty() {
            Value::Null
        } else if text.starts_with('{') {
            serde_json::from_str(text).unwrap()
        } else {
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|data| serde_json::from_str::<Value>(data.trim()).unwrap())
                .next_back()
                .unwrap_or_else(|| panic!("no message in {text:?}"))
        }
    }
}

/// A minimal MCP Streamable HTTP client of `--listen`.
#[derive(Clone)]
pub struct HttpClient {
    pub client: Hyper,
    pub url: String,
    pub token: Option<String>,
    pub session: Option<String>,
    pub protocol_version: Option<String>,
    /// How long an answer may take (head and body each).
    pub timeout: Duration,
}

impl HttpClient {
    pub fn new(url: &str, token: Option<&str>) -> HttpClient {
        HttpClient {
            client: hyper_client(),
            url: url.to_owned(),
            token: token.map(str::to_owned),
            session: None,
            protocol_version: None,
            timeout: LINE_TIMEOUT,
        }
    }

    /// Sends `method` with the client's headers, then `extra` (which may replace them).
    pub async fn send(&self, method: &str, body: Option<&Value>, extra: &[(&str, &str)]) -> Answer {
        self.send_within(method, body, extra, self.timeout).await
    }

    /// [`HttpClient::send`], the answer's head and its body each allowed `limit`.
    pub async fn send_within(
        &self,
        method: &str,
        body: Option<&Value>,
        extra: &[(&str, &str)],
        limit: Duration,
    ) -> Answer {
        let headers = self.headers(extra);
        send_to(&self.client, method, &self.url, body, &headers, limit).await
    }

    pub fn headers<'a>(&'a self, extra: &[(&'a str, &'a str)]) -> Vec<(String, String)> {
        let mut headers: Vec<(String, String)> = vec![
            ("content-type".into(), "application/json".into()),
            (
                "accept".into(),
                "application/json, text/event-stream".into(),
            ),
        ];
        if let Some(token) = &self.token {
            headers.push(("authorization".into(), format!("Bearer {token}")));
        }
        if let Some(session) = &self.session {
            headers.push(("mcp-session-id".into(), session.clone()));
        }
        if let Some(version) = &self.protocol_version {
            headers.push(("mcp-protocol-version".into(), version.clone()));
        }
        for (name, value) in extra {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            headers.push(((*name).to_owned(), (*value).to_owned()));
        }
        headers
    }

    pub async fn post(&self, message: &Value) -> Answer {
        self.send("POST", Some(message), &[]).await
    }

    /// POSTs `message` with `extra` headers ([`HttpClient::send`]), the answer allowed `limit`;
    /// the session id and the protocol version it names are kept ([`HttpClient::remember`]).
    pub async fn exchange(
        &mut self,
        message: &Value,
        extra: &[(&str, &str)],
        limit: Duration,
    ) -> Answer {
        let answer = self.send_within("POST", Some(message), extra, limit).await;
        self.remember(&answer);
        answer
    }

    /// The session id and the negotiated protocol version an answer names, kept for the
    /// requests after it.
    pub fn remember(&mut self, answer: &Answer) {
        if let Some(session) = answer.header("mcp-session-id") {
            self.session = Some(session.to_owned());
        }
        if let Some(version) = answer
            .last_message()
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
        {
            self.protocol_version = Some(version.to_owned());
        }
    }

    /// initialize, then notifications/initialized: the session is open.
    pub async fn open(&mut self) -> Value {
        let answer = self.post(&initialize(1)).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let session = answer
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("no Mcp-Session-Id: {answer:?}"));
        self.session = Some(session.to_owned());
        let message = answer.message();
        self.protocol_version = Some(
            message["result"]["protocolVersion"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        let notified = self.post(&initialized()).await;
        assert_eq!(notified.status, 202, "{notified:?}");
        assert!(notified.body.is_empty());
        message
    }
}

/// Sends `method` to `url` with exactly `headers`; the answer's head and its body each allowed
/// `limit`.
pub async fn send_to(
    client: &Hyper,
    method: &str,
    url: &str,
    body: Option<&Value>,
    headers: &[(String, String)],
    limit: Duration,
) -> Answer {
    let mut request = http::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = request.body(Full::new(Bytes::from(body))).unwrap();
    let response = tokio::time::timeout(limit, client.request(request))
        .await
        .expect("an answer in time")
        .expect("the endpoint answers");
    let (parts, body) = response.into_parts();
    let body = tokio::time::timeout(limit, body.collect())
        .await
        .expect("the whole body in time")
        .unwrap()
        .to_bytes();
    Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    }
}
