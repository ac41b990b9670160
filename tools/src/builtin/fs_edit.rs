//! `fs_edit`: replaces an exact piece of text in a file that was read. The text must occur
//! exactly once (or `replace_all`), so an edit never lands somewhere unintended.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use steward_events::ToolOutcome;

use crate::context::ExecutionContext;
use crate::contract::{Applies, ToolContract};
use crate::handler::{ToolFuture, ToolHandler};

pub(super) fn contract() -> ToolContract {
    ToolContract::write(
"fs_edit",
"Replace exact text in a file you have read.",
crate::args::schema::<FsEditArgs>(),
)
// A repeated edit finds its old text gone and changes nothing.
.idempotent(true)
.group("group:fs")
.guidance("old_text must match the file exactly and occur once; include surrounding lines to make it unique.")
.hint("modify replace change patch file")
.budget(4 * 1024)
.returns_untrusted(Applies::PerCall)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FsEditArgs {
    path: String,
    /// Text to replace, exactly as in the file.
    #[schemars(length(min = 1))]
    old_text: String,
    new_text: String,
    /// Replace every occurrence. Default false.
    #[serde(default)]
    replace_all: bool,
}

pub(super) struct FsEdit;

impl ToolHandler for FsEdit {
    fn returns_untrusted_for(&self, args: &Value, ctx: &ExecutionContext) -> bool {
        super::reads_untrusted(args, ctx)
    }

    fn call<'a>(&'a self, args: &'a Value, ctx: &'a ExecutionContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args: FsEditArgs = match crate::args::parse(args) {
                Ok(args) => args,
                Err(refused) => return refused,
            };
            let (requested, old_text, new_text, replace_all) = (
                args.path.as_str(),
                args.old_text.as_str(),
                args.new_text.as_str(),
                args.replace_all,
            );
            let at = match ctx.files.resolve(requested) {
                Ok(at) => at,
                Err(reason) => return ToolOutcome::error(reason),
            };
            let path = at.path();
            if !ctx.files.metadata(&at).is_ok_and(|m| m.is_file()) {
                return ToolOutcome::error(format!(
                    "{} does not exist; create it with fs_write",
                    path.display()
                ));
            }
            let read = {
                let at = at.clone();
                super::on_files(ctx, move |files| files.read_stamped(&at, u64::MAX)).await
            };
            // The content edited is the content checked: one read serves both.
            let read = read.and_then(|(bytes, stamp)| {
                ctx.files.check_unchanged(&ctx.trajectory, &at, &stamp)?;
                Ok(bytes)
            });
            let text = match read.map(String::from_utf8) {
                Ok(Ok(text)) => text,
                Ok(Err(_)) => {
                    return ToolOutcome::error(format!("{} is not UTF-8 text", path.display()));
                }
                Err(reason) => return ToolOutcome::error(reason),
            };
            let occurrences = text.matches(old_text).count();
            match (occurrences, replace_all) {
                (0, _) => {
                    return ToolOutcome::error(format!(
                        "old_text does not occur in {}",
                        path.display()
                    ))
                    .with_hint("read the file again with fs_read and copy the text exactly, whitespace included");
                }
                (n, false) if n > 1 => {
                    return ToolOutcome::error(format!(
                        "old_text occurs {n} times in {}; include more surrounding text to make it unique, or set replace_all",
                        path.display()
                    ));
                }
                _ => {}
            }
            let edited = text.replace(old_text, new_text);
            if let Err(reason) = super::fs_write::write(ctx, &at, edited.into_bytes()).await {
                return ToolOutcome::error(reason);
            }
            ToolOutcome::ok(
                json!({"path": path.display().to_string(), "replacements": occurrences}),
            )
        })
    }
}
