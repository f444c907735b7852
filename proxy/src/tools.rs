//! The tools a client sees and may call (`--allow-tool`, `--deny-tool`, `--read-only`), and
//! what the server's `tools/list` annotations say about each (read for `--read-only`; what
//! `--trust-tool-annotations` makes replayable, the guard learns itself).
//!
//! A `tools/list` answer reaches the client with the hidden tools taken out of its page (its
//! `nextCursor` untouched: a page may come out empty); a `tools/call` of a hidden tool is
//! answered here, with JSON-RPC's invalid-params error, and never sent.

use std::collections::HashMap;
use std::sync::RwLock;

use agentcore_tower::protocol::{self, ParamHeaders};
use serde_json::{Value, json};

use crate::cli::Args;

/// The JSON-RPC error code of a call to a tool the proxy does not let through.
pub const INVALID_PARAMS: i64 = -32602;

/// What the server's annotations say of a tool, each hint only when it says `true`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Hints {
    read_only: bool,
    idempotent: bool,
    destructive: bool,
}

impl Hints {
    fn of(tool: &Value) -> Hints {
        let hint = |key: &str| {
            tool.get("annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_bool)
                == Some(true)
        };
        Hints {
            read_only: hint("readOnlyHint"),
            idempotent: hint("idempotentHint"),
            destructive: hint("destructiveHint"),
        }
    }
}

/// Whether a lost answer to a call of `tool` (a `tools/list` entry) may be sent again, as the
/// proxy's rule decides it: the words `check` shows.
pub fn replay_status(args: &Args, tool: &Value) -> &'static str {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
    let hints = Hints::of(tool);
    if args.strict_tools.iter().any(|t| t == name) {
        "strict (--strict-tool): never sent again"
    } else if args.idempotent_tools.iter().any(|t| t == name) {
        "declared idempotent (--idempotent-tool): sent again after a lost answer"
    } else if args.trust_tool_annotations
        && (hints.read_only || (hints.idempotent && !hints.destructive))
    {
        "idempotent by server annotation (--trust-tool-annotations): sent again after a lost \
         answer"
    } else {
        "not replayable: not sent again after a lost answer"
    }
}

/// The rule that hides a tool.
#[derive(Debug, PartialEq, Eq)]
enum Hidden {
    /// A `--deny-tool` pattern matches it.
    Denied(String),
    /// No `--allow-tool` pattern matches it.
    NotAllowed,
    /// `--read-only`, and it is not annotated `readOnlyHint: true`.
    NotReadOnly,
    /// `--read-only`, and it was never listed: its annotations are unknown.
    NotListed,
}

/// The proxy's view of the server's tools.
#[derive(Debug, Default)]
pub struct Tools {
    allow: Vec<String>,
    deny: Vec<String>,
    read_only: bool,
    /// The annotations of every tool listed so far.
    listed: RwLock<HashMap<String, Hints>>,
    /// The arguments each listed tool marks with `x-mcp-header`: the `Mcp-Param-*` headers a
    /// 2026-07-28 client writes for its calls.
    params: RwLock<ParamHeaders>,
}

/// What the proxy does with one client message.
#[derive(Debug, Default)]
pub struct Screen {
    /// When set, the message is not sent: these errors answer its requests (none for
    /// notifications).
    pub refused: Option<Vec<Value>>,
    /// The ids of its `tools/list` requests, whose answers are filtered.
    pub lists: Vec<Value>,
}

impl Tools {
    pub fn new(args: &Args) -> Tools {
        Tools {
            allow: args.allow_tools.clone(),
            deny: args.deny_tools.clone(),
            read_only: args.read_only,
            listed: RwLock::default(),
            params: RwLock::default(),
        }
    }

    /// Whether any tool can be hidden.
    fn filters(&self) -> bool {
        self.read_only || !self.allow.is_empty() || !self.deny.is_empty()
    }

    /// Why `name` is hidden, if it is; `hints` are its annotations, `None` when it was never
    /// listed. A `--deny-tool` wins over an `--allow-tool`.
    fn hidden(&self, name: &str, hints: Option<Hints>) -> Option<Hidden> {
        if let Some(pattern) = self.deny.iter().find(|p| matches(p, name)) {
            return Some(Hidden::Denied(pattern.clone()));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|p| matches(p, name)) {
            return Some(Hidden::NotAllowed);
        }
        if self.read_only {
            return match hints {
                None => Some(Hidden::NotListed),
                Some(hints) if !hints.read_only => Some(Hidden::NotReadOnly),
                Some(_) => None,
            };
        }
        None
    }

    fn hints_of(&self, name: &str) -> Option<Hints> {
        self.listed
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .copied()
    }

    /// What to do with a client message: refuse it (a call of a hidden tool), or send it,
    /// noting the `tools/list` answers to filter.
    pub fn screen(&self, message: &Value) -> Screen {
        let mut screen = Screen::default();
        let members: Vec<&Value> = match message {
            Value::Array(batch) => batch.iter().collect(),
            one => vec![one],
        };
        // Every listing is read: the `x-mcp-header` annotations are learned whether or not
        // anything is hidden.
        for member in &members {
            if let (Some("tools/list"), Some(id)) = (
                member.get("method").and_then(Value::as_str),
                member.get("id"),
            ) {
                screen.lists.push(id.clone());
            }
        }
        if !self.filters() {
            return screen;
        }
        let mut refusals = Vec::new();
        for member in &members {
            if member.get("method").and_then(Value::as_str) != Some("tools/call") {
                continue;
            }
            let Some(name) = member.pointer("/params/name").and_then(Value::as_str) else {
                continue;
            };
            if let Some(hidden) = self.hidden(name, self.hints_of(name)) {
                refusals.push((member.get("id").cloned(), name.to_owned(), hidden));
            }
        }
        if !refusals.is_empty() {
            let refused_tool = refusals[0].1.clone();
            let mut errors = Vec::new();
            for (id, name, hidden) in refusals {
                if let Some(id) = id {
                    errors.push(self.refusal(&id, &name, &hidden));
                }
            }
            // The batch's other requests are not sent either: one answer for the whole batch.
            for member in members {
                let is_request = member.get("method").is_some();
                if let (true, Some(id)) = (is_request, member.get("id"))
                    && !is_refused_call(member, self)
                {
                    errors.push(crate::answers::error_response(
                        id,
                        crate::answers::PROXY_ERROR,
                        &format!(
                            "not sent: its batch also calls the tool `{refused_tool}`, which \
                             this proxy does not let through; send it without that call"
                        ),
                        None,
                    ));
                }
            }
            screen.refused = Some(errors);
            return screen;
        }
        screen
    }

    /// The error that answers a call of a hidden tool.
    fn refusal(&self, id: &Value, name: &str, hidden: &Hidden) -> Value {
        let (why, rule) = match hidden {
            Hidden::Denied(pattern) => (
                format!("--deny-tool {pattern} hides it"),
                format!("--deny-tool {pattern}"),
            ),
            Hidden::NotAllowed => (
                format!(
                    "it matches no --allow-tool pattern ({})",
                    self.allow.join(", ")
                ),
                "--allow-tool".to_owned(),
            ),
            Hidden::NotReadOnly => (
                "--read-only hides it: its annotations do not say readOnlyHint: true".to_owned(),
                "--read-only".to_owned(),
            ),
            Hidden::NotListed => (
                "--read-only: it has not been listed (tools/list), so whether it is read-only \
                 is not known"
                    .to_owned(),
                "--read-only".to_owned(),
            ),
        };
        let mut error = crate::answers::error_response(
            id,
            INVALID_PARAMS,
            &format!("the tool `{name}` is not available through this proxy: {why}"),
            None,
        );
        error["error"]["data"] = json!({"tool": name, "rule": rule});
        error
    }

    /// Learns the `x-mcp-header` annotations of one `tools/list` result (one page).
    pub fn learn_params(&self, result: &Value) {
        self.params
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .learn(result);
    }

    /// The `Mcp-Param-*` (with `Mcp-Method` and `Mcp-Name`) headers a 2026-07-28 client
    /// writes for `message`, from what the listings said.
    pub fn standard_headers(&self, message: &Value) -> http::HeaderMap {
        let params = self.params.read().unwrap_or_else(|p| p.into_inner());
        protocol::request_headers(message, Some(&params))
    }

    /// Takes the hidden tools out of the answers to the `tools/list` requests `lists`, in a
    /// server message (or batch), learning the annotations of every tool listed. Whether the
    /// message changed.
    pub fn filter(&self, lists: &[Value], message: &mut Value) -> bool {
        if lists.is_empty() {
            return false;
        }
        match message {
            Value::Array(batch) => batch
                .iter_mut()
                .fold(false, |changed, m| self.filter_one(lists, m) | changed),
            one => self.filter_one(lists, one),
        }
    }

    fn filter_one(&self, lists: &[Value], message: &mut Value) -> bool {
        if message.get("method").is_some()
            || !message.get("id").is_some_and(|id| lists.contains(id))
        {
            return false;
        }
        if let Some(result) = message.get("result") {
            self.learn_params(result);
        }
        let Some(tools) = message
            .pointer_mut("/result/tools")
            .and_then(Value::as_array_mut)
        else {
            return false;
        };
        {
            let mut listed = self.listed.write().unwrap_or_else(|p| p.into_inner());
            for tool in tools.iter() {
                if let Some(name) = tool.get("name").and_then(Value::as_str) {
                    listed.insert(name.to_owned(), Hints::of(tool));
                }
            }
        }
        if !self.filters() {
            return false;
        }
        let before = tools.len();
        tools.retain(|tool| {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                return false;
            };
            self.hidden(name, Some(Hints::of(tool))).is_none()
        });
        tools.len() != before
    }
}

/// Whether a batch member is itself a call of a hidden tool (answered with its own refusal).
fn is_refused_call(member: &Value, tools: &Tools) -> bool {
    member.get("method").and_then(Value::as_str) == Some("tools/call")
        && member
            .pointer("/params/name")
            .and_then(Value::as_str)
            .is_some_and(|name| tools.hidden(name, tools.hints_of(name)).is_some())
}

/// Whether `name` matches `pattern`: `*` any run of characters (none included), `?` any one
/// character, anything else itself. Written here rather than taken from a glob crate: tool
/// names are not paths (no separator for `*` to stop at, no character classes or braces to
/// support), and two wildcards do not need a dependency.
pub fn matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    // Where the last `*` was, and the name position it is tried at: on a mismatch, the star
    // takes one more character (linear backtracking, enough for a single-star-at-a-time glob).
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some('?') => {
                p += 1;
                n += 1;
            }
            Some(&c) if c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((at, from)) => {
                    p = at + 1;
                    n = from + 1;
                    star = Some((at, from + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_with_star_and_question_mark() {
        for (pattern, name, expected) in [
            ("echo", "echo", true),
            ("echo", "echo2", false),
            ("*", "", true),
            ("*", "anything_at_all", true),
            ("get_*", "get_issue", true),
            ("get_*", "get_", true),
            ("get_*", "list_issues", false),
            ("*_issue", "get_issue", true),
            ("*_issue", "get_issues", false),
            ("a*b*c", "a_x_b_y_c", true),
            ("a*b*c", "a_x_c_y_b", false),
            ("a*b", "abab", true),
            ("list_?", "list_a", true),
            ("list_?", "list_", false),
            ("list_?", "list_ab", false),
            ("??", "né", true),
            ("*.read", "s3.read", true),
            ("Echo", "echo", false),
        ] {
            assert_eq!(matches(pattern, name), expected, "{pattern} {name}");
        }
    }

    fn tools(args: &[&str]) -> Tools {
        let mut all = vec!["--url", "http://127.0.0.1:1/mcp", "--bearer-token-env", "T"];
        all.extend_from_slice(args);
        match crate::cli::parse_args(all.iter().map(std::ffi::OsString::from)).unwrap() {
            crate::cli::Parsed::Run(args) => Tools::new(&args),
            _ => panic!(),
        }
    }

    fn listing(id: u64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
            {"name": "get_issue", "annotations": {"readOnlyHint": true}},
            {"name": "get_secret", "annotations": {"readOnlyHint": true}},
            {"name": "delete_issue", "annotations": {"idempotentHint": true, "destructiveHint": true}},
            {"name": "add", "annotations": {"idempotentHint": true}}
        ], "nextCursor": "page-2"}})
    }

    fn names(message: &Value) -> Vec<&str> {
        message["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn deny_wins_over_allow_and_read_only_keeps_read_only_tools() {
        let tools = tools(&[
            "--allow-tool",
            "get_*",
            "--allow-tool=add",
            "--deny-tool=*secret",
        ]);
        let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
        let screen = tools.screen(&list);
        assert_eq!(screen.lists, [json!(7)]);
        let mut answer = listing(7);
        assert!(tools.filter(&screen.lists, &mut answer));
        assert_eq!(names(&answer), ["get_issue", "add"]);
        assert_eq!(answer["result"]["nextCursor"], "page-2");

        let tools = self::tools(&["--read-only"]);
        let mut answer = listing(1);
        assert!(tools.filter(&[json!(1)], &mut answer));
        assert_eq!(names(&answer), ["get_issue", "get_secret"]);
        // An answer to another id, or a server request, is left alone.
        let mut other = listing(2);
        assert!(!tools.filter(&[json!(1)], &mut other));
        assert_eq!(names(&other).len(), 4);
    }

    #[test]
    fn a_hidden_tool_is_refused_naming_the_rule() {
        let tools = tools(&["--deny-tool", "delete_*", "--read-only"]);
        let call = |id: u64, name: &str| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name}});
        let screen = tools.screen(&call(1, "delete_issue"));
        assert_eq!(
            screen.refused.unwrap(),
            [json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602,
                "message": "the tool `delete_issue` is not available through this proxy: --deny-tool delete_* hides it",
                "data": {"tool": "delete_issue", "rule": "--deny-tool delete_*"}}})]
        );
        // Never listed: read-only cannot know.
        let refused = tools.screen(&call(2, "get_issue")).refused.unwrap();
        assert_eq!(refused[0]["error"]["data"]["rule"], "--read-only");
        assert!(refused[0]["error"]["message"].as_str().unwrap().ends_with(
            "it has not been listed (tools/list), so whether it is read-only is not known"
        ));
        tools.filter(&[json!(3)], &mut listing(3));
        assert_eq!(tools.screen(&call(4, "get_issue")).refused, None);
        let refused = tools.screen(&call(5, "add")).refused.unwrap();
        assert!(
            refused[0]["error"]["message"]
                .as_str()
                .unwrap()
                .ends_with("--read-only hides it: its annotations do not say readOnlyHint: true")
        );
        // A batch with a refused call is not sent: each of its requests is answered here.
        let batch = json!([call(6, "get_issue"), call(7, "add"),
            {"jsonrpc": "2.0", "method": "notifications/progress"}]);
        let refused = tools.screen(&batch).refused.unwrap();
        let ids: Vec<&Value> = refused.iter().map(|e| &e["id"]).collect();
        assert_eq!(ids, [&json!(7), &json!(6)]);
        assert_eq!(refused[1]["error"]["code"], -32000);
        // Notifications alone: nothing to answer, and nothing sent.
        let notification =
            json!([{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "add"}}]);
        assert_eq!(tools.screen(&notification).refused, Some(vec![]));
    }
}
