#!/usr/bin/env python3
"""Checks a kiln zoo model against the same model written in PyTorch.

    /usr/bin/python3 torch_parity.py KILN_BINARY MODEL [--keep DIR]

kiln exports the model (batch 3, with its loss), writes its initial weights and evaluates it on
random inputs with the reference interpreter. The script builds the same architecture from torch.nn
modules, loads kiln's weights by name with load_state_dict(strict=True) -- no renames, no
transposes, so names, shapes and layouts must be PyTorch's -- runs it and compares every output.

Exit codes: 0 every output matches, 1 a mismatch or a kiln failure, 77 PyTorch or numpy missing
(ctest reports the test as skipped).
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skipped: PyTorch and numpy are needed ({e}); on Debian: "
          "apt-get install python3-torch python3-numpy, then run with /usr/bin/python3")
    sys.exit(77)

BATCH = 3
RTOL, ATOL = 1e-4, 1e-5

# --- safetensors (https://huggingface.co/docs/safetensors): u64 header length, JSON header, data ---

_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "BOOL": np.bool_}
_NAMES = {np.dtype(v).str: k for k, v in _DTYPES.items()}


def save_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        data = a.tobytes()
        header[name] = {"dtype": _NAMES[a.dtype.str], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    buf = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        dt = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(buf[b:e], dtype=dt).reshape(info["shape"]).copy()
    return out


# --- the zoo models in PyTorch (frontend/Zoo.cpp, frontend/nn/*.cpp) ---

class TinyMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 1)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class MnistMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 128), nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class SimpleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(1000, 512), nn.Linear(512, 256), nn.Linear(256, 2)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, stride=1, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, stride=1, padding=1)
        self.fc = nn.Linear(64 * 7 * 7, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc(torch.flatten(h, 1))


class LstmClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.lstm = nn.LSTM(32, 64, batch_first=True)
        self.fc = nn.Linear(64, 4)

    def forward(self, tokens):
        _, (h, _) = self.lstm(self.emb(tokens))
        return self.fc(h[-1])  # the last hidden state of the (only) layer


class SelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        B, T, D = x.shape
        hd = D // self.heads
        # [B, T, 3D] -> [B, T, 3, heads, hd] -> [3, B, heads, T, hd]: qkv rows are q, k, v stacked.
        q, k, v = self.qkv(x).reshape(B, T, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = att.masked_fill(causal, float("-inf")).softmax(-1)
        y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, D)
        return self.drop(self.proj(y))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop(self.fc2(F.gelu(self.fc1(x))))  # exact (erf) GELU


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(dim, eps=1e-5), SelfAttention(dim, heads)
        self.ln2, self.mlp = nn.LayerNorm(dim, eps=1e-5), Mlp(dim, 4 * dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGpt(nn.Module):
    VOCAB, CONTEXT, DIM, HEADS, LAYERS = 128, 32, 64, 2, 2

    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(self.VOCAB, self.DIM)
        self.pos_emb = nn.Embedding(self.CONTEXT, self.DIM)
        self.blocks = nn.Sequential(*[Block(self.DIM, self.HEADS) for _ in range(self.LAYERS)])
        self.ln_f = nn.LayerNorm(self.DIM, eps=1e-5)
        self.head = nn.Linear(self.DIM, self.VOCAB, bias=False)

    def forward(self, tokens):
        h = self.tok_emb(tokens) + self.pos_emb(torch.arange(tokens.shape[1]))
        return self.head(self.ln_f(self.blocks(h)))


def make_case(model, rng):
    """(torch module, kiln inputs, function (module, torch inputs) -> {output name: tensor})."""
    def ce(net, inp, xname):
        logits = net(inp[xname])
        return {"logits": logits, "loss": F.cross_entropy(logits, inp["labels"])}

    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    labels = lambda classes, *shape: rng.integers(0, classes, size=shape or (BATCH,), dtype=np.int64)
    if model == "tiny_mlp":
        def run(net, inp):
            pred = net(inp["x"])
            return {"pred": pred, "loss": F.mse_loss(pred, inp["target"])}
        return TinyMlp(), {"x": f32(BATCH, 64), "target": f32(BATCH, 1)}, run
    if model == "mnist_mlp":
        return MnistMlp(), {"x": f32(BATCH, 784), "labels": labels(10)}, lambda n, i: ce(n, i, "x")
    if model == "simplenet":
        return SimpleNet(), {"x": f32(BATCH, 1000), "labels": labels(2)}, lambda n, i: ce(n, i, "x")
    if model == "cnn":
        return Cnn(), {"x": f32(BATCH, 1, 28, 28), "labels": labels(10)}, lambda n, i: ce(n, i, "x")
    if model == "lstm":
        return (LstmClassifier(), {"tokens": labels(64, BATCH, 16), "labels": labels(4)},
                lambda n, i: ce(n, i, "tokens"))
    if model == "transformer":
        def run(net, inp):
            logits = net(inp["tokens"])
            loss = F.cross_entropy(logits.reshape(-1, TinyGpt.VOCAB), inp["targets"].reshape(-1))
            return {"logits": logits, "loss": loss}
        T, V = TinyGpt.CONTEXT, TinyGpt.VOCAB
        return TinyGpt(), {"tokens": labels(V, BATCH, T), "targets": labels(V, BATCH, T)}, run
    raise SystemExit(f"unknown model '{model}'")


def kiln(binary, *args):
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"FAIL: kiln {' '.join(args)} exited with {r.returncode}\n{r.stdout}{r.stderr}")
        sys.exit(1)


def main():
    if len(sys.argv) not in (3, 5) or (len(sys.argv) == 5 and sys.argv[3] != "--keep"):
        raise SystemExit(__doc__)
    binary, model = os.path.abspath(sys.argv[1]), sys.argv[2]
    torch.set_num_threads(1)
    torch.manual_seed(0)  # torch's own initial weights are overwritten; keep the run deterministic
    rng = np.random.default_rng(20240611)
    net, inputs, run = make_case(model, rng)

    with tempfile.TemporaryDirectory(prefix=f"kiln-torch-{model}-") as tmp:
        work = sys.argv[4] if len(sys.argv) == 5 else tmp
        os.makedirs(work, exist_ok=True)
        p = lambda name: os.path.join(work, name)
        save_safetensors(p("in.safetensors"), inputs)
        kiln(binary, "export", model, "--batch", str(BATCH), "-o", p("m.kir"))
        kiln(binary, "init", p("m.kir"), "-o", p("w.safetensors"))
        kiln(binary, "run", p("m.kir"), "--inputs", p("in.safetensors"), "--weights", p("w.safetensors"),
             "--out", p("out.safetensors"))
        weights = load_safetensors(p("w.safetensors"))
        got = load_safetensors(p("out.safetensors"))

    # By name, as stored: a transposed or renamed parameter fails here (shape or key mismatch).
    net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    net.eval()
    with torch.no_grad():
        want = run(net, {k: torch.from_numpy(v) for k, v in inputs.items()})
        # A float64 run of the same weights shows how far each f32 result is from the exact value.
        want64 = run(net.double(), {k: torch.from_numpy(v.astype(np.float64) if v.dtype == np.float32 else v)
                                    for k, v in inputs.items()})

    ok = True
    if set(got) != set(want):
        print(f"FAIL: kiln outputs {sorted(got)}, PyTorch outputs {sorted(want)}")
        ok = False
    print(f"{model}: {len(weights)} parameters loaded by name (strict), batch {BATCH}, "
          f"tolerance rtol {RTOL:g} atol {ATOL:g}")
    for name in sorted(set(got) & set(want)):
        a, b, exact = got[name], want[name].numpy(), want64[name].numpy()
        if a.shape != b.shape or a.dtype != b.dtype:
            print(f"  {name}: FAIL kiln {a.dtype}{list(a.shape)} vs torch {b.dtype}{list(b.shape)}")
            ok = False
            continue
        err = np.abs(a.astype(np.float64) - b.astype(np.float64))
        good = bool(np.all(err <= ATOL + RTOL * np.abs(b.astype(np.float64))))
        ok &= good
        print(f"  {name:7s} {str(list(a.shape)):12s} max|kiln-torch| {err.max():.3e}   "
              f"vs f64: kiln {np.abs(a - exact).max():.3e}, torch {np.abs(b - exact).max():.3e}   "
              f"{'ok' if good else 'MISMATCH'}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
