//! Text as people are shown it: cut to a number of characters (never inside one), with an
//! ellipsis saying it was cut. Used where a limit is the reader's, not the protocol's bytes.

/// `text` cut to at most `max` characters, the last of them `…` when it was cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some(_) => {
            let kept: String = text.chars().take(max.saturating_sub(1)).collect();
            format!("{kept}…")
        }
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn text_is_cut_at_characters_with_an_ellipsis() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcd", 4), "abcd");
        assert_eq!(cut("ééééé", 3), "éé…");
        assert_eq!(cut("", 3), "");
    }
}
