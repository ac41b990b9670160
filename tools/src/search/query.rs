//! `tool_search` query forms (DESIGN.md §4), parsed into a [`Query`]:
//! - `select:name1,name2` — exactly these tools, in this order, any count;
//! - `+term rest of words` — `term` must be a part of the tool's name (`+slack send`
//!   finds `slack_send_message`, not `email_send`); the rest ranks;
//! - anything else — free keywords, ranked.

/// A parsed query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    Select(Vec<String>),
    Ranked {
        /// Lower-cased words each name must contain as one of its parts.
        required: Vec<String>,
        /// The text to rank by (the required words included: they are relevant too).
        text: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the query is empty; describe the capability you need, e.g. \"send email\"")]
    Empty,
    #[error("select: needs at least one tool name, e.g. \"select:fs_read,fs_write\"")]
    EmptySelect,
    #[error("\"+\" must be followed by a word that the tool's name contains, e.g. \"+slack send\"")]
    EmptyRequired,
}

pub fn parse_query(text: &str) -> Result<Query, QueryError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(QueryError::Empty);
    }
    if let Some(names) = text.strip_prefix("select:") {
        let names: Vec<String> = names
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        return if names.is_empty() {
            Err(QueryError::EmptySelect)
        } else {
            Ok(Query::Select(names))
        };
    }
    let mut required = Vec::new();
    let mut rest = Vec::new();
    for word in text.split_whitespace() {
        match word.strip_prefix('+') {
            Some("") => return Err(QueryError::EmptyRequired),
            Some(term) => {
                required.extend(super::text::name_parts(term));
                rest.push(term);
            }
            None => rest.push(word),
        }
    }
    Ok(Query::Ranked {
        required,
        text: rest.join(" "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(required: &[&str], text: &str) -> Result<Query, QueryError> {
        Ok(Query::Ranked {
            required: required.iter().map(|s| s.to_string()).collect(),
            text: text.into(),
        })
    }

    #[test]
    fn query_forms_parse() {
        let table: Vec<(&str, Result<Query, QueryError>)> = vec![
            (
                "select:fs_read,fs_write",
                Ok(Query::Select(vec!["fs_read".into(), "fs_write".into()])),
            ),
            (
                "select: a , b,,c ",
                Ok(Query::Select(vec!["a".into(), "b".into(), "c".into()])),
            ),
            ("select:one", Ok(Query::Select(vec!["one".into()]))),
            ("select:", Err(QueryError::EmptySelect)),
            ("select: , ", Err(QueryError::EmptySelect)),
            (
                "+slack send message",
                ranked(&["slack"], "slack send message"),
            ),
            ("send +Slack", ranked(&["slack"], "send Slack")),
            (
                "+github_issue create",
                ranked(&["github", "issue"], "github_issue create"),
            ),
            ("+ send", Err(QueryError::EmptyRequired)),
            ("weather in Paris", ranked(&[], "weather in Paris")),
            ("  ", Err(QueryError::Empty)),
            // `select:` only as a prefix; elsewhere it is just a word.
            ("please select:x", ranked(&[], "please select:x")),
        ];
        for (text, expected) in table {
            assert_eq!(parse_query(text), expected, "{text:?}");
        }
    }
}
