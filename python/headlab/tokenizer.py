"""headlab's tokenizers in Python (include/headlab/data/tokenizer.h), rebuilt from what a
checkpoint stores: the attribute `tokenizer` (the kind) and the dataset `tokenizer/model`.

    tok = tokenizer_of(ckpt)              # or load_tokenizer("sentencepiece", model_bytes)
    ids = tok.encode("In the beginning")  # no <s> or </s>
    tok.decode(ids), tok.bos, tok.eos, tok.pad, tok.vocab_size

    bytes          id = byte (0..255); serialized "bytes+specials" adds 256 = <pad>, 257 = <s>,
                   258 = </s> (what translation needs), "bytes" has no specials
    sentencepiece  the stored model proto, loaded by python3-sentencepiece; ids 0 = <pad>,
                   1 = <unk>, 2 = <s>, 3 = </s>; lines are encoded one by one and joined by the
                   "\\n" piece, as headlab does (src/data/sentencepiece_tokenizer.cpp)
"""
from __future__ import annotations

_BYTES_PLAIN, _BYTES_SPECIALS = b"bytes", b"bytes+specials"


class ByteTokenizer:
    kind = "bytes"

    def __init__(self, specials: bool):
        self.specials = specials
        self.vocab_size = 259 if specials else 256
        self.pad, self.bos, self.eos = (256, 257, 258) if specials else (-1, -1, -1)
        self.unk = -1

    def encode(self, text: str | bytes) -> list:
        return list(text.encode("utf-8") if isinstance(text, str) else text)

    def decode_bytes(self, ids) -> bytes:
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"tokenizer bytes: id {i} is outside [0, {self.vocab_size})")
        return bytes(i for i in ids if i < 256)

    def decode(self, ids) -> str:
        """The text of ids, specials dropped (bytes that are not UTF-8 become U+FFFD: repair_utf8)."""
        return repair_utf8(self.decode_bytes(ids))

    def serialized(self) -> bytes:
        return _BYTES_SPECIALS if self.specials else _BYTES_PLAIN


class SentencePieceTokenizer:
    kind = "sentencepiece"

    def __init__(self, model: bytes):
        import sentencepiece
        self.model = bytes(model)
        self.sp = sentencepiece.SentencePieceProcessor(model_proto=self.model)
        self.vocab_size = self.sp.get_piece_size()
        self.pad, self.unk, self.bos, self.eos = (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(),
                                                  self.sp.eos_id())
        self.newline = self.sp.piece_to_id("\n")

    def encode(self, text: str) -> list:
        ids = []
        lines = text.split("\n")
        for k, line in enumerate(lines):
            if line:
                ids += self.sp.encode(line)
            if k + 1 < len(lines):
                ids.append(self.newline)
        return ids

    def decode(self, ids) -> str:
        """The text of ids, specials dropped, "\\n" pieces as newlines."""
        specials = {self.pad, self.bos, self.eos}
        out, run = [], []
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"tokenizer sentencepiece: id {i} is outside [0, {self.vocab_size})")
            if i in specials:
                continue
            if i == self.newline:
                out.append(self.sp.decode(run))
                run = []
            else:
                run.append(i)
        out.append(self.sp.decode(run))
        return "\n".join(out)

    def serialized(self) -> bytes:
        return self.model


def repair_utf8(data: bytes) -> str:
    """headlab's repair_utf8 (src/data/text.cpp): each invalid UTF-8 sequence's first byte becomes
    U+FFFD and decoding resumes at the next byte (so a cut 3-byte character gives two U+FFFD,
    where Python's errors="replace" gives one)."""
    out = []
    while True:
        try:
            out.append(data.decode("utf-8"))
            return "".join(out)
        except UnicodeDecodeError as e:
            out.append(data[:e.start].decode("utf-8") + "\ufffd")
            data = data[e.start + 1:]


def load_tokenizer(kind: str, serialized: bytes | None):
    """The tokenizer of a (kind, model bytes) pair; None bytes with kind bytes: the plain bytes."""
    if kind == "bytes":
        if serialized in (None, _BYTES_PLAIN):
            return ByteTokenizer(False)
        if serialized == _BYTES_SPECIALS:
            return ByteTokenizer(True)
        raise ValueError(f"the byte tokenizer's model is {serialized[:40]!r}, expected 'bytes' or 'bytes+specials'")
    if kind == "sentencepiece":
        if not serialized:
            raise ValueError("a sentencepiece tokenizer needs its model (the checkpoint's tokenizer/model)")
        return SentencePieceTokenizer(serialized)
    raise ValueError(f"unknown tokenizer kind {kind!r} (bytes|sentencepiece)")


def tokenizer_of(ckpt):
    """The tokenizer a checkpoint stores (checkpoints from before stored tokenizers read as bytes)."""
    return load_tokenizer(ckpt.attrs.get("tokenizer", "bytes"), ckpt.tokenizer)
