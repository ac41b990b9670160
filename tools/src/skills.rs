//! Skills as found on disk: folders with a `SKILL.md` (front matter `name`, `description`,
//! optional `when_to_use`, then the procedure) and the files beside it. The tools that offer
//! them to the model are `crate::builtin`'s `skill_list` / `skill_load`; `tool_search` and
//! the CLI read them here too.
//!
//! Decided here:
//! - A skill is a folder `NAME/` in one of the skill directories; one without a valid
//!   `SKILL.md` is left out (and listed as [`NotASkill`] with the reason). The first
//!   directory wins a name.
//! - The directories are read again on every call, so an edit is what the next load gives.
//! - Everything of a skill is read beneath its folder by the kernel (`openat2`
//!   `RESOLVE_BENEATH`): nothing outside it, through `..` or a symlink.
//! - A skill is trusted only when its directory is (`skills.trusted`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::files::EntryKind;
use crate::files::beneath::Root;

const SKILL_FILE: &str = "SKILL.md";
const MAX_SKILL_BYTES: u64 = 256 * 1024;
const MAX_FILES: usize = 200;

/// Where skills are found, and which of those places the owner trusts.
#[derive(Clone, Debug, Default)]
pub struct SkillLibrary {
    pub dirs: Vec<(PathBuf, bool)>,
}

/// A skill as listed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when_to_use: Option<String>,
    pub dir: PathBuf,
    pub trusted: bool,
}

/// A folder that looks like a skill but is not one, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotASkill {
    pub dir: PathBuf,
    pub reason: String,
}

/// `SKILL.md` read: its front matter and its text.
#[derive(Debug, PartialEq)]
pub struct SkillText {
    pub name: String,
    pub description: String,
    pub when_to_use: Option<String>,
    pub body: String,
}

/// Reads a `SKILL.md` (see the module docs).
pub fn parse_skill(text: &str) -> Result<SkillText, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("---") {
        return Err("SKILL.md must start with front matter between --- lines".into());
    }
    let (mut name, mut description, mut when_to_use) = (None, None, None);
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim() == "---" {
            closed = true;
            break;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim().trim_matches('"').trim_matches('\'').to_owned();
        match key.trim() {
            "name" => name = Some(value),
            "description" => description = Some(value),
            "when_to_use" => when_to_use = Some(value),
            _ => {}
        }
    }
    if !closed {
        return Err("the front matter is not closed with ---".into());
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or("the front matter has no name")?;
    let description = description
        .filter(|d| !d.is_empty())
        .ok_or("the front matter has no description")?;
    Ok(SkillText {
        name,
        description,
        when_to_use: when_to_use.filter(|w| !w.is_empty()),
        body: lines.collect::<Vec<_>>().join("\n").trim().to_owned(),
    })
}

fn read_skill_md(root: &Root) -> Result<String, String> {
    use std::io::Read;
    let file = root
        .open_read(Path::new(SKILL_FILE))
        .map_err(|e| format!("cannot read {SKILL_FILE}: {e}"))?;
    let mut text = String::new();
    file.take(MAX_SKILL_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {SKILL_FILE}: {e}"))?;
    Ok(text)
}

impl SkillLibrary {
    /// Every skill, and every folder that failed to be one (see the module docs).
    pub fn scan(&self) -> (Vec<Skill>, Vec<NotASkill>) {
        let (mut skills, mut broken) = (Vec::<Skill>::new(), Vec::new());
        for (dir, trusted) in &self.dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut folders: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            folders.sort();
            for folder in folders {
                let read = Root::open(&folder)
                    .map_err(|e| e.to_string())
                    .and_then(|root| read_skill_md(&root))
                    .and_then(|text| parse_skill(&text));
                match read {
                    Ok(text) if skills.iter().any(|s| s.name == text.name) => {
                        broken.push(NotASkill {
                            dir: folder,
                            reason: format!("another skill is called {}", text.name),
                        })
                    }
                    Ok(text) => skills.push(Skill {
                        name: text.name,
                        description: text.description,
                        when_to_use: text.when_to_use,
                        dir: folder,
                        trusted: *trusted,
                    }),
                    Err(reason) => broken.push(NotASkill {
                        dir: folder,
                        reason,
                    }),
                }
            }
        }
        (skills, broken)
    }

    pub fn find(&self, name: &str) -> Option<Skill> {
        self.scan().0.into_iter().find(|s| s.name == name)
    }

    /// The skills whose name, description or use matches a word of `query`, best first.
    pub fn search(&self, query: &str, max: usize) -> Vec<Skill> {
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 2)
            .map(str::to_lowercase)
            .collect();
        let mut scored: Vec<(usize, Skill)> = self
            .scan()
            .0
            .into_iter()
            .map(|skill| {
                let text = format!(
                    "{} {} {}",
                    skill.name,
                    skill.description,
                    skill.when_to_use.as_deref().unwrap_or_default()
                )
                .to_lowercase();
                (
                    words.iter().filter(|w| text.contains(w.as_str())).count(),
                    skill,
                )
            })
            .filter(|(score, _)| *score > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
        scored.into_iter().take(max).map(|(_, s)| s).collect()
    }
}

/// The files of a skill besides `SKILL.md`, relative to its folder (at most [`MAX_FILES`],
/// three levels deep, symlinks not followed).
fn skill_files(root: &Root) -> Vec<String> {
    let mut files = Vec::new();
    let mut queue = vec![(PathBuf::new(), 0)];
    while let Some((dir, depth)) = queue.pop() {
        let Ok(mut entries) = root.list(&dir) else {
            continue;
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            let path = dir.join(&entry.name);
            match entry.kind {
                EntryKind::File if path != Path::new(SKILL_FILE) => {
                    files.push(path.to_string_lossy().into_owned());
                }
                EntryKind::Dir if depth < 2 => queue.push((path, depth + 1)),
                _ => {}
            }
            if files.len() >= MAX_FILES {
                return files;
            }
        }
    }
    files.sort();
    files
}

/// A skill loaded by name: what is known of it, its text and the list of its files.
#[derive(Debug)]
pub struct LoadedSkill {
    pub skill: Skill,
    pub text: SkillText,
    pub files: Vec<String>,
}

impl SkillLibrary {
    fn opened(&self, name: &str) -> Result<(Skill, Root), String> {
        let skill = self
            .find(name)
            .ok_or_else(|| format!("no skill is called {name:?}; skill_list lists them"))?;
        let root =
            Root::open(&skill.dir).map_err(|e| format!("cannot open the skill {name}: {e}"))?;
        Ok((skill, root))
    }

    /// The skill `name`: its text and its files.
    pub fn load(&self, name: &str) -> Result<LoadedSkill, String> {
        let (skill, root) = self.opened(name)?;
        let text = parse_skill(&read_skill_md(&root)?)?;
        Ok(LoadedSkill {
            files: skill_files(&root),
            skill,
            text,
        })
    }

    /// One file of the skill `name`, read beneath its folder.
    pub fn read_file(&self, name: &str, file: &str) -> Result<(Skill, String), String> {
        use std::io::Read;
        let (skill, root) = self.opened(name)?;
        let mut text = String::new();
        root.open_read(Path::new(file))
            .and_then(|f| f.take(MAX_SKILL_BYTES).read_to_string(&mut text))
            .map_err(|e| format!("cannot read {file} of the skill {name}: {e}"))?;
        Ok((skill, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_md_is_front_matter_then_text() {
        let parsed = parse_skill(
            "---\nname: invoices\ndescription: \"Sum this month's invoices\"\nwhen_to_use: at month end\n---\n\n# Steps\n1. list\n",
        )
        .unwrap();
        assert_eq!(parsed.name, "invoices");
        assert_eq!(parsed.description, "Sum this month's invoices");
        assert_eq!(parsed.when_to_use.as_deref(), Some("at month end"));
        assert_eq!(parsed.body, "# Steps\n1. list");
        for (text, why) in [
            ("# no front matter", "must start"),
            ("---\nname: x\n", "not closed"),
            ("---\ndescription: d\n---\n", "no name"),
            ("---\nname: x\n---\n", "no description"),
        ] {
            assert!(parse_skill(text).unwrap_err().contains(why), "{text}");
        }
    }
}
