"""Train a bucketed 2-layer LSTM language model on the Python standard library's docstrings.

    python jobs/train_lstm_bucketing.py                  # 2 Ray workers on a local loopback cluster
    python jobs/train_lstm_bucketing.py --workers 0      # in this process
    python jobs/train_lstm_bucketing.py --workers 2:4 --address auto   # inside `ray submit`

The corpus is real English that every Python installation carries, so the job runs offline:
the docstrings of a fixed list of standard-library modules and of their public classes,
functions and methods, collected with ``inspect`` in a fixed order. Paragraphs are split into
sentences at full stops (and at blank lines), words are lowercased, and a sentence longer
than the largest bucket is cut into pieces. A seeded 90/10 split of the sentences gives the
training and validation sets; the vocabulary is the ``--vocab-size`` most frequent training
words plus ``<unk>``; id 0 pads. ``rm.rnn.BucketSentenceIter`` batches the sentences into
buckets (``--buckets``) and ``rm.mod.BucketingModule`` unrolls the LSTM stack once per bucket
length, all buckets sharing one set of parameters.

Every epoch logs the training and validation perplexity (``rm.metric.Perplexity``, padding
ignored) and writes one JSON line to ``--metrics``; a PNG of both curves goes next to it when
matplotlib is installed. The end writes a checkpoint in MXNet's layout
(``PREFIX-symbol.json`` of the largest bucket, ``PREFIX-%04d.params``, ``PREFIX-%04d.states``)
plus the vocabulary as ``PREFIX-vocab.json``, and prints ``final validation perplexity X``.
Exit status: 0; 1 if the run failed; 2 for bad flags.
"""
from __future__ import annotations

import argparse
import collections
import importlib
import inspect
import json
import logging
import re
import time
import warnings
from pathlib import Path

import numpy as np

import raymod as rm

try:  # run as a script (jobs/ is on sys.path) or as `python -m jobs.train_lstm_bucketing`
    import _common as common
except ImportError:  # pragma: no cover
    from . import _common as common

_LOG = logging.getLogger("train_lstm_bucketing")

#: the modules whose docstrings make the corpus, in this order (missing ones are skipped)
STDLIB_MODULES = (
    "abc", "argparse", "ast", "asyncio", "base64", "bisect", "calendar", "cmd", "codecs",
    "collections", "concurrent.futures", "configparser", "contextlib", "copy", "csv",
    "dataclasses", "datetime", "decimal", "difflib", "doctest", "email.message", "enum",
    "fileinput", "fnmatch", "fractions", "ftplib", "functools", "gettext", "glob", "gzip",
    "hashlib", "heapq", "hmac", "html.parser", "http.client", "http.cookiejar", "http.server",
    "imaplib", "inspect", "io", "ipaddress", "itertools", "json", "locale", "logging",
    "logging.handlers", "lzma", "mailbox", "mimetypes", "numbers", "operator", "optparse",
    "os", "pathlib", "pdb", "pickle", "pkgutil", "platform", "poplib", "pprint", "pydoc",
    "queue", "random", "re", "reprlib", "sched", "secrets", "selectors", "shelve", "shlex",
    "shutil", "signal", "smtplib", "socket", "socketserver", "sqlite3", "ssl", "statistics",
    "string", "struct", "subprocess", "sysconfig", "tarfile", "tempfile", "textwrap",
    "threading", "timeit", "tokenize", "trace", "traceback", "types", "typing", "unittest",
    "urllib.parse", "urllib.request", "uuid", "warnings", "wave", "weakref", "xml.dom.minidom",
    "xml.etree.ElementTree", "xmlrpc.client", "zipfile", "zoneinfo",
)

PAD, UNK = "<pad>", "<unk>"
INVALID_LABEL = 0  # the padding id of data and labels; never a word


# ---- the corpus -----------------------------------------------------------------------------
def _defined_in(obj: object, module: object) -> bool:
    """Whether ``obj`` belongs to ``module`` (or to its C accelerator ``_name``)."""
    owner = getattr(obj, "__module__", None)
    name = module.__name__
    return owner == name or owner == "_" + name.rsplit(".", 1)[-1]


def collect_docstrings(modules: tuple[str, ...] = STDLIB_MODULES) -> list[str]:
    """The docstrings of ``modules`` and of their public classes, functions and methods.

    Deterministic for one Python installation: modules in the given order, members sorted
    by name, each distinct docstring once.
    """
    docs: list[str] = []
    seen: set[str] = set()

    def add(obj: object) -> None:
        doc = inspect.getdoc(obj)
        if doc and doc not in seen:
            seen.add(doc)
            docs.append(doc)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated modules warn on import
        for name in modules:
            try:
                module = importlib.import_module(name)
            except Exception:  # noqa: BLE001 - not built into this Python: skip it
                _LOG.debug("skipping module %s", name, exc_info=True)
                continue
            add(module)
            for member_name in sorted(vars(module)):
                member = vars(module)[member_name]
                if member_name.startswith("_") or not _defined_in(member, module):
                    continue
                if inspect.isclass(member):
                    add(member)
                    for attr in sorted(vars(member)):
                        value = vars(member)[attr]
                        if not attr.startswith("_") and inspect.isroutine(value):
                            add(value)
                elif inspect.isroutine(member):
                    add(member)
    return docs


_SENTENCE_END = re.compile(r"[.!?]+(?:\s+|$)")
_WORD = re.compile(r"[a-z]+")


def split_sentences(docs: list[str], max_len: int) -> list[list[str]]:
    """Lowercase word sentences of 2 words or more, at most ``max_len`` words each.

    Paragraphs (blank-line separated) are joined and split at ``.``/``!``/``?`` followed
    by a space or the end; doctest lines (``>>>``, ``...``) are left out; a longer sentence
    is cut into pieces of ``max_len`` words.
    """
    sentences = []
    for doc in docs:
        for paragraph in re.split(r"\n\s*\n", doc):
            lines = [ln.strip() for ln in paragraph.splitlines()]
            text = " ".join(ln for ln in lines if not ln.startswith((">>>", "...")))
            for sentence in _SENTENCE_END.split(text.lower()):
                words = _WORD.findall(sentence)
                for start in range(0, len(words), max_len):
                    piece = words[start:start + max_len]
                    if len(piece) >= 2:
                        sentences.append(piece)
    return sentences


def build_vocab(sentences: list[list[str]], size: int) -> dict[str, int]:
    """``{PAD: 0, the `size` most frequent words (ties by spelling): 1.., UNK: last}``."""
    counts = collections.Counter(w for s in sentences for w in s)
    words = sorted(counts, key=lambda w: (-counts[w], w))[:size]
    vocab = {PAD: INVALID_LABEL}
    vocab.update((w, i) for i, w in enumerate(words, start=1))
    vocab[UNK] = len(vocab)
    return vocab


def load_corpus(args: argparse.Namespace) -> tuple[list[list[int]], list[list[int]], dict]:
    """Encoded training and validation sentences and the vocabulary."""
    sentences = split_sentences(collect_docstrings(), max(args.buckets))
    if args.max_sentences is not None:
        sentences = sentences[:args.max_sentences]
    order = np.random.default_rng(args.seed).permutation(len(sentences))
    cut = len(sentences) - max(1, round(args.val_fraction * len(sentences)))
    train = [sentences[i] for i in order[:cut]]
    val = [sentences[i] for i in order[cut:]]
    vocab = build_vocab(train, args.vocab_size)

    def encode(sentences: list[list[str]]) -> list[list[int]]:
        return rm.rnn.encode_sentences(sentences, vocab=vocab, invalid_label=INVALID_LABEL,
                                       unknown_token=UNK)[0]
    return encode(train), encode(val), vocab


# ---- the model ------------------------------------------------------------------------------
def lstm_lm_sym_gen(vocab_size: int, num_embed: int, num_hidden: int, num_layers: int = 2):
    """``sym_gen(seq_len)`` of the language model: Embedding, an LSTM stack unrolled over
    ``seq_len`` steps, a FullyConnected to the vocabulary and a softmax ignoring padding."""
    def sym_gen(seq_len: int):
        data = rm.sym.Variable("data")
        label = rm.sym.Variable("softmax_label")
        embed = rm.sym.Embedding(data, input_dim=vocab_size, output_dim=num_embed, name="embed")
        stack = rm.rnn.SequentialRNNCell()
        for i in range(num_layers):
            stack.add(rm.rnn.LSTMCell(num_hidden, prefix=f"lstm_l{i}_"))
        outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = rm.sym.FullyConnected(rm.sym.Reshape(outputs, shape=(-1, num_hidden)),
                                     num_hidden=vocab_size, name="pred")
        net = rm.sym.SoftmaxOutput(pred, rm.sym.Reshape(label, shape=(-1,)), name="softmax",
                                   use_ignore=True, ignore_label=INVALID_LABEL)
        return net, ("data",), ("softmax_label",)
    return sym_gen


# ---- flags ----------------------------------------------------------------------------------
def _buckets(text: str) -> list[int]:
    try:
        buckets = sorted({int(b) for b in text.split(",") if b.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated lengths like 10,20,30, got {text!r}") from None
    if not buckets or buckets[0] < 2:
        raise argparse.ArgumentTypeError(f"expected lengths >= 2, got {text!r}")
    return buckets


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags; exits with status 2 and a one-line message when one is invalid."""
    parser = common.JobArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=common.positive_int, default=5,
                        help="epochs to train (default %(default)s)")
    parser.add_argument("--batch-size", type=common.positive_int, default=32,
                        help="global batch of sentences, cut into one slice per worker "
                             "(default %(default)s)")
    parser.add_argument("--lr", type=common.positive_float, default=0.005,
                        help="Adam learning rate (default %(default)s)")
    parser.add_argument("--seed", type=int, default=42,
                        help="seeds the split, initializer and shuffles (default %(default)s)")
    data = parser.add_argument_group("corpus and model")
    data.add_argument("--vocab-size", type=common.positive_int, default=2000,
                      help="most frequent training words kept; the rest are <unk> "
                           "(default %(default)s)")
    data.add_argument("--buckets", type=_buckets, default="10,20,30", metavar="L1,L2,..",
                      help="bucket lengths; longer sentences are cut (default %(default)s)")
    data.add_argument("--max-sentences", type=common.positive_int, default=None, metavar="N",
                      help="use only the first N sentences of the corpus (default: all)")
    data.add_argument("--val-fraction", type=common.fraction, default=0.1,
                      help="held-out share of the sentences (default %(default)s)")
    data.add_argument("--num-embed", type=common.positive_int, default=64,
                      help="embedding size (default %(default)s)")
    data.add_argument("--num-hidden", type=common.positive_int, default=128,
                      help="LSTM units per layer (default %(default)s)")
    common.add_cluster_args(parser)
    common.add_output_args(parser, "lstm")
    common.add_plot_arg(parser)
    args = parser.parse_args(argv)
    args.workers = common.workers_from_args(parser, args)
    if not 0.0 < args.val_fraction < 1.0:
        parser.error(f"argument --val-fraction: must be strictly between 0 and 1, "
                     f"got {args.val_fraction}")
    return args


def _close(mod: rm.mod.BucketingModule) -> None:
    """Stop the worker actors: every bucket's module shares the default bucket's pool."""
    close = getattr(mod, "close", None)
    if close is not None:
        close()
        return
    default = getattr(mod, "_buckets", {}).get(getattr(mod, "_default_bucket_key", None))
    if default is not None:
        default.close()


def _sentence_iter(sentences: list[list[int]], args: argparse.Namespace,
                   what: str) -> rm.rnn.BucketSentenceIter:
    try:
        it = rm.rnn.BucketSentenceIter(sentences, args.batch_size, buckets=args.buckets,
                                       invalid_label=INVALID_LABEL)
    except ValueError as err:
        common.fail(f"no {what} batch: {err}")
    if not it.idx:
        common.fail(f"the {len(sentences)} {what} sentences fill no batch of "
                    f"{args.batch_size} in any bucket: use more sentences or a smaller "
                    "--batch-size")
    return it


def main(argv: list[str] | None = None) -> float:
    """Train, checkpoint and return the final validation perplexity."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    rm.random.seed(args.seed)
    tic = time.time()
    train_sents, val_sents, vocab = load_corpus(args)
    train = _sentence_iter(train_sents, args, "training")
    val = _sentence_iter(val_sents, args, "validation")
    batches = len(train.idx)
    tokens = sum(len(s) for s in train_sents)
    unk = sum(t == vocab[UNK] for s in train_sents for t in s)

    where = common.describe_workers(args.workers)
    _LOG.info("stdlib docstrings: %d train / %d validation sentences (%d train words, "
              "%.1f%% <unk>), vocabulary %d, buckets %s, corpus built in %.1f s",
              len(train_sents), len(val_sents), tokens, 100.0 * unk / max(tokens, 1),
              len(vocab), args.buckets, time.time() - tic)
    _LOG.info("LSTM 2x%d, embed %d: batch %d (%d batches/epoch), %d epochs, %s",
              args.num_hidden, args.num_embed, args.batch_size, batches, args.epochs, where)
    if args.workers is None:
        common.limit_blas_threads(args.cpus_per_worker)
    connected_here = args.workers is not None and not rm.cluster.is_initialized()
    mod = rm.mod.BucketingModule(
        lstm_lm_sym_gen(len(vocab), args.num_embed, args.num_hidden),
        default_bucket_key=train.default_bucket_key, context=common.contexts_from_args(args),
        workers=args.workers)
    metrics = common.EpochMetrics(args.metrics, args.batch_size,
                                  mode="a" if args.resume else "w", tensorboard=args.tensorboard,
                                  disp_batches=args.disp_batches)
    try:
        common.connect(args.workers, args.address)
        start = time.time()
        with common.progress_bar(batches) as bar:
            result = mod.fit(
                metrics.timed(train), eval_data=val,
                eval_metric=rm.metric.Perplexity(INVALID_LABEL), num_epoch=args.epochs,
                kvstore=common.kvstore_for(args.kvstore, args.workers), optimizer="adam",
                optimizer_params={"learning_rate": args.lr, "clip_gradient": 5.0},
                initializer=rm.init.Xavier(factor_type="in", magnitude=2.34),
                batch_end_callback=[bar, metrics.batch_end],
                epoch_end_callback=[bar, metrics.epoch_end],
                eval_end_callback=metrics.eval_end, **common.fit_checkpointing(args))
        common.log_fit_result(result)
        if metrics.records:
            perplexity = float(metrics.records[-1]["val_perplexity"])
        else:  # resumed after the last epoch: nothing trained here
            perplexity = float(dict(mod.score(val, rm.metric.Perplexity(INVALID_LABEL)))[
                "perplexity"])
        Path(args.checkpoint).parent.mkdir(parents=True, exist_ok=True)
        mod.save_checkpoint(args.checkpoint, args.epochs, save_optimizer_states=True)
        vocab_file = Path(f"{args.checkpoint}-vocab.json")
        vocab_file.write_text(json.dumps(vocab, indent=0), encoding="utf-8")
        elapsed = time.time() - start
    except rm.MXNetError as err:  # e.g. WorkersUnavailable: the cluster is too small
        _LOG.debug("failed", exc_info=True)
        common.fit_failed(err)
    finally:
        metrics.close()
        _close(mod)  # stops the worker actors
        if connected_here:  # sooner than Ray's exit hook
            rm.cluster.shutdown()
    epochs = [r["epoch"] + 1 for r in metrics.records]
    common.save_curves_png(
        common.plot_path(args),
        {"training": (epochs, [r["train_perplexity"] for r in metrics.records]),
         "validation": (epochs, [r["val_perplexity"] for r in metrics.records])},
        title=f"LSTM language model on stdlib docstrings ({where})", ylabel="perplexity",
        xlabel="epochs trained", log_y=True)
    _LOG.info("fit and checkpoint took %.1f s; checkpoint %s-%04d.params, metrics %s",
              elapsed, args.checkpoint, args.epochs, args.metrics)
    print(f"final validation perplexity {perplexity:.2f}", flush=True)
    return perplexity


if __name__ == "__main__":
    main()
