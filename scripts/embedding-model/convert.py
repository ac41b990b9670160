"""Rewrites WordLlama's token table from its wheel into model2vec's layout, standard library
only: `model.safetensors` holding the one matrix as `embeddings` (the safetensors header is
JSON after an 8-byte length, so renaming a tensor is rewriting the header), the tokenizer as
`tokenizer.json`, the package's licence as `LICENSE`, and a `config.json` saying what it is.

Usage: convert.py WHEEL OUT_DIR
"""
import json
import struct
import sys
import zipfile

WEIGHTS = "wordllama/weights/l2_supercat_256.safetensors"
TOKENIZER = "wordllama/tokenizers/l2_supercat_tokenizer_config.json"
LICENSE = "wordllama-0.4.0.post1.dist-info/licenses/LICENSE"


def main(wheel, out):
    with zipfile.ZipFile(wheel) as z:
        weights = z.read(WEIGHTS)
        tokenizer = json.loads(z.read(TOKENIZER))
        licence = z.read(LICENSE)
    (length,) = struct.unpack("<Q", weights[:8])
    header = json.loads(weights[8:8 + length])
    header["embeddings"] = header.pop("embedding.weight")
    rows, dims = header["embeddings"]["shape"]
    new_header = json.dumps(header, separators=(",", ":")).encode()
    new_header += b" " * (-len(new_header) % 8)
    with open(f"{out}/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(new_header)) + new_header + weights[8 + length:])
    # Padding and truncation are the reader's business (Steward sets neither).
    tokenizer["padding"] = None
    tokenizer["truncation"] = None
    with open(f"{out}/tokenizer.json", "w") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    with open(f"{out}/LICENSE", "wb") as f:
        f.write(licence)
    with open(f"{out}/config.json", "w") as f:
        json.dump({"model_type": "model2vec", "architectures": ["StaticModel"],
                   "hidden_dim": dims, "vocabulary": rows, "normalize": True,
                   "source": "wordllama 0.4.0.post1 (PyPI), l2_supercat, 256 dimensions",
                   "tokenizer": "Llama 2 (BPE), no special tokens added"},
                  f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
