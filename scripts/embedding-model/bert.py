"""A BERT encoder in numpy, enough to run all-MiniLM-L6-v2 (the teacher) without torch."""
import json
import numpy as np
from safetensors.numpy import load_file
from scipy.special import erf
from tokenizers import Tokenizer


class Bert:
    def __init__(self, model_dir):
        self.w = load_file(f"{model_dir}/model.safetensors")
        cfg = json.load(open(f"{model_dir}/config.json"))
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.eps = cfg["layer_norm_eps"]
        self.tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
        self.tok.no_padding()
        self.tok.enable_truncation(256)

    def ln(self, x, p):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + self.eps) * self.w[p + ".weight"] + self.w[p + ".bias"]

    def lin(self, x, p):
        return x @ self.w[p + ".weight"].T + self.w[p + ".bias"]

    def forward(self, ids, mask):
        """ids, mask: [B, T] int arrays. Returns [B, T, H] hidden states."""
        w = self.w
        B, T = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:T][None]
             + w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = self.ln(x, "embeddings.LayerNorm").astype(np.float32)
        H = x.shape[-1]
        d = H // self.heads
        bias = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q = self.lin(x, p + ".attention.self.query").reshape(B, T, self.heads, d).transpose(0, 2, 1, 3)
            k = self.lin(x, p + ".attention.self.key").reshape(B, T, self.heads, d).transpose(0, 2, 3, 1)
            v = self.lin(x, p + ".attention.self.value").reshape(B, T, self.heads, d).transpose(0, 2, 1, 3)
            a = q @ k / np.float32(np.sqrt(d)) + bias
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, H)
            x = self.ln(x + self.lin(c, p + ".attention.output.dense"), p + ".attention.output.LayerNorm")
            h = self.lin(x, p + ".intermediate.dense")
            h = (0.5 * h * (1.0 + erf(h / np.float32(np.sqrt(2.0))))).astype(np.float32)
            x = self.ln(x + self.lin(h, p + ".output.dense"), p + ".output.LayerNorm").astype(np.float32)
        return x

    def embed(self, texts, batch=64, max_len=256):
        """Sentence embeddings: mean pooling over the tokens, L2-normalised."""
        out = []
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        encs = self.tok.encode_batch([texts[i] for i in order])
        res = [None] * len(texts)
        for s in range(0, len(encs), batch):
            chunk = encs[s:s + batch]
            L = min(max_len, max(len(e.ids) for e in chunk))
            ids = np.zeros((len(chunk), L), np.int64)
            mask = np.zeros((len(chunk), L), np.float32)
            for j, e in enumerate(chunk):
                n = min(L, len(e.ids))
                ids[j, :n] = e.ids[:n]
                mask[j, :n] = 1
            h = self.forward(ids, mask)
            m = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            m /= np.linalg.norm(m, axis=1, keepdims=True) + 1e-12
            for j in range(len(chunk)):
                res[order[s + j]] = m[j]
        return np.stack(res)
