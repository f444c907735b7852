//! The tools: their listing, their input schemas, and what a call of each does.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::State;

/// The tools every client is shown, in their order.
fn of_every_era() -> Value {
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

/// The tools of MCP 2026-07-28's features, shown to its clients after the others: each is
/// still answered when a client of an earlier version calls it by name.
fn of_2026() -> Value {
    json!([
        {
            "name": "confirm",
            "description": "Asks the user to confirm, then runs. NOT idempotent.",
            "inputSchema": {"type": "object", "properties": {"action": {"type": "string"}}},
            "annotations": {"readOnlyHint": false, "idempotentHint": false, "destructiveHint": false}
        },
        {
            "name": "weather",
            "description": "Answers the weather in a city.",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string", "x-mcp-header": "City"}}, "required": ["city"]},
            "annotations": {"readOnlyHint": true, "idempotentHint": true}
        },
        {
            "name": "slow_job",
            "description": "Runs for a while, as a task when the client takes tasks. NOT idempotent.",
            "inputSchema": {"type": "object", "properties": {}},
            "annotations": {"readOnlyHint": false, "idempotentHint": false, "destructiveHint": false}
        },
        long_job()
    ])
}

/// `long_job`, which runs only as a task (the tasks extension, a feature of 2026-07-28: listed
/// to its clients; called by name, answered in either era).
fn long_job() -> Value {
    json!({
        "name": "long_job",
        "description": "Runs for a long while (40 minutes unless `seconds` says), only as a task: \
            a client must declare the tasks extension (io.modelcontextprotocol/tasks). With `ask`, \
            it asks the user to go on at its half; with `fail`, it fails at its end. NOT idempotent.",
        "inputSchema": {"type": "object", "properties": {
            "seconds": {"type": "integer", "minimum": 0, "description": "How long the job runs"},
            "ask": {"type": "boolean", "description": "Ask the user to go on at half its length"},
            "fail": {"type": "boolean", "description": "Fail with a JSON-RPC error at its end"}
        }},
        "annotations": {"readOnlyHint": false, "idempotentHint": false, "destructiveHint": false}
    })
}

/// The tools listed to a client: of MCP 2026-07-28 (`modern`), all seven; of an earlier
/// version, the three of every era, as before.
pub(super) fn listed(modern: bool) -> Value {
    let mut tools = of_every_era();
    if modern && let (Some(all), Value::Array(more)) = (tools.as_array_mut(), of_2026()) {
        all.extend(more);
    }
    tools
}

/// The input schema of the tool named, listed or not (for the `Mcp-Param-*` check).
pub(super) fn input_schema(name: &str) -> Option<Value> {
    listed(true)
        .as_array()?
        .iter()
        .find(|tool| tool["name"] == name)
        .map(|tool| tool["inputSchema"].clone())
}

/// Counts one execution of `tool` for request `id`.
pub(super) fn ran(state: &State, tool: &str, id: &Value) {
    let id_key = id.to_string();
    state.record(|audit| {
        *audit.executions.entry(tool.to_owned()).or_default() += 1;
        *audit
            .executions_by_id
            .entry((tool.to_owned(), id_key))
            .or_default() += 1;
    });
}

/// A `tools/call` result of one text.
pub(super) fn text_result(text: &str, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// What `slow_job` answers when it is done.
pub(super) fn slow_job_result() -> Value {
    text_result("slow_job done", false)
}

/// Runs a `tools/call` (`modern`: of MCP 2026-07-28; `confirm` is answered before this by the
/// modern server, `long_job` and a `slow_job` task by the task code, in either era).
pub(super) async fn call(
    id: &Value,
    params: &Value,
    modern: bool,
    state: &State,
) -> Result<Value, (i64, String)> {
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
                _ => return Ok(text_result("add takes numbers a and b", true)),
            }
        }
        "echo" => args
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        "counter" => (state.counter.fetch_add(1, Ordering::SeqCst) + 1).to_string(),
        "weather" => match args.get("city").and_then(Value::as_str) {
            Some(city) => format!("Sunny in {city}"),
            None => return Ok(text_result("weather takes a city", true)),
        },
        "slow_job" => {
            // Without a task, the call takes as long as the job.
            ran(state, name, id);
            tokio::time::sleep(state.config.slow_job_duration).await;
            return Ok(slow_job_result());
        }
        "confirm" if !modern => {
            // It asks the user in the middle of the call: a multi round-trip request, which
            // only MCP 2026-07-28 has. Nothing ran.
            return Ok(text_result(
                "confirm asks the user first, in a multi round-trip request: it needs MCP \
                 2026-07-28",
                true,
            ));
        }
        other => return Err((-32602, format!("Unknown tool: {other}"))),
    };
    ran(state, name, id);
    Ok(text_result(&text, false))
}
