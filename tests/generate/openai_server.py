"""A small OpenAI-compatible server for the tests only: it serves the tiny local model with transformers.

``transformers serve`` would be the natural real server, but it needs fastapi, uvicorn and the openai
package, which bayespass does not otherwise depend on; so the endpoint tests serve the tiny model
(``bayespass.generate.tiny``) through this standard-library HTTP server instead.  Generation is real
(sampling from the model, stop sequences, token log-probabilities of the sampled tokens); on top of it the
server can misbehave on purpose:

    --no-n            ignore ``n`` (one choice per request, as some servers do)
    --no-logprobs     never return log-probabilities
    --fail 429,500    answer the first requests with these statuses (429s carry ``Retry-After``); ``cut``
                      answers 200 and closes the connection after a few bytes of the body, as a server killed
                      mid-answer does
    --retry-after S   the ``Retry-After`` seconds of those 429s
    --malformed X     answer 200 with a body without ``choices`` when the prompt contains X
    --log FILE        one JSON line per request: time, status, n, seed, prompt head
    --api-key KEY     answer 401 unless the request carries ``Authorization: Bearer KEY``

Run: python tests/generate/openai_server.py MODEL_DIR --port 8123 [--name tiny-llama]
It prints ``READY <port>`` once listening.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--name", default="tiny-llama")
    ap.add_argument("--no-n", action="store_true")
    ap.add_argument("--no-logprobs", action="store_true")
    ap.add_argument("--fail", default="")
    ap.add_argument("--retry-after", type=float, default=0.2)
    ap.add_argument("--malformed", default=None)
    ap.add_argument("--log", default=None)
    ap.add_argument("--api-key", default=None)
    args = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir).eval()
    lock = threading.Lock()
    failures = [x if x == "cut" else int(x) for x in args.fail.split(",") if x]
    counter = {"n": 0}

    def generate(prompt: str, n: int, body: dict):
        ids = tok(prompt, return_tensors="pt")["input_ids"]
        temp = float(body.get("temperature", 1.0))
        stops = body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else stops
        with lock:
            torch.manual_seed(int(body.get("seed", 0)))
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=temp > 0,
                                 temperature=temp if temp > 0 else None, top_p=float(body.get("top_p", 1.0)),
                                 top_k=0, num_return_sequences=n, max_new_tokens=int(body.get("max_tokens", 16)),
                                 output_logits=True, return_dict_in_generate=True, pad_token_id=tok.pad_token_id)
        logp = torch.log_softmax(torch.stack(out.logits, dim=1).float(), dim=-1)
        gen = out.sequences[:, ids.shape[1]:]
        res = []
        for r in range(n):
            toks = gen[r].tolist()
            if tok.eos_token_id in toks:
                toks, finish = toks[: toks.index(tok.eos_token_id)], "stop"
            else:
                finish = "length"
            text = tok.decode(toks, skip_special_tokens=True)
            for s in stops:
                if s and s in text:
                    text, finish = text[: text.index(s)], "stop"
            lps = [float(logp[r, i, t]) for i, t in enumerate(toks)]
            res.append((text, finish, lps))
        return res, int(ids.shape[1]), int(gen.shape[1]) * n

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def _send(self, status: int, payload, headers=None):
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _log(self, **kw):
            if args.log:
                with lock, open(args.log, "a") as fh:
                    fh.write(json.dumps({"t": time.time(), **kw}) + "\n")

        def do_GET(self):
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": args.name, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            chat = self.path.rstrip("/").endswith("/chat/completions")
            if not chat and not self.path.rstrip("/").endswith("/completions"):
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            if args.api_key and self.headers.get("Authorization") != f"Bearer {args.api_key}":
                return self._send(401, {"error": {"message": "invalid API key"}})
            with lock:
                i = counter["n"]
                counter["n"] += 1
            if chat:
                msgs = body.get("messages") or []
                prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            else:
                prompt = body.get("prompt", "")
            n = 1 if args.no_n else int(body.get("n", 1))
            head = prompt[-60:]
            if i < len(failures):
                self._log(status=failures[i], n=n, seed=body.get("seed"), head=head)
                if failures[i] == "cut":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "600")
                    self.end_headers()
                    self.wfile.write(b'{"id": "x", "choi')
                    self.close_connection = True
                    return None
                hdr = {"Retry-After": f"{args.retry_after:g}"} if failures[i] == 429 else {}
                return self._send(failures[i], {"error": {"message": "injected failure"}}, hdr)
            if body.get("model") != args.name:
                return self._send(404, {"error": {"message": f"model {body.get('model')!r} not served"}})
            if args.malformed and args.malformed in prompt:
                self._log(status=200, n=n, seed=body.get("seed"), head=head, malformed=True)
                return self._send(200, {"id": "x", "object": "text_completion", "oops": []})
            res, n_prompt, n_gen = generate(prompt, n, body)
            want_lp = bool(body.get("logprobs")) and not args.no_logprobs
            choices = []
            for j, (text, finish, lps) in enumerate(res):
                if chat:
                    ch = {"index": j, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
                    if want_lp:
                        ch["logprobs"] = {"content": [{"token": "", "logprob": v} for v in lps]}
                else:
                    ch = {"index": j, "text": text, "finish_reason": finish}
                    if want_lp:
                        ch["logprobs"] = {"token_logprobs": lps, "tokens": [""] * len(lps)}
                choices.append(ch)
            self._log(status=200, n=n, seed=body.get("seed"), head=head)
            self._send(200, {"id": f"cmpl-{i}", "object": "chat.completion" if chat else "text_completion",
                             "model": args.name, "choices": choices,
                             "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_gen,
                                       "total_tokens": n_prompt + n_gen}})

    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    print(f"READY {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
