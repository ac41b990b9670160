//! `steward pending`, `steward confirm` and `steward deny`: the owner's side of two-phase
//! confirmation.

use std::process::ExitCode;

use serde_json::Value;

use super::Context;
use crate::client::{Client, ClientError};
use crate::protocol::{PendingRow, Request, Response};

fn print_row(row: &PendingRow, json: bool) {
    if json {
        println!("{}", serde_json::to_string(row).unwrap_or_default());
        return;
    }
    println!(
        "{}  {:<9} {:<14} expires {}  {}",
        row.id,
        row.state,
        row.tool,
        row.expires_at.format("%Y-%m-%dT%H:%M:%SZ"),
        row.preview
    );
    if let Some(reason) = &row.state_reason {
        println!("    {reason}");
    }
    if let Some(result) = &row.result {
        println!(
            "    result: {}",
            match &result.content {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            }
        );
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

pub async fn pending(ctx: &Context, json: bool) -> Result<ExitCode, ClientError> {
    answer(ctx, Request::Pending, json).await
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
