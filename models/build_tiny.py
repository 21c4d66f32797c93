"""Build the tiny random-initialised test model: python models/build_tiny.py [OUT] [--chat]."""

import sys
from pathlib import Path

from bayespass.generate.tiny import build_tiny_model

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = Path(args[0]) if args else Path(__file__).parent / "tiny-llama"
    print(build_tiny_model(out, chat="--chat" in sys.argv))
