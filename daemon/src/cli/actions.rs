//! `steward tools call`, and `steward pending`, `confirm` and `deny`: the owner acting
//! through the tool pipeline, and the owner's side of two-phase confirmation.

use super::output::out;
use std::process::ExitCode;

use serde_json::Value;
use steward_events::{ToolOutcome, ToolStatus};

use super::Context;
use super::table::{self, Table};
use steward_protocol::client::{Client, ClientError};
use steward_protocol::{PendingRow, Request, Response};

fn print_row(row: &PendingRow, json: bool) {
    if json {
        out!("{}", serde_json::to_string(row).unwrap_or_default());
        return;
    }
    out!(
        "{}  {:<9} {:<14} expires {}  {}",
        row.id,
        row.state,
        row.tool,
        table::local(row.expires_at),
        row.preview
    );
    if let Some(reason) = &row.state_reason {
        out!("    {reason}");
    }
    if let Some(result) = &row.result {
        out!("    result: {}", result.content_text());
    }
}

async fn answer(ctx: &Context, request: Request, json: bool) -> Result<ExitCode, ClientError> {
    let mut code = ExitCode::SUCCESS;
    for response in Client::call(&ctx.socket_path(), &request).await? {
        match response {
            Response::Action { action } => {
                print_row(&action, json);
                if action.state == "failed" {
                    code = ExitCode::FAILURE;
                }
            }
            Response::Error { message } => {
                eprintln!("steward: {message}");
                code = ExitCode::FAILURE;
            }
            _ => {}
        }
    }
    Ok(code)
}

/// `steward pending`: the actions waiting for the owner (`--all`: answered ones too), each
/// with its short id (unique among all requests, as `/confirm` and `steward confirm` take
/// it). `--json` lists every request with its state and full id, as it always did: scripts
/// filter by state.
pub async fn pending(ctx: &Context, json: bool, all: bool) -> Result<ExitCode, ClientError> {
    let mut rows = Vec::new();
    for response in Client::call(&ctx.socket_path(), &Request::Pending).await? {
        match response {
            Response::Action { action } => rows.push(action),
            Response::Error { message } => {
                eprintln!("steward: {message}");
                return Ok(ExitCode::FAILURE);
            }
            _ => {}
        }
    }
    if json {
        for row in &rows {
            print_row(row, true);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    let mut listing = Table::new(
        &[
            ("ID", 6),
            ("STATE", 9),
            ("TOOL", 14),
            ("EXPIRES", 19),
            ("WHAT", 0),
        ],
        false,
    );
    for row in rows.iter().filter(|r| all || r.state == "pending") {
        let mut what = row.preview.clone();
        if let Some(reason) = &row.state_reason {
            what.push_str(&format!(" — {reason}"));
        }
        listing.row(vec![
            crate::owner::notices::short_id(&row.id, &ids).to_owned(),
            row.state.clone(),
            row.tool.clone(),
            table::local(row.expires_at),
            what,
        ]);
    }
    if !listing.finish() {
        out!(
            "{}",
            if all {
                "No requests for confirmation."
            } else {
                "Nothing waits for your confirmation (--all lists answered ones)."
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn confirm(
    ctx: &Context,
    id: String,
    args: Option<String>,
    json: bool,
) -> Result<ExitCode, ClientError> {
    let args = match args.map(|a| serde_json::from_str::<Value>(&a)).transpose() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("steward: --args is not valid JSON: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    answer(ctx, Request::Confirm { id, args }, json).await
}

pub async fn deny(
    ctx: &Context,
    id: String,
    reason: Option<String>,
    json: bool,
) -> Result<ExitCode, ClientError> {
    answer(ctx, Request::Deny { id, reason }, json).await
}

/// Runs one tool call; exit 0 for `ok` and `pending`, 1 for `error`, `denied`, `blocked`.
pub async fn call_tool(
    ctx: &Context,
    tool: String,
    args: String,
    json: bool,
) -> Result<ExitCode, ClientError> {
    let args: Value = match serde_json::from_str(&args) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("steward: --args is not valid JSON: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let request = Request::CallTool {
        tool,
        args: Some(args),
    };
    for response in Client::call(&ctx.socket_path(), &request).await? {
        match response {
            Response::ToolResult { outcome, .. } => return Ok(print_outcome(&outcome, json)),
            Response::Rejected { reason, .. } | Response::Error { message: reason } => {
                eprintln!("steward: {reason}");
                return Ok(ExitCode::FAILURE);
            }
            _ => {}
        }
    }
    eprintln!("steward: the daemon ended the call without a result");
    Ok(ExitCode::FAILURE)
}

fn print_outcome(outcome: &ToolOutcome, json: bool) -> ExitCode {
    let text = outcome.content_text();
    let (name, succeeded) = match outcome.status {
        ToolStatus::Ok => ("ok", true),
        ToolStatus::Pending => ("pending", true),
        ToolStatus::Denied => ("denied", false),
        ToolStatus::Blocked => ("blocked", false),
        ToolStatus::Error | ToolStatus::Cancelled => ("error", false),
    };
    if json {
        let mut line = serde_json::json!({ "outcome": name });
        if outcome.untrusted {
            line["untrusted"] = Value::Bool(true);
        }
        match outcome.status {
            ToolStatus::Ok => line["result"] = outcome.content.clone(),
            ToolStatus::Pending => {
                line["pending_id"] = outcome.content["pending_id"].clone();
                line["reason"] = outcome.content["reason"].clone();
            }
            ToolStatus::Denied | ToolStatus::Blocked => line["reason"] = Value::String(text),
            ToolStatus::Error | ToolStatus::Cancelled => {
                line["result"] = outcome.content.clone();
                line["reason"] = Value::String(text);
            }
        }
        out!("{line}");
    } else {
        match outcome.status {
            ToolStatus::Ok => out!("{text}"),
            ToolStatus::Pending => out!(
                "pending {}: {} (steward confirm {0} / steward deny {0})",
                outcome.content["pending_id"].as_str().unwrap_or("?"),
                outcome.content["reason"].as_str().unwrap_or("")
            ),
            // The text of a blocked call says that it was blocked, and why.
            ToolStatus::Blocked => eprintln!("steward: {text}"),
            _ => eprintln!("steward: {name}: {text}"),
        }
    }
    if succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
