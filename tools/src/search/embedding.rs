//! The semantic channel's model: a static embedding table in model2vec's format — a
//! directory with `tokenizer.json` (a Hugging Face tokenizer) and `model.safetensors`
//! (one matrix `embeddings`, a row per token id, F32 or F16). A text's vector is the mean of
//! its tokens' rows, normalised: no network, no inference runtime, microseconds per query.
//!
//! The rows are held as 8-bit integers with one scale per row (a quarter of F32's memory:
//! 8.3 MB for a 32,000 × 256 table); the loss is far below what ranking can notice.
//! How to get a model: `scripts/embedding-model/build.sh DIR` writes WordLlama's table
//! (from its PyPI package) in this layout (see that folder's README). Any model2vec model
//! loads; BERT's WordPiece and Llama's SentencePiece BPE tokenizers are split without the
//! tokenizer's general path ([`super::shortcut`]).

use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};
use tokenizers::Tokenizer;

use super::Embedder;
use super::shortcut::{MAX_TOKENS, Shortcut};
use super::text::MAX_QUERY_CHARS;

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
    /// Set when the tokenizer is of a family whose splitting into words is done here, at a
    /// fraction of the tokenizer's cost (see [`Shortcut`]).
    shortcut: Option<Shortcut>,
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
            shortcut: Shortcut::for_tokenizer(&tokenizer),
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

    fn token_sum(&self, text: &str) -> Vec<f32> {
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
        sum
    }
}

impl EmbeddingModel {
    /// The ids of `text`'s first [`MAX_TOKENS`] tokens, without special tokens.
    fn token_ids(&self, text: &str) -> Vec<u32> {
        if let Some(ids) = self
            .shortcut
            .as_ref()
            .and_then(|shortcut| shortcut.token_ids(&self.tokenizer, text))
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
