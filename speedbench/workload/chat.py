"""Prompt + turn + history -> the HTTP request body (path, JSON), identically for every arm.

Three request shapes, chosen by ``workload.chat_template`` and ``workload.api``:

* ``chat_template: server`` (default), ``api: chat``: ``/v1/chat/completions`` with
  ``messages``; the server applies the model's chat template, and
  ``chat_template_kwargs`` travel in the body (a vLLM extension).
* ``chat_template: client`` (either api): the template is rendered here with the model's
  tokenizer (``add_generation_prompt=True``, as SPEED-Bench does) and sent as ``prompt``
  to ``/v1/completions``, with the engine's fields that take it as it is: the rendered
  template already holds the BOS token, and a completions endpoint that added a second
  one would shift every position and change what the draft sees.
* ``chat_template: server``, ``api: completions``: no template at all (base models); the
  conversation's plain text, parts joined by blank lines, goes to ``/v1/completions``.

The body is semantic only: stream flags and token-id extensions are the client's job.
What a request needs beyond OpenAI's fields (an exact output length, a templated prompt)
the builder states, and the run's engine names the fields (``RequestFields``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Protocol

from speedbench.errors import ScenarioError
from speedbench.records import Prompt
from speedbench.scenario import VariantSpec, WorkloadSpec
from speedbench.workload.padding import Padder

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
# Stands in for the model's answers when hashing later turns: the answers differ
# between arms (and runs), the prompts must not.
_ANSWER_MARK = "<assistant answer>"


def load_tokenizer(name_or_path: str | None, *, trust_remote_code: bool = False):
    """A Hugging Face tokenizer from local files only (runs never download)."""
    try:
        from transformers import AutoTokenizer  # heavy and optional: only workloads that need a tokenizer
    except ImportError:
        raise ScenarioError(
            "client-side chat templating and token-accurate padding need 'transformers' -- fix: "
            "pip install transformers, or use workload.chat_template: server"
        ) from None
    try:
        return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True, trust_remote_code=trust_remote_code)
    except Exception as e:  # OSError, ValueError, remote-code refusals...
        raise ScenarioError(
            f"workload.tokenizer: cannot load a tokenizer from '{name_or_path}' with local files only "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}) -- fix: set workload.tokenizer "
            "to a local folder with tokenizer files, or download the model first; tokenizers with custom "
            "code also need the server's trust-remote-code"
        ) from None


def workload_tokenizer(workload: WorkloadSpec, model: str | None, variants: Iterable[VariantSpec | None], *,
                       trust_remote_code: bool = False):
    """The tokenizer a workload needs, loaded once, or None.

    Client-side templating needs one (``workload.tokenizer``, else ``model``; an error
    when neither loads). Padding (a variant with ``input_tokens``) uses ``workload.tokenizer``
    when set, else the model's own tokenizer when it is on disk, else None: lengths are
    then estimated by characters (the builder's ``padding_unit`` says which).
    """
    padding = any(v is not None and v.input_tokens for v in variants)
    if workload.chat_template == "client" or (padding and workload.tokenizer):
        return load_tokenizer(workload.tokenizer or model, trust_remote_code=trust_remote_code)
    if padding:
        try:
            return load_tokenizer(model, trust_remote_code=trust_remote_code)
        except ScenarioError:
            return None
    return None


# RequestBuilder's default: load what the workload needs. An explicit None means "none".
_LOAD: Any = object()


class RequestFields(Protocol):
    """The part of the run's engine the builder asks (``Engine.request_fields``)."""

    def request_fields(self, exact_length: bool, templated: bool) -> dict[str, Any]:
        """The body fields asking for exactly ``max_tokens`` tokens and for a templated prompt."""
        ...


class _PlainFields:
    def request_fields(self, exact_length: bool, templated: bool) -> dict[str, Any]:
        return {}  # plain OpenAI has no field for either


_PLAIN_FIELDS = _PlainFields()


class RequestBuilder:
    """Builds the requests of one (workload, variant); one instance per arm is fine.

    ``tokenizer``: a Hugging Face tokenizer (or None) to use instead of loading one with
    :func:`workload_tokenizer`; a run loads it once and passes it to every builder.
    Padding uses it when available and otherwise estimates by characters.
    ``fields``: the run's engine, which names the body fields for what a request needs;
    None: plain OpenAI, no fields beyond its own.
    """

    def __init__(
        self,
        workload: WorkloadSpec,
        model: str | None,
        variant: VariantSpec | None = None,
        tokenizer=_LOAD,
        *,
        trust_remote_code: bool = False,
        fields: RequestFields | None = None,
    ):
        self.workload = workload
        self.model = model
        self.variant = variant
        self.client_side = workload.chat_template == "client"
        self.path = COMPLETIONS_PATH if self.client_side or workload.api == "completions" else CHAT_PATH
        # variant > workload; None inherits, "" means explicitly no system prompt.
        if variant is not None and variant.system_prompt is not None:
            self.system_prompt: str | None = variant.system_prompt
        else:
            self.system_prompt = workload.system_prompt
        self.template_kwargs: dict[str, Any] = {
            **workload.chat_template_kwargs, **((variant.chat_template_kwargs if variant else None) or {})
        }
        self.input_tokens = variant.input_tokens if variant is not None else None
        if tokenizer is _LOAD:
            tokenizer = workload_tokenizer(workload, model, [variant], trust_remote_code=trust_remote_code)
        self.tokenizer = tokenizer
        self.padding_unit = "" if not self.input_tokens else ("tokens" if tokenizer is not None else "chars/4")
        self._padder = Padder(self.input_tokens, seed=workload.seed, tokenizer=tokenizer) if self.input_tokens else None
        self._padded: dict[str, str] = {}
        self._hashes: set[str] = set()
        # Asked once, each where the body held it before (a templated prompt's field beside
        # the prompt, the length's last), so an engine's request keeps its bytes.
        ask = fields if fields is not None else _PLAIN_FIELDS
        self._templated_fields = ask.request_fields(exact_length=False, templated=True) if self.client_side else {}
        self._length_fields = ask.request_fields(exact_length=True, templated=False) if workload.exact_length else {}

    # ---- public --------------------------------------------------------------------

    def prepare(self, prompts: Iterable[Prompt]) -> None:
        """Pad ``prompts`` now, so that padding (tokenizer work) stays off the timed path."""
        for p in prompts:
            self._first_turn(p)

    def build(self, prompt: Prompt, turn: int, history: list[tuple[str, str]]) -> tuple[str, dict]:
        """-> (path, body). ``history`` = [(user, assistant), ...] of the earlier turns.

        History user texts equal to the prompt's own turns are replaced by what this
        builder sent for them (turn 0 may be padded), so every turn sees one consistent
        conversation.
        """
        if not 0 <= turn < len(prompt.turns):
            raise ValueError(f"prompt {prompt.id} has {len(prompt.turns)} turns; turn {turn} does not exist")
        if len(history) != turn:
            raise ValueError(f"turn {turn} of prompt {prompt.id} needs {turn} history entries, got {len(history)}")
        users = [u for u, _ in history]
        messages = self._messages(prompt, turn, [a for _, a in history], users)
        # turn 0 has no answers, so what is sent is what is hashed
        hash_messages = self._messages(prompt, turn, [_ANSWER_MARK] * turn, users) if turn else messages
        body: dict[str, Any] = {"model": self.model}
        if self.path == CHAT_PATH:
            body["messages"] = messages
            if self.template_kwargs:
                body["chat_template_kwargs"] = dict(self.template_kwargs)
            # the server renders with the kwargs, so they are part of what was asked
            rendered_for_hash = json.dumps({"messages": hash_messages, "kwargs": self.template_kwargs},
                                           sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        elif self.client_side:
            body["prompt"] = self._render(messages)
            body.update(self._templated_fields)
            rendered_for_hash = self._render(hash_messages) if turn else body["prompt"]
        else:
            body["prompt"] = "\n\n".join(m["content"] for m in messages)
            rendered_for_hash = "\n\n".join(m["content"] for m in hash_messages)
        w = self.workload
        body["max_tokens"] = w.max_tokens
        body["temperature"] = w.temperature
        body["seed"] = w.seed
        if w.top_p is not None:
            body["top_p"] = w.top_p
        body.update(self._length_fields)
        entry = f"{prompt.id}\x1f{turn}\x1f{rendered_for_hash}"
        self._hashes.add(hashlib.sha256(entry.encode("utf-8")).hexdigest())
        return self.path, body

    def rendered_hash(self) -> str:
        """sha256 over every distinct (prompt, turn, rendered prompt) built so far.

        Order-independent (concurrency changes the build order) and blind to the model's
        answers in later turns (they differ between arms), so two arms given the same
        prompts get the same hash, and any difference in what was asked changes it.
        """
        h = hashlib.sha256()
        for digest in sorted(self._hashes):
            h.update(digest.encode("ascii"))
        return h.hexdigest()

    # ---- internals -----------------------------------------------------------------

    def _first_turn(self, prompt: Prompt) -> str:
        if self._padder is None:
            return prompt.turns[0]
        key = f"{prompt.id}\x1f{prompt.turns[0]}"
        if key not in self._padded:
            self._padded[key] = self._padder.pad(prompt.turns[0], key=prompt.id)
        return self._padded[key]

    def _user_text(self, prompt: Prompt, i: int, given: str | None = None) -> str:
        own = prompt.turns[i]
        if given is not None and given != own:
            return given  # the runner sent something else; trust it
        return self._first_turn(prompt) if i == 0 else own

    def _messages(self, prompt: Prompt, turn: int, answers: list[str], users: list[str]) -> list[dict[str, str]]:
        system = self.system_prompt
        if system is None:
            system = next((v for k, v in prompt.tags if k == "system_prompt"), None)
        messages: list[dict[str, str]] = []
        if system:
            messages.append({"role": "system", "content": system})
        for i, answer in enumerate(answers):
            messages.append({"role": "user", "content": self._user_text(prompt, i, users[i])})
            messages.append({"role": "assistant", "content": answer})
        messages.append({"role": "user", "content": self._user_text(prompt, turn)})
        return messages

    def _render(self, messages: list[dict[str, str]]) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **self.template_kwargs
            )
        except Exception as e:  # jinja errors, a tokenizer without a template, ...
            raise ScenarioError(
                f"workload.chat_template: client: the tokenizer could not render the chat template "
                f"({type(e).__name__}: {e}) -- fix: use a tokenizer with a chat template (workload.tokenizer) "
                "or chat_template: server"
            ) from None
