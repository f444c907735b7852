//! The emulator's own MCP server: a few tools, one of them not idempotent.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::State;

/// The MCP protocol versions the emulator speaks (all with `initialize`), newest last.
const PROTOCOL_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// What a POST's JSON-RPC body asks for, as far as faults and routing care.
pub(crate) struct Inspected {
    /// The parsed body (a message or a batch), `None` when it is not JSON.
    pub(crate) value: Option<Value>,
    /// The one message's method.
    pub(crate) method: Option<String>,
    /// The one message's id.
    pub(crate) id: Value,
}

pub(crate) fn inspect(body: &[u8]) -> Inspected {
    let value: Option<Value> = serde_json::from_slice(body).ok();
    let (method, id) = match &value {
        Some(Value::Object(m)) => (
            m.get("method").and_then(Value::as_str).map(str::to_owned),
            m.get("id").cloned().unwrap_or(Value::Null),
        ),
        _ => (None, Value::Null),
    };
    Inspected { value, method, id }
}

/// Answers a JSON-RPC message or batch. `None` when nothing is to be answered (notifications
/// and responses only: the transport answers 202).
pub(crate) fn answer(value: &Value, state: &State) -> Option<Value> {
    match value {
        Value::Array(batch) if !batch.is_empty() => {
            let answers: Vec<Value> = batch.iter().filter_map(|m| answer_one(m, state)).collect();
            (!answers.is_empty()).then_some(Value::Array(answers))
        }
        Value::Array(_) => Some(error(Value::Null, -32600, "Invalid Request: empty batch")),
        message => answer_one(message, state),
    }
}

fn answer_one(message: &Value, state: &State) -> Option<Value> {
    let Some(object) = message.as_object() else {
        return Some(error(Value::Null, -32600, "Invalid Request"));
    };
    let id = object.get("id").cloned();
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        // A response from the client (to a server request): nothing to answer.
        return None;
    };
    let id = id?; // A notification: nothing to answer.
    let params = object.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => Ok(json!({
            // The version asked for when spoken here, else the newest spoken here (MCP's
            // negotiation: the client decides whether it can go on with that one).
            "protocolVersion": params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .filter(|v| PROTOCOL_VERSIONS.contains(v))
                .unwrap_or(PROTOCOL_VERSIONS[PROTOCOL_VERSIONS.len() - 1]),
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": {"name": "agentcore-tower-emulator", "version": env!("CARGO_PKG_VERSION")},
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": tools()})),
        "tools/call" => call_tool(&id, &params, state),
        other => Err((-32601, format!("Method not found: {other}"))),
    };
    Some(match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => error(id, code, &message),
    })
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn tools() -> Value {
    json!([
        {
            "name": "add",
            "description": "Adds two numbers.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
            "annotations": {"readOnlyHint": false, "idempotentHint": true}
        },
        {
            "name": "echo",
            "description": "Answers its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            "annotations": {"readOnlyHint": true}
        },
        {
            "name": "counter",
            "description": "Increments a counter and answers its new value. NOT idempotent.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": false, "idempotentHint": false, "destructiveHint": false}
        }
    ])
}

fn call_tool(id: &Value, params: &Value, state: &State) -> Result<Value, (i64, String)> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or((-32602, "Invalid params: no tool name".to_owned()))?;
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    let text = match name {
        "add" => {
            let a = args.get("a").and_then(Value::as_f64);
            let b = args.get("b").and_then(Value::as_f64);
            match (a, b) {
                (Some(a), Some(b)) => format!("{}", a + b),
                // Invalid input is a tool execution error, which the model can read and correct
                // (SEP-1303, MCP 2025-11-25), not a protocol error: the tool did not run.
                _ => {
                    return Ok(json!({
                        "content": [{"type": "text", "text": "add takes numbers a and b"}],
                        "isError": true
                    }));
                }
            }
        }
        "echo" => args
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        "counter" => (state.counter.fetch_add(1, Ordering::SeqCst) + 1).to_string(),
        other => return Err((-32602, format!("Unknown tool: {other}"))),
    };
    let id_key = id.to_string();
    state.record(|audit| {
        *audit.executions.entry(name.to_owned()).or_default() += 1;
        *audit
            .executions_by_id
            .entry((name.to_owned(), id_key))
            .or_default() += 1;
    });
    Ok(json!({"content": [{"type": "text", "text": text}], "isError": false}))
}
