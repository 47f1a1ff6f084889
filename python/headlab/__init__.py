"""headlab checkpoints from Python: read and write them with numpy + h5py, and run the model in
PyTorch exactly as the headlab binary does (docs/checkpoint-format.md).

    import headlab
    ckpt = headlab.load_checkpoint("runs/default/checkpoints/best.h5")   # numpy only
    model = headlab.load_model("runs/default/checkpoints/best.h5")       # torch.nn.Module
    b = headlab.batch(ckpt.config, "train", 7)    # batch 7 of training, as the binary builds it

An encoder_decoder checkpoint loads as an EncoderDecoder (seq2seq.py; its translate() decodes
greedily with the checkpoint's tokenizer, tokenizer.py); its data (data.task = "translate",
translation.py) needs the checkpoint's tokenizer: headlab.eval_batches(ckpt, "val").

torch is imported only when a torch-based name (Model, EncoderDecoder, load_model,
export_state_dict, head_scores, split_loss) is first used.
"""
from .checkpoint import (Checkpoint, attention_sites, load_checkpoint, model_spec, parameter_shapes,
                         save_checkpoint, to_toml)
from .data import batch, eval_batches, make_dataset, text_windows
from .tasks import Batch, grammar_lexicon, make_task
from .tokenizer import load_tokenizer, tokenizer_of

__all__ = ["Checkpoint", "load_checkpoint", "save_checkpoint", "model_spec", "parameter_shapes", "attention_sites",
           "to_toml", "Batch", "batch", "make_dataset", "make_task", "grammar_lexicon", "eval_batches", "text_windows",
           "load_tokenizer", "tokenizer_of", "Model", "ModelOutput", "EncoderDecoder", "Seq2SeqOutput", "load_model",
           "export_state_dict", "head_scores", "split_loss"]

_TORCH_NAMES = {"Model": "model", "ModelOutput": "model", "load_model": "model", "export_state_dict": "model",
                "EncoderDecoder": "seq2seq", "Seq2SeqOutput": "seq2seq",
                "head_scores": "analysis", "split_loss": "analysis"}


def __getattr__(name):
    if name in _TORCH_NAMES:
        import importlib
        module = importlib.import_module(f".{_TORCH_NAMES[name]}", __name__)
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'headlab' has no attribute {name!r}")
