//! `steward skills list|show`: the skills the daemon would offer, read from the skill
//! directories directly (no daemon needed), with the folders that are not skills and why.

use std::process::ExitCode;

use steward_tools::skills::SkillLibrary;

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
        SkillsCommand::Show { name } => match library.load(&name) {
            Ok(loaded) => {
                let (skill, text) = (loaded.skill, loaded.text);
                out!("{} — {}", text.name, text.description);
                out!(
                    "folder: {}{}",
                    skill.dir.display(),
                    if skill.trusted { "" } else { " (untrusted)" }
                );
                if let Some(when) = text.when_to_use {
                    out!("when to use: {when}");
                }
                if !loaded.files.is_empty() {
                    out!("files: {}", loaded.files.join(", "));
                }
                out!("\n{}", text.body);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("steward: {e} (steward skills list)");
                ExitCode::from(1)
            }
        },
    }
}
