//! Tokenizing without the tokenizer's general machinery, for the two families static
//! embedding models come with: BERT's WordPiece (model2vec's own models) and SentencePiece's
//! BPE as Llama's tokenizer has it (WordLlama, the model `scripts/embedding-model` builds).
//! Profiling showed the general path — normalisers that track offsets, and for a BPE with
//! no pre-tokenizer one merge pass over the whole text, whose cache never hits because every
//! request is a new text — cost most of a search. Each shortcut is checked against the
//! tokenizer's own output in the tests below, and declines any text it cannot split exactly
//! (the caller then takes the tokenizer's path).

use tokenizers::models::ModelWrapper;
use tokenizers::normalizers::{NormalizerWrapper, Sequence};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{Model, Tokenizer};

/// Most tokens of one text that count: a tool's description or a request is far shorter;
/// a pasted blob stops here.
pub(super) const MAX_TOKENS: usize = 512;

/// SentencePiece's word-start mark, which stands for a space.
const META: char = '\u{2581}';

/// A way to split text into token ids without the tokenizer, chosen by the tokenizer's shape.
#[derive(Debug)]
pub(super) enum Shortcut {
    Bert(AsciiWords),
    Metaspace(MetaspaceWords),
}

impl Shortcut {
    pub(super) fn for_tokenizer(tokenizer: &Tokenizer) -> Option<Self> {
        AsciiWords::for_tokenizer(tokenizer)
            .map(Self::Bert)
            .or_else(|| MetaspaceWords::for_tokenizer(tokenizer).map(Self::Metaspace))
    }

    /// The ids of `text`'s first [`MAX_TOKENS`] tokens, or `None` when the text is not for
    /// this shortcut.
    pub(super) fn token_ids(&self, tokenizer: &Tokenizer, text: &str) -> Option<Vec<u32>> {
        match self {
            Self::Bert(words) => words.token_ids(tokenizer, text),
            Self::Metaspace(words) => words.token_ids(tokenizer, text),
        }
    }
}

/// The first characters of a tokenizer's added tokens, which it matches in raw text before
/// anything else: a text holding one takes the tokenizer's path.
fn added_starts(tokenizer: &Tokenizer) -> Vec<char> {
    let mut starts: Vec<char> = tokenizer
        .get_added_tokens_decoder()
        .values()
        .filter_map(|token| token.content.chars().next())
        .collect();
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// BERT tokenization of plain ASCII text without its machinery: profiling showed the
/// tokenizer's normaliser and offset bookkeeping cost ~0.4 µs per character, most of a
/// search's time. For ASCII, BERT's normaliser only lowercases (no accents, no CJK, no
/// control characters admitted here) and its pre-tokenizer splits on whitespace and makes
/// every ASCII punctuation mark a word, so a text is its words' tokens in order; a word
/// that is a whole vocabulary entry is one token (WordPiece's longest match), and any other
/// word goes through the tokenizer alone. Text with other characters, or with the first
/// character of a special token such as `[CLS]`, takes the tokenizer's own path.
#[derive(Debug)]
pub(super) struct AsciiWords {
    /// First characters of the tokenizer's added tokens, which it matches in raw text.
    added_starts: Vec<char>,
    longest_word: usize,
}

impl AsciiWords {
    fn for_tokenizer(tokenizer: &Tokenizer) -> Option<Self> {
        let Some(NormalizerWrapper::BertNormalizer(normaliser)) = tokenizer.get_normalizer() else {
            return None;
        };
        let bert_pre_tokenizer = matches!(
            tokenizer.get_pre_tokenizer(),
            Some(PreTokenizerWrapper::BertPreTokenizer(_))
        );
        let ModelWrapper::WordPiece(word_piece) = tokenizer.get_model() else {
            return None;
        };
        if !normaliser.lowercase || !bert_pre_tokenizer {
            return None;
        }
        Some(Self {
            added_starts: added_starts(tokenizer),
            longest_word: word_piece.max_input_chars_per_word,
        })
    }

    /// `None` when the text is not for this path.
    fn token_ids(&self, tokenizer: &Tokenizer, text: &str) -> Option<Vec<u32>> {
        let plain = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x21..=0x7e);
        if !text.bytes().all(plain) || text.chars().any(|c| self.added_starts.contains(&c)) {
            return None;
        }
        let model = tokenizer.get_model();
        let mut ids = Vec::new();
        let mut word = String::new();
        let push_word = |word: &str, ids: &mut Vec<u32>| {
            if word.is_empty() {
                return;
            }
            match model.token_to_id(word) {
                Some(id) if word.len() <= self.longest_word => ids.push(id),
                _ => {
                    if let Ok(encoding) = tokenizer.encode_fast(word, false) {
                        ids.extend_from_slice(encoding.get_ids());
                    }
                }
            }
        };
        for b in text.bytes() {
            if ids.len() >= MAX_TOKENS {
                break;
            }
            if b.is_ascii_alphanumeric() {
                word.push(char::from(b.to_ascii_lowercase()));
                continue;
            }
            push_word(&word, &mut ids);
            word.clear();
            if b.is_ascii_punctuation() {
                push_word(char::from(b).encode_utf8(&mut [0; 4]), &mut ids);
            }
        }
        push_word(&word, &mut ids);
        ids.truncate(MAX_TOKENS);
        Some(ids)
    }
}

/// SentencePiece BPE as Llama's `tokenizer.json` has it: a normaliser that puts [`META`]
/// before the text and in place of every space, no pre-tokenizer, a BPE model. When no
/// vocabulary entry holds [`META`] after another character, no merge can join two words,
/// so a text is its words' tokens in order, each word tokenized alone as `▁word` — and the
/// BPE model caches words, which repeat across requests, where it could not cache whole
/// texts. Words are split at any whitespace: a run of spaces, a tab or a newline counts as
/// one space here (the tokenizer would give such runs tokens of their own, rows that carry
/// no meaning for a search).
#[derive(Debug)]
pub(super) struct MetaspaceWords {
    added_starts: Vec<char>,
}

impl MetaspaceWords {
    fn for_tokenizer(tokenizer: &Tokenizer) -> Option<Self> {
        let Some(NormalizerWrapper::Sequence(sequence)) = tokenizer.get_normalizer() else {
            return None;
        };
        if !is_metaspace_normaliser(sequence) || tokenizer.get_pre_tokenizer().is_some() {
            return None;
        }
        let ModelWrapper::BPE(_) = tokenizer.get_model() else {
            return None;
        };
        let joins_words = tokenizer
            .get_vocab(false)
            .keys()
            .any(|token| token.trim_start_matches(META).contains(META));
        if joins_words {
            return None;
        }
        Some(Self {
            added_starts: added_starts(tokenizer),
        })
    }

    fn token_ids(&self, tokenizer: &Tokenizer, text: &str) -> Option<Vec<u32>> {
        if text
            .chars()
            .any(|c| c == META || self.added_starts.contains(&c))
        {
            return None;
        }
        let model = tokenizer.get_model();
        let mut ids = Vec::new();
        let mut piece = String::new();
        for word in text.split_whitespace() {
            if ids.len() >= MAX_TOKENS {
                break;
            }
            piece.clear();
            piece.push(META);
            piece.push_str(word);
            if let Ok(tokens) = model.tokenize(&piece) {
                ids.extend(tokens.iter().map(|token| token.id));
            }
        }
        ids.truncate(MAX_TOKENS);
        Some(ids)
    }
}

/// Whether a normaliser sequence is exactly "prepend `▁`, replace every space with `▁`",
/// read from its serialised form (the normalisers' fields are private).
fn is_metaspace_normaliser(sequence: &Sequence) -> bool {
    let expected = serde_json::json!({"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": META.to_string()},
        {"type": "Replace", "pattern": {"String": " "}, "content": META.to_string()},
    ]});
    serde_json::to_value(sequence).is_ok_and(|value| value == expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BERT tokenizer as `tokenizer.json` describes one, with a small WordPiece vocabulary.
    fn bert_tokenizer() -> Tokenizer {
        let words = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "find", "the", "weather", "in", "paris", "rome",
            "fly", "to", "how", "much", "un", "##know", "##n", "##s", "f", "##ly", "##ing", "a",
            "b", "c", "##a", "##b", "##c", ".", ",", "?", "!", "-", "'", "\"", "(", ")", "[", "]",
            "/", ":", "_", "1", "##2", "12", "e", "é", "##é", "cafe", "café", "x", "##x",
        ];
        let vocab: serde_json::Map<String, serde_json::Value> = words
            .iter()
            .enumerate()
            .map(|(id, word)| (word.to_string(), id.into()))
            .collect();
        let special = |id: usize| {
            serde_json::json!({"id": id, "content": words[id], "single_word": false,
                "lstrip": false, "rstrip": false, "normalized": false, "special": true})
        };
        let json = serde_json::json!({
            "version": "1.0",
            "added_tokens": [special(0), special(1), special(2), special(3)],
            "normalizer": {"type": "BertNormalizer", "clean_text": true,
                "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "model": {"type": "WordPiece", "unk_token": "[UNK]",
                "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                "vocab": vocab},
        });
        Tokenizer::from_bytes(json.to_string()).expect("a valid BERT tokenizer")
    }

    #[test]
    fn ascii_words_are_tokenized_exactly_as_the_tokenizer_does() {
        let tokenizer = bert_tokenizer();
        let Some(Shortcut::Bert(words)) = Shortcut::for_tokenizer(&tokenizer) else {
            panic!("a BERT tokenizer gets the WordPiece shortcut");
        };
        let long = "x".repeat(150);
        let texts = [
            "Find the weather in Paris",
            "how much to fly to Rome?!",
            "unknowns flying un-known",
            "FLYING\tin\n\rRome...",
            "a(b)c \"quoted\" it's /x:_y",
            "12 112 1212 123",
            "   ",
            "",
            "zzz qqq",
            long.as_str(),
            "weather_in_paris-rome",
        ];
        for text in texts {
            let expected = tokenizer
                .encode_fast(text, false)
                .unwrap()
                .get_ids()
                .to_vec();
            assert_eq!(
                words.token_ids(&tokenizer, text),
                Some(expected),
                "{text:?}"
            );
        }
        for text in ["café in Rome", "[CLS] find", "tab\u{0b}stop", "a\u{0}b"] {
            assert_eq!(
                words.token_ids(&tokenizer, text),
                None,
                "{text:?} is for the tokenizer"
            );
        }
    }

    #[test]
    fn a_tokenizer_that_is_not_berts_gets_no_shortcut() {
        let json = serde_json::json!({
            "version": "1.0",
            "added_tokens": [],
            "normalizer": null,
            "pre_tokenizer": {"type": "Whitespace"},
            "model": {"type": "WordLevel", "unk_token": "[UNK]",
                "vocab": {"[UNK]": 0, "find": 1}},
        });
        let tokenizer = Tokenizer::from_bytes(json.to_string()).unwrap();
        assert!(Shortcut::for_tokenizer(&tokenizer).is_none());
    }

    /// Llama's tokenizer in small: the Metaspace normaliser, byte fallback, a few merges.
    fn llama_tokenizer(extra: &[&str]) -> Tokenizer {
        let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>", "\u{2581}"]
            .iter()
            .map(|t| t.to_string())
            .collect();
        tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
        let merges = [
            ("\u{2581}", "f"),
            ("\u{2581}f", "i"),
            ("\u{2581}fi", "n"),
            ("\u{2581}fin", "d"),
            ("\u{2581}", "w"),
            ("e", "a"),
            ("\u{2581}w", "ea"),
            ("t", "h"),
            ("\u{2581}wea", "th"),
            ("e", "r"),
            ("\u{2581}weath", "er"),
            ("\u{2581}", "R"),
            ("o", "m"),
            ("\u{2581}R", "om"),
            ("\u{2581}Rom", "e"),
            ("\u{2581}", "t"),
            ("\u{2581}t", "o"),
        ];
        for c in "abcdefghijklmnopqrstuvwxyzR".chars() {
            tokens.push(c.to_string());
        }
        for (a, b) in merges {
            tokens.push(format!("{a}{b}"));
        }
        tokens.extend(extra.iter().map(|t| t.to_string()));
        let vocab: serde_json::Map<String, serde_json::Value> = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| (token.clone(), id.into()))
            .collect();
        let special = |id: usize| {
            serde_json::json!({"id": id, "content": tokens[id], "single_word": false,
                "lstrip": false, "rstrip": false, "normalized": false, "special": true})
        };
        let merges: Vec<String> = merges.iter().map(|(a, b)| format!("{a} {b}")).collect();
        let json = serde_json::json!({
            "version": "1.0",
            "added_tokens": [special(0), special(1), special(2)],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "\u{2581}"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"}]},
            "pre_tokenizer": null,
            "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true,
                "byte_fallback": true, "vocab": vocab, "merges": merges},
        });
        Tokenizer::from_bytes(json.to_string()).expect("a valid Llama-style tokenizer")
    }

    #[test]
    fn metaspace_words_are_tokenized_exactly_as_the_tokenizer_does() {
        let tokenizer = llama_tokenizer(&[]);
        let Some(Shortcut::Metaspace(words)) = Shortcut::for_tokenizer(&tokenizer) else {
            panic!("a Llama-style tokenizer gets the Metaspace shortcut");
        };
        let texts = [
            "find the weather in Rome",
            "Rome",
            "weathering findings to",
            "café à Rome, 12€!",
            "ROME rome Rome.",
            "",
        ];
        for text in texts {
            let expected = tokenizer
                .encode_fast(text, false)
                .unwrap()
                .get_ids()
                .to_vec();
            assert_eq!(
                words.token_ids(&tokenizer, text),
                Some(expected),
                "{text:?}"
            );
        }
        // Whitespace runs are one space: the words' tokens, without the runs' own.
        let single = words.token_ids(&tokenizer, "find the weather");
        assert_eq!(
            words.token_ids(&tokenizer, "  find\tthe\n\n  weather "),
            single
        );
        for text in ["find <s> Rome", "\u{2581}find"] {
            assert_eq!(
                words.token_ids(&tokenizer, text),
                None,
                "{text:?} is for the tokenizer"
            );
        }
    }

    #[test]
    fn a_vocabulary_whose_tokens_span_words_gets_no_shortcut() {
        let tokenizer = llama_tokenizer(&["\u{2581}\u{2581}", "a\u{2581}b"]);
        assert!(Shortcut::for_tokenizer(&tokenizer).is_none());
        // Runs of the mark alone are only whitespace, which the shortcut collapses.
        let tokenizer = llama_tokenizer(&["\u{2581}\u{2581}"]);
        assert!(Shortcut::for_tokenizer(&tokenizer).is_some());
    }
}
