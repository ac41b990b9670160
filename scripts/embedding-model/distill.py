"""Distils all-MiniLM-L6-v2 into a static embedding table in model2vec's format.

Each vocabulary token is run through the teacher alone, between [CLS] and [SEP]; its vector
is the teacher's output at the token's position. The table is centred and reduced to 256
dimensions by PCA, and every row is scaled by a Zipf-style weight (SIF: a / (a + p(token)),
p from the token's rank in the WordPiece vocabulary, whose whole words are roughly in order
of frequency), so that a sentence's vector — the mean of its tokens' rows, normalised — is
dominated by its rare, telling words. Written as `model.safetensors` (tensor `embeddings`,
F16), `tokenizer.json` (the teacher's, padding and truncation removed), `config.json`.

Usage: distill.py TEACHER_MODEL_DIR OUT_DIR
"""
import json
import sys
import numpy as np
from safetensors.numpy import save_file
from bert import Bert

DIMS = 256
SIF = 1e-3
# WordPiece vocabularies start with specials, unused slots and single characters; whole
# words follow, roughly most frequent first.
FIRST_WORD_ID = 1996


def main(teacher, out):
    bert = Bert(teacher)
    vocab = bert.w["embeddings.word_embeddings.weight"].shape[0]
    table = np.zeros((vocab, 384), np.float32)
    for start in range(0, vocab, 2048):
        ids = np.arange(start, min(vocab, start + 2048))
        seq = np.stack([np.full_like(ids, 101), ids, np.full_like(ids, 102)], 1)
        table[start:start + len(ids)] = bert.forward(seq, np.ones(seq.shape, np.float32))[:, 1]
    centred = table - table.mean(0)
    _, _, vt = np.linalg.svd(centred[::3], full_matrices=False)
    reduced = centred @ vt[:DIMS].T
    rank = np.maximum(np.arange(vocab, dtype=np.float64) - FIRST_WORD_ID, 1.0)
    weight = SIF / (SIF + 1.0 / rank)
    reduced *= weight[:, None].astype(np.float32)
    save_file({"embeddings": reduced.astype(np.float16)}, f"{out}/model.safetensors")
    tok = json.load(open(f"{teacher}/tokenizer.json"))
    tok["padding"] = None
    tok["truncation"] = None
    json.dump(tok, open(f"{out}/tokenizer.json", "w"), ensure_ascii=False)
    json.dump({"model_type": "model2vec", "architectures": ["StaticModel"],
               "hidden_dim": DIMS, "normalize": True,
               "teacher": "sentence-transformers/all-MiniLM-L6-v2",
               "distilled": "per-token teacher output, PCA 256, SIF 1e-3 by vocabulary rank"},
              open(f"{out}/config.json", "w"), indent=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
