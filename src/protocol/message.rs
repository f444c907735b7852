//! What a client's message must be to be sent at all: JSON-RPC 2.0 as MCP narrows it (an id
//! that is a string or an integer, never null; `params` an object), one message per POST — a
//! batch only where the client's version allows it (2025-03-26).

use serde_json::{Value, json};

/// JSON-RPC's "Invalid Request".
const INVALID_REQUEST: i64 = -32600;

/// A message (or a member of a batch) that is not one of the client's era: answered where it
/// is met, never sent.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidMessage {
    id: Value,
    reason: String,
}

impl InvalidMessage {
    fn new(id: &Value, reason: impl Into<String>) -> Self {
        Self {
            id: id.clone(),
            reason: reason.into(),
        }
    }

    /// The id to answer with: the message's own when it is a valid one, else null.
    pub fn id(&self) -> &Value {
        &self.id
    }

    /// Why it is not a message of the client's era.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The JSON-RPC error that answers it: -32600, "Invalid Request: " and the reason.
    pub fn response(&self) -> Value {
        json!({"jsonrpc": "2.0", "id": self.id, "error": {
            "code": INVALID_REQUEST,
            "message": format!("Invalid Request: {}", self.reason),
        }})
    }
}

/// Whether `id` is an id MCP allows: a string or an integer.
fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// Checks one message: `Ok` or why not, answered with its id where that is valid.
fn check_one(message: &Value) -> Result<(), InvalidMessage> {
    let Some(object) = message.as_object() else {
        return Err(InvalidMessage::new(&Value::Null, "not a JSON-RPC message"));
    };
    let id = object.get("id");
    let answer_id = id.filter(|id| valid_id(id)).unwrap_or(&Value::Null);
    let invalid = |reason: &str| Err(InvalidMessage::new(answer_id, reason));
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    if let Some(id) = id
        && !valid_id(id)
    {
        return invalid("an id must be a string or an integer");
    }
    match object.get("method") {
        Some(Value::String(_)) => {
            if object.get("params").is_some_and(|p| !p.is_object()) {
                return invalid("\"params\" must be an object");
            }
            Ok(())
        }
        Some(_) => invalid("\"method\" must be a string"),
        None => {
            let answers = usize::from(object.contains_key("result"))
                + usize::from(object.contains_key("error"));
            if id.is_some() && answers == 1 {
                Ok(())
            } else {
                invalid("no method, and not a response")
            }
        }
    }
}

/// Checks a message a client sends, as a client of `version` (the session's, or the one in
/// the message's `_meta`; `None` when neither is known yet) may send it. `Err` holds what to
/// answer, one error each: for an invalid message, one; for a batch a version does not allow,
/// one for each request in it with a valid id (so no request waits for an answer), or one
/// with a null id when it holds none; for an allowed batch with an invalid member, the same
/// (nothing of it is sent).
pub fn check_client_message(
    message: &Value,
    version: Option<&str>,
) -> Result<(), Vec<InvalidMessage>> {
    let Value::Array(batch) = message else {
        return check_one(message).map_err(|e| vec![e]);
    };
    let allowed = version.is_some_and(super::allows_batches);
    if allowed && batch.is_empty() {
        return Err(vec![InvalidMessage::new(&Value::Null, "an empty batch")]);
    }
    let reason = if allowed {
        match batch.iter().find_map(|m| check_one(m).err()) {
            None => return Ok(()),
            Some(first) => format!("the batch holds an invalid message ({})", first.reason),
        }
    } else {
        match version {
            Some(version) => format!("MCP {version} has no batches: send one message at a time"),
            None => "a batch is not an MCP message: send one message at a time".to_owned(),
        }
    };
    let mut answers: Vec<InvalidMessage> = batch
        .iter()
        .filter(|m| m.get("method").is_some())
        .filter_map(|m| m.get("id").filter(|id| valid_id(id)))
        .map(|id| InvalidMessage::new(id, reason.clone()))
        .collect();
    if answers.is_empty() {
        answers.push(InvalidMessage::new(&Value::Null, reason));
    }
    Err(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(message: Value, version: Option<&str>) -> Vec<(Value, String)> {
        check_client_message(&message, version)
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.id().clone(), e.reason().to_owned()))
            .collect()
    }

    #[test]
    fn messages_of_the_era_pass() {
        for ok in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -1, "message": "no"}}),
        ] {
            assert_eq!(
                check_client_message(&ok, Some("2026-07-28")),
                Ok(()),
                "{ok}"
            );
        }
    }

    #[test]
    fn what_is_not_is_answered_with_its_id_where_valid() {
        let one = |m: Value| answers(m, Some("2025-06-18"));
        assert_eq!(
            one(json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}))[0].0,
            json!(1)
        );
        assert_eq!(
            one(json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}))[0].0,
            Value::Null
        );
        assert_eq!(
            one(json!({"jsonrpc": "2.0", "id": null, "method": "ping"}))[0].0,
            Value::Null
        );
        assert_eq!(
            one(json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}))[0].0,
            Value::Null
        );
        let no_method = one(json!({"jsonrpc": "2.0", "id": 7}));
        assert_eq!(
            no_method,
            vec![(json!(7), "no method, and not a response".to_owned())]
        );
        assert_eq!(
            one(json!({"jsonrpc": "2.0", "id": 2, "method": 5}))[0].0,
            json!(2)
        );
        assert_eq!(
            one(json!({"jsonrpc": "2.0", "id": 2, "method": "x", "params": [1]}))[0].0,
            json!(2)
        );
        assert_eq!(one(json!("text"))[0].0, Value::Null);
    }

    #[test]
    fn batches_only_where_the_version_allows_them() {
        let batch = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/cancelled"},
            {"jsonrpc": "2.0", "id": "b", "method": "tools/list"}
        ]);
        assert_eq!(check_client_message(&batch, Some("2025-03-26")), Ok(()));
        for version in [
            None,
            Some("2024-11-05"),
            Some("2025-06-18"),
            Some("2026-07-28"),
        ] {
            let ids: Vec<Value> = answers(batch.clone(), version)
                .into_iter()
                .map(|a| a.0)
                .collect();
            assert_eq!(ids, vec![json!(1), json!("b")], "{version:?}");
        }
        assert_eq!(answers(json!([]), Some("2025-11-25")).len(), 1);
        assert_eq!(
            answers(json!([]), Some("2025-03-26"))[0].1,
            "an empty batch"
        );
        let bad = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "1.0", "id": 2, "method": "ping"}]);
        let got = answers(bad, Some("2025-03-26"));
        assert_eq!(
            got.len(),
            2,
            "nothing of it is sent, every request answered"
        );
        assert!(got[0].1.contains("\"jsonrpc\" must be"));
    }
}
