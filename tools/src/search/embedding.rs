//! The semantic channel's model: a static embedding table in model2vec's format — a
//! directory with `tokenizer.json` (a Hugging Face tokenizer) and `model.safetensors`
//! (one matrix `embeddings`, a row per token id, F32 or F16). A text's vector is the mean of
//! its tokens' rows, normalised: no network, no inference runtime, microseconds per query.
//!
//! The rows are held as 8-bit integers with one scale per row (a quarter of F32's memory:
//! 7.9 MB for a 30,522 × 256 table); the loss is far below what ranking can notice.
//! How to get a model: `scripts/embedding-model/build.sh DIR` distils one from
//! all-MiniLM-L6-v2 (see that folder's README).

use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};
use tokenizers::models::ModelWrapper;
use tokenizers::normalizers::NormalizerWrapper;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{Model, Tokenizer};

use super::Embedder;
use super::text::MAX_QUERY_CHARS;

/// Most tokens of one text that count: a tool's description or a request is far shorter;
/// a pasted blob stops here.
const MAX_TOKENS: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum EmbeddingError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a tokenizer.json a Hugging Face tokenizer can load: {reason}")]
    Tokenizer { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    Table { path: PathBuf, reason: String },
}

/// A loaded static embedding model.
pub struct EmbeddingModel {
    tokenizer: Tokenizer,
    /// Set when the tokenizer is BERT's (lowercasing normaliser, whitespace-and-punctuation
    /// pre-tokenizer, WordPiece): then ASCII text is split here and each word looked up in
    /// the vocabulary, exactly as the tokenizer would, at a fraction of its cost.
    ascii_words: Option<AsciiWords>,
    dims: usize,
    /// Row-major, `dims` values per token id.
    rows: Vec<i8>,
    /// Each row's scale: value = `rows[i] as f32 * scales[row]`.
    scales: Vec<f32>,
}

impl std::fmt::Debug for EmbeddingModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingModel")
            .field("tokens", &self.scales.len())
            .field("dims", &self.dims)
            .finish_non_exhaustive()
    }
}

impl EmbeddingModel {
    /// Loads the model in `dir`. Every way a model can be broken is an error naming the
    /// file: a missing file, a tokenizer that does not parse, no `embeddings` matrix, a
    /// matrix that is not two-dimensional or of another type, fewer rows than the
    /// tokenizer has ids.
    pub fn load(dir: &Path) -> Result<Self, EmbeddingError> {
        let tokenizer_path = dir.join("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| EmbeddingError::Tokenizer {
                path: tokenizer_path.clone(),
                reason: e.to_string(),
            })?;
        // Padding would add rows of [PAD] to every text; truncation is ours (MAX_TOKENS).
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| EmbeddingError::Tokenizer {
                path: tokenizer_path.clone(),
                reason: e.to_string(),
            })?;
        let table_path = dir.join("model.safetensors");
        let bytes = std::fs::read(&table_path).map_err(|source| EmbeddingError::Read {
            path: table_path.clone(),
            source,
        })?;
        let table = |reason: String| EmbeddingError::Table {
            path: table_path.clone(),
            reason,
        };
        let tensors = SafeTensors::deserialize(&bytes).map_err(|e| table(e.to_string()))?;
        let matrix = tensors
            .tensor("embeddings")
            .map_err(|e| table(format!("no `embeddings` matrix ({e})")))?;
        let [tokens, dims] = matrix.shape() else {
            return Err(table(format!(
                "`embeddings` has shape {:?}; a matrix (tokens × dimensions) is needed",
                matrix.shape()
            )));
        };
        let (tokens, dims) = (*tokens, *dims);
        if dims == 0 || tokens == 0 {
            return Err(table("`embeddings` is empty".into()));
        }
        let ids = tokenizer.get_vocab_size(true);
        if tokens < ids {
            return Err(table(format!(
                "`embeddings` has {tokens} rows but the tokenizer has {ids} token ids"
            )));
        }
        let value: fn(&[u8]) -> f32 = match matrix.dtype() {
            Dtype::F32 => |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            Dtype::F16 => |b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])),
            other => {
                return Err(table(format!(
                    "`embeddings` is {other:?}; F32 or F16 is needed"
                )));
            }
        };
        // Row by row: the table never exists as F32 (31 MB at 30,522 × 256) in memory.
        let width = matrix.dtype().bitsize() / 8;
        let mut rows = Vec::with_capacity(tokens * dims);
        let mut scales = Vec::with_capacity(tokens);
        let mut row = vec![0f32; dims];
        for bytes in matrix.data().chunks_exact(dims * width) {
            for (v, b) in row.iter_mut().zip(bytes.chunks_exact(width)) {
                *v = value(b);
            }
            let (quantised, scale) = super::semantic::quantise(&row, dims);
            rows.extend(quantised);
            scales.extend(scale);
        }
        Ok(Self {
            ascii_words: AsciiWords::for_tokenizer(&tokenizer),
            tokenizer,
            dims,
            rows,
            scales,
        })
    }

    /// Token rows held: what the model adds to the daemon's memory, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.rows.len() + self.scales.len() * 4
    }
}

impl Embedder for EmbeddingModel {
    fn dims(&self) -> usize {
        self.dims
    }

    fn embed(&self, text: &str) -> Vec<f32> {
        let mut sum = vec![0f32; self.dims];
        for id in self.token_ids(super::text::head(text, MAX_QUERY_CHARS)) {
            let id = id as usize;
            let (Some(scale), Some(row)) = (
                self.scales.get(id),
                self.rows.get(id * self.dims..(id + 1) * self.dims),
            ) else {
                continue;
            };
            for (s, &v) in sum.iter_mut().zip(row) {
                *s += f32::from(v) * scale;
            }
        }
        super::normalise(&mut sum);
        sum
    }
}

impl EmbeddingModel {
    /// The ids of `text`'s first [`MAX_TOKENS`] tokens, without special tokens.
    fn token_ids(&self, text: &str) -> Vec<u32> {
        if let Some(ids) = self
            .ascii_words
            .as_ref()
            .and_then(|words| words.token_ids(&self.tokenizer, text))
        {
            return ids;
        }
        match self.tokenizer.encode_fast(text, false) {
            Ok(encoding) => encoding
                .get_ids()
                .iter()
                .take(MAX_TOKENS)
                .copied()
                .collect(),
            Err(_) => Vec::new(),
        }
    }
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
struct AsciiWords {
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
        let mut added_starts: Vec<char> = tokenizer
            .get_added_tokens_decoder()
            .values()
            .filter_map(|token| token.content.chars().next())
            .collect();
        added_starts.sort_unstable();
        added_starts.dedup();
        Some(Self {
            added_starts,
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

/// IEEE 754 half precision to single (the safetensors F16 layout).
fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x3ff);
    let single = match (exponent, mantissa) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: renormalise.
            let shift = m.leading_zeros() - 21;
            let m = (m << shift) & 0x3ff;
            sign | ((127 - 15 + 1 - shift) << 23) | (m << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(single)
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
        let words = AsciiWords::for_tokenizer(&tokenizer).expect("a BERT tokenizer");
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
        assert!(AsciiWords::for_tokenizer(&tokenizer).is_none());
    }

    #[test]
    fn half_precision_converts_exactly() {
        let table = [
            (0x0000, 0.0),
            (0x3c00, 1.0),
            (0xc000, -2.0),
            (0x3555, 0.333_251_95),
            (0x7bff, 65504.0),
            (0x0001, 5.960_464_5e-8),
            (0x0400, 6.103_515_6e-5),
        ];
        for (bits, value) in table {
            assert_eq!(f16_to_f32(bits), value, "{bits:#06x}");
        }
        assert!(f16_to_f32(0x7c00).is_infinite());
    }
}
