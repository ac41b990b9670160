//! `steward skills list|show`: the skills the daemon would offer, read from the skill
//! directories directly (no daemon needed), with the folders that are not skills and why.

use std::process::ExitCode;

use steward_tools::builtin::{SkillLibrary, parse_skill};

use super::output::out;
use super::{Context, SkillsCommand};

fn library(ctx: &Context) -> SkillLibrary {
    crate::core::skill_library(&ctx.config, &ctx.data_dir, ctx.config_path.as_deref())
}

pub fn run(ctx: &Context, command: SkillsCommand) -> ExitCode {
    let library = library(ctx);
    match command {
        SkillsCommand::List { json } => {
            let (skills, broken) = library.scan();
            if json {
                for skill in &skills {
                    super::listing::json_line(skill);
                }
                for folder in &broken {
                    super::listing::json_line(folder);
                }
                return ExitCode::SUCCESS;
            }
            if skills.is_empty() {
                let dirs: Vec<String> = library
                    .dirs
                    .iter()
                    .map(|(dir, _)| dir.display().to_string())
                    .collect();
                out!("No skills in {}.", dirs.join(", "));
            }
            for skill in &skills {
                out!(
                    "{:<24} {}{}",
                    skill.name,
                    skill.description,
                    if skill.trusted { "" } else { "  (untrusted)" }
                );
            }
            for folder in &broken {
                out!("not a skill: {} ({})", folder.dir.display(), folder.reason);
            }
            ExitCode::SUCCESS
        }
        SkillsCommand::Show { name } => {
            let Some(skill) = library.find(&name) else {
                eprintln!("steward: no skill is called {name:?} (steward skills list)");
                return ExitCode::from(1);
            };
            let text = std::fs::read_to_string(skill.dir.join("SKILL.md"))
                .map_err(|e| e.to_string())
                .and_then(|text| parse_skill(&text));
            match text {
                Ok(text) => {
                    out!("{} — {}", text.name, text.description);
                    out!(
                        "folder: {}{}",
                        skill.dir.display(),
                        if skill.trusted { "" } else { " (untrusted)" }
                    );
                    if let Some(when) = text.when_to_use {
                        out!("when to use: {when}");
                    }
                    out!("\n{}", text.body);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("steward: the skill {name} cannot be read: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
