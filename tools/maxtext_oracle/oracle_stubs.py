"""Empty stand-in modules for libraries MaxText's model modules import but the oracle never uses.

maxtext.models.deepseek imports the engram layer, whose module imports tokenizer libraries
(tiktoken, sentencepiece) and sympy at load time. The oracle venv lacks them and nothing here
tokenizes or hashes: empty stand-in modules let the model modules load. Call it only after
transformers has probed for the real ones (it checks their import specs), i.e. after importing
maxtext.layers.moe.
"""
import importlib.util
import sys
import types


def stub_missing_modules(names=("tiktoken", "tiktoken.load", "sentencepiece", "sympy")):
  for name in names:
    top = name.split(".")[0]
    if name not in sys.modules and (top in sys.modules or importlib.util.find_spec(top) is None):
      stub = types.ModuleType(name)
      stub.__path__ = []
      stub.__getattr__ = lambda attr: None
      sys.modules[name] = stub
