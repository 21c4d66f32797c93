"""Build the tiny random-initialised test model: python models/build_tiny.py [OUT] [--chat]."""

import argparse
from pathlib import Path

from bayespass.generate.tiny import build_tiny_model

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Build the tiny random-initialised Llama the tests use (~1 MB, "
                                             "gibberish): weights, tokenizer and config in OUT.")
    ap.add_argument("out", nargs="?", type=Path, default=Path(__file__).parent / "tiny-llama",
                    help="directory to write (default: models/tiny-llama)")
    ap.add_argument("--chat", action="store_true", help="give the tokenizer a chat template")
    args = ap.parse_args()
    print(build_tiny_model(args.out, chat=args.chat))
