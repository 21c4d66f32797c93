"""Settings of a run (:class:`RunConfig`), its state file ``run.json``, and small helpers of the stages."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .._run import read_run_json
from ..data.io import atomic_netcdf, write_atomic

__all__ = ["RunConfig", "State", "GEN", "atomic_netcdf", "say", "INTERRUPTED", "make_coder", "write_truth"]


@dataclass
class RunConfig:
    """Settings of one ``bayespass run`` (recorded in ``run.json``)."""

    suite: str = "humaneval"
    dataset: str | None = None
    coder: str = "synthetic"  # "synthetic", a transformers model id/path, a served model's name, or "samples"
    samples: str | list | None = None  # coder "samples": a file or directory, or a list (each its own config)
    endpoint: str | None = None  # OpenAI-compatible API root serving the model named by ``coder``
    api: str = "auto"  # endpoint: "completions", "chat" or "auto" (from models/*.json)
    concurrency: int = 8  # endpoint: requests in flight
    api_key_env: str = "OPENAI_API_KEY"  # endpoint: environment variable holding the key (never stored)
    max_retries: int = 8  # endpoint: retries per request
    timeout: float = 120.0  # endpoint: seconds per request
    wait_for_server: float = 0.0  # endpoint: seconds to wait for a server still loading (0: say at once)
    device: str = "auto"  # transformers model: auto, cpu, cuda, cuda:N or mps
    dtype: str = "auto"  # transformers model: auto, float32, bfloat16 or float16
    k: int = 10
    temperatures: tuple = (0.4, 0.8, 1.2)
    top_p: float = 0.95
    max_new_tokens: int = 512
    models: tuple = ("bb", "zoibb", "flex", "lnorm")  # fitted by EB and compared (LOO); stacked when main is "auto"
    main_model: str | None = None  # the main fit; None: rcParams["stats.model"] (the calibration winner)
    methods: tuple = ("eb", "mcmc")
    mcmc_methods_models: tuple = ("main",)  # "main": the main model
    draws: int | None = None  # MCMC settings; None: the sampler's defaults (bayespass.fit)
    tune: int | None = None
    chains: int | None = None
    fuzz_n: int = 100
    alpha: float = 0.1
    tie_break: str = "none"  # gating: "random" breaks ties between tasks' scores (bp.gate's tie_break)
    n_splits: int = 100
    tasks: int | None = None  # first N tasks only
    max_mutants: int = 20  # synthetic coder: AST mutants tried per task
    seed: int = 42
    workers: int | None = None
    passk_k: tuple = (1, 5, 10, 50, 100)
    ci_prob: float | None = None  # probability of the bands in tables, figures and report; None: rcParams
    until_width: float | None = None  # generate in rounds until the band of pass@width_k is this wide
    max_samples: int | None = None  # with until_width: samples in all (default 10x the first round)
    width_k: int = 10  # with until_width: the k whose band is narrowed
    round_size: int | None = None  # with until_width: samples per round (default one per config and task)
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        from ..validate import check_decoding, check_positive_int, check_prob

        for name in ("k", "n_splits", "max_mutants", "concurrency"):
            check_positive_int(getattr(self, name), name=name)
        for name in ("tasks", "draws", "tune", "chains"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name=name)
        if self.workers is not None:
            from ..execution.harness import check_workers

            check_workers(self.workers)  # positive, at most one sandbox uid each: said before the samples are drawn
        if isinstance(self.fuzz_n, bool) or not isinstance(self.fuzz_n, int) or self.fuzz_n < 0:
            raise ValueError(f"fuzz_n must be a non-negative integer (0: skip incoherence); got {self.fuzz_n!r}")
        check_prob(self.alpha, name="alpha")
        if self.ci_prob is not None:
            check_prob(self.ci_prob, name="ci_prob")
        if self.tie_break not in ("none", "random"):
            raise ValueError(f"tie_break must be 'none' or 'random'; got {self.tie_break!r}")
        if self.endpoint is not None:
            from ..validate import check_choice

            if not isinstance(self.endpoint, str) or not self.endpoint.startswith(("http://", "https://")):
                raise ValueError(f"endpoint must be an http:// or https:// URL such as http://127.0.0.1:8000/v1; "
                                 f"got {self.endpoint!r}")
            if self.coder in ("synthetic", "samples"):
                raise ValueError(f"endpoint {self.endpoint!r} needs the served model's name as coder (--model); "
                                 f"got coder={self.coder!r}")
            check_choice(self.api, ("auto", "completions", "chat"), name="api")
            if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
                raise ValueError(f"max_retries must be a non-negative integer; got {self.max_retries!r}")
            if self.api_key_env != "OPENAI_API_KEY" and not os.environ.get(self.api_key_env):
                raise ValueError(f"api_key_env={self.api_key_env!r}: that environment variable is not set")
            if not isinstance(self.timeout, int | float) or not self.timeout > 0:
                raise ValueError(f"timeout must be a positive number of seconds; got {self.timeout!r}")
            from ..validate import check_wait

            check_wait(self.wait_for_server)
        self._check_torch_options()
        self._check_samples()
        check_decoding(top_p=self.top_p, max_new_tokens=self.max_new_tokens, temperature=tuple(self.temperatures),
                       greedy_ok=self.endpoint is not None or self.coder == "samples", coder=self.coder)
        for k in self.passk_k:
            check_positive_int(int(k), name="passk_k")
        self._check_rounds()

    def _check_samples(self) -> None:
        from ..execution.samples_io import sample_paths

        if self.coder != "samples":
            if self.samples is not None:
                raise ValueError(f"samples={self.samples!r} are read only with coder='samples' (--samples alone); "
                                 f"got coder={self.coder!r}")
            return
        paths = sample_paths(self.samples)
        if paths is None:
            raise ValueError("coder='samples' needs samples: a samples .jsonl file or directory, or a list of "
                             f"them; got {self.samples!r}")
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"samples {missing[0]!r} do not exist")

    def _check_torch_options(self) -> None:
        from ..generate.hf import check_local_options

        check_local_options(self.device, self.dtype, local=self.endpoint is None and self.coder not in
                            ("synthetic", "samples"),
                            coder=f"the endpoint {self.endpoint!r}" if self.endpoint else repr(self.coder))

    def _check_rounds(self) -> None:
        from ..validate import check_positive_int

        check_positive_int(self.width_k, name="width_k")
        for name in ("max_samples", "round_size"):
            if getattr(self, name) is not None:
                check_positive_int(getattr(self, name), name=name)
                if self.until_width is None:
                    raise ValueError(f"{name}={getattr(self, name)!r} applies only when generating in rounds: give "
                                     f"until_width (--until-width), the band width to reach")
        if self.until_width is not None and (isinstance(self.until_width, bool)
                                             or not isinstance(self.until_width, int | float)
                                             or not 0 < self.until_width < 1):
            raise ValueError(f"until_width must be a band width in (0, 1), e.g. 0.05; got {self.until_width!r}")

    @classmethod
    def quick(cls, **kw) -> RunConfig:
        """Small settings for a run in under two minutes, cold (30 tasks, K = 5, two temperatures)."""
        base = dict(k=5, temperatures=(0.6, 1.2), tasks=30, max_mutants=10, fuzz_n=30, n_splits=50)
        base.update(kw)
        return cls(**base)

    def key(self, *fields_) -> str:
        """Hash of the settings a stage depends on."""
        d = asdict(self)
        values = [d[f] for f in fields_]
        if "until_width" in fields_ and self.until_width is not None and self.ci_prob is not None:
            values.append({"ci_prob": self.ci_prob})  # the rounds stop on the band at this probability
        return hashlib.sha256(json.dumps(values, default=str).encode()).hexdigest()[:16]


#: settings of the samples (with ``until_width``, also ``ci_prob``: the band the rounds narrow; see ``RunConfig.key``)
GEN = ("suite", "dataset", "coder", "samples", "k", "temperatures", "top_p", "max_new_tokens", "tasks", "seed",
       "max_mutants", "api", "until_width", "max_samples", "width_k", "round_size")


INTERRUPTED = threading.Event()


def _on_sigint(signum, frame):
    INTERRUPTED.set()
    raise KeyboardInterrupt


def _interrupt_unraisable(previous):
    """Make a ``sys.unraisablehook`` that drops the Ctrl-C raised where Python cannot raise it.

    The handler's ``KeyboardInterrupt`` may land in a weakref or ``__del__`` callback, where Python prints
    "Exception ignored in ..." and a traceback, then goes on; ``INTERRUPTED`` is set all the same, so the stage
    in progress is not recorded and the run stops when it ends (``State.mark``). Other errors go to ``previous``.
    """
    def hook(unraisable) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            return
        previous(unraisable)

    return hook


class State:
    """``run.json``: settings and a key per completed stage."""

    def __init__(self, out: Path, cfg: RunConfig):
        self.out, self.cfg = out, cfg
        self.path = out / "run.json"
        self.note = ""  # what the driver says before the first stage
        try:
            self.data = read_run_json(out)
        except ValueError as err:  # a damaged record: every stage again (generation and execution resume)
            self.data = {}
            self.note = (f"{self.path} is damaged ({err.__cause__ or err}); every stage is done again (the samples "
                         "and verdicts in the directory are reused)")
        self.data["config"] = asdict(cfg)
        self.data.setdefault("stages", {})

    def done(self, stage: str, key: str, *paths) -> bool:
        """Tell whether ``stage`` completed with this ``key`` and its output files exist."""
        return self.data["stages"].get(stage) == key and all((self.out / p).exists() for p in paths)

    def mark(self, stage: str, key: str) -> None:
        """Record ``stage`` as completed with ``key`` (atomically)."""
        if INTERRUPTED.is_set():  # a library swallowed Ctrl-C (PyMC keeps a truncated trace)
            raise KeyboardInterrupt(f"interrupted: stage {stage!r} is not recorded and will be redone")
        self.data["stages"][stage] = key
        self.data.setdefault("timings", {})
        text = json.dumps(self.data, indent=2, default=str)
        write_atomic(self.path, lambda tmp: tmp.write_text(text))


def say(echo, msg: str) -> None:
    """Send a progress message to ``echo`` (if any)."""
    if echo is not None:
        echo(msg)


def make_coder(cfg: RunConfig, suite, tasks, echo):
    """Return the coder of a run: synthetic, a served endpoint or a transformers model."""
    from ..generate.coders import make_coder as build

    return build(cfg.coder, suite, tasks=tasks, endpoint=cfg.endpoint, device=cfg.device, dtype=cfg.dtype,
                 max_new_tokens=cfg.max_new_tokens, top_p=cfg.top_p, api=cfg.api, concurrency=cfg.concurrency,
                 api_key_env=cfg.api_key_env, max_retries=cfg.max_retries, timeout=cfg.timeout,
                 wait_for_server=cfg.wait_for_server,
                 max_mutants=cfg.max_mutants, workers=cfg.workers, progress=echo is not None)


def write_truth(coder, cfg: RunConfig, out: Path) -> None:
    """Write the synthetic coder's true p per task and temperature to ``truth.nc``."""
    import xarray as xr

    truth = xr.concat([coder.truth(T)["p_true"] for T in cfg.temperatures], dim="temperature")
    truth = truth.assign_coords(temperature=list(cfg.temperatures))
    atomic_netcdf(truth.to_dataset(), out / "truth.nc")
