"""Fake credentials of every kind the redaction rules know, in the context they appear in.

Each sample is random in its body (seeded), shaped like the real format, and carries the
values that must never come back (``values``): the secret itself and, for multi-line
secrets, each line of it. Shared by the redaction tests, the leak tests and the scanner
evaluation (``bench/secret_scanners.py``).
"""

from __future__ import annotations

import base64
import random
import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
PASSWORD = ALNUM + "!^~-_."


@dataclass(frozen=True, slots=True)
class Sample:
    kind: str
    text: str
    """The secret in its usual surroundings (a command, an env dump, a config line)."""
    values: tuple[str, ...]


def _draw(rng: random.Random, alphabet: str, n: int) -> str:
    # Always mixed: a digit, an upper and a lower letter, so no draw reads as a word.
    body = [rng.choice(alphabet) for _ in range(n)]
    for at, pool in zip(rng.sample(range(n), 3), (string.digits, string.ascii_uppercase,
                                                   string.ascii_lowercase), strict=True):
        if any(c in alphabet for c in pool):
            body[at] = rng.choice([c for c in pool if c in alphabet])
    return "".join(body)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _key_block(rng: random.Random, label: str, newline: str = "\n") -> tuple[str, list[str]]:
    lines = [_draw(rng, B64, 64) for _ in range(4)] + [_draw(rng, B64, 20) + "=="]
    block = newline.join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])
    return block, lines


def private_key(rng: random.Random) -> Sample:
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY",
                        "EC PRIVATE KEY", "ENCRYPTED PRIVATE KEY"])
    block, lines = _key_block(rng, label)
    return Sample("private-key", f"$ cat ~/.ssh/id\n{block}\n$ ", tuple(lines))


def aws_access_key_id(rng: random.Random) -> Sample:
    key = rng.choice(["AKIA", "ASIA"]) + _draw(rng, string.ascii_uppercase + "234567", 16)
    return Sample("aws-access-key-id", f"aws configure set aws_access_key_id {key}", (key,))


def aws_secret_access_key(rng: random.Random) -> Sample:
    key = _draw(rng, B64, 40)
    return Sample("aws-secret-access-key", f"[default]\naws_secret_access_key = {key}\n",
                  (key,))


def gcp_service_account_key(rng: random.Random) -> Sample:
    key_id = "".join(rng.choice("0123456789abcdef") for _ in range(40))
    block, lines = _key_block(rng, "PRIVATE KEY")
    document = {"type": "service_account", "project_id": "acme-prod",
                "private_key_id": key_id, "private_key": block + "\n",
                "client_email": "deploy@acme-prod.iam.gserviceaccount.com"}
    # As `cat key.json` prints it: the key's newlines are JSON escapes.
    return Sample("gcp-service-account-key", orjson.dumps(document, option=orjson.OPT_INDENT_2)
                  .decode(), (key_id, *lines))


def gcp_api_key(rng: random.Random) -> Sample:
    key = "AIza" + _draw(rng, URLSAFE, 35)
    return Sample("gcp-api-key", f"curl 'https://maps.example.com/api?key={key}'", (key,))


def azure_connection_string(rng: random.Random) -> Sample:
    key = _draw(rng, B64, 86) + "=="
    text = (f"AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acme;"
            f"AccountKey={key};EndpointSuffix=core.windows.net")
    return Sample("azure-connection-string", text, (key.rstrip("="),))


def github_token(rng: random.Random) -> Sample:
    if rng.random() < 0.5:
        token = rng.choice(["ghp_", "gho_", "ghs_"]) + _draw(rng, ALNUM, 36)
    else:
        token = "github_pat_" + _draw(rng, ALNUM, 22) + "_" + _draw(rng, ALNUM, 59)
    return Sample("github-token", f"git clone https://x-access-token@github.com/o/r # {token}",
                  (token,))


def gitlab_token(rng: random.Random) -> Sample:
    token = "glpat-" + _draw(rng, URLSAFE, 20)
    return Sample("gitlab-token", f'curl --header "PRIVATE-TOKEN-HEADER {token}" gitlab', (token,))


def anthropic_key(rng: random.Random) -> Sample:
    key = "sk-ant-api03-" + _draw(rng, URLSAFE, 93) + "AA"
    return Sample("anthropic-key", f"client = Anthropic(api_key='{key}')", (key,))


def openai_key(rng: random.Random) -> Sample:
    key = "sk-proj-" + _draw(rng, URLSAFE, 40) + _draw(rng, ALNUM, 20) + "T3BlbkFJ" + _draw(
        rng, URLSAFE, 60)
    return Sample("openai-key", f"openai.api_key = {key}", (key,))


def slack_token(rng: random.Random) -> Sample:
    if rng.random() < 0.5:
        token = (f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-"
                 + _draw(rng, ALNUM, 24))
    else:
        token = (f"https://hooks.slack.com/services/T{_draw(rng, ALNUM, 10)}/"
                 f"B{_draw(rng, ALNUM, 10)}/{_draw(rng, ALNUM, 24)}")
    return Sample("slack-token", f"posting to {token} now", (token,))


def stripe_key(rng: random.Random) -> Sample:
    key = rng.choice(["sk_live_", "rk_live_", "sk_test_"]) + _draw(rng, ALNUM, 24)
    return Sample("stripe-key", f"stripe.api_key = {key}", (key,))


def jwt(rng: random.Random) -> Sample:
    header = _b64url(orjson.dumps({"alg": "HS256", "typ": "JWT"}))
    payload = _b64url(orjson.dumps({"sub": _draw(rng, ALNUM, 12), "iat": rng.randrange(10**9)}))
    token = f"{header}.{payload}.{_b64url(rng.randbytes(32))}"
    return Sample("jwt", f"cookie: session={token}; Path=/", (token, token.rsplit(".", 1)[1]))


def url_password(rng: random.Random) -> Sample:
    password = _draw(rng, PASSWORD, 18)
    return Sample("url-password", f"DATABASE_URL=postgres://app:{password}@db.internal:5432/app",
                  (password,))


def bearer_token(rng: random.Random) -> Sample:
    token = _draw(rng, URLSAFE, 40)
    return Sample("bearer-token", f'curl -H "Authorization: Bearer {token}" https://api/v1',
                  (token,))


def assigned_secret(rng: random.Random) -> Sample:
    value = _draw(rng, PASSWORD, rng.randrange(10, 30))
    name = rng.choice(["DB_PASSWORD", "API_TOKEN", "STRIPE_WEBHOOK_SECRET", "SIGNING_KEY",
                       "password", "client_secret"])
    text = rng.choice([f"export {name}={value}", f'{name}="{value}"', f"{name}: {value}",
                       f'{{"{name}": "{value}"}}', f"  {name} = '{value}'"])
    return Sample("assigned-secret", text, (value,))


def basic_auth(rng: random.Random) -> Sample:
    user = rng.choice(["admin", "deploy", "ci-bot"])
    encoded = base64.b64encode(f"{user}:{_draw(rng, PASSWORD, 16)}".encode()).decode()
    return Sample("basic-auth", f'curl -H "Authorization: Basic {encoded}" https://api/v1',
                  (encoded,))


def _password(rng: random.Random, n: int = 14) -> str:
    """A password that cannot be taken for a command-line flag (no leading dash)."""
    return rng.choice(ALNUM) + _draw(rng, PASSWORD, n - 1)


def cli_password(rng: random.Random) -> Sample:
    password = _password(rng)
    text = rng.choice([f"mysql -h db -u root --password {password} app",
                       f"mysql -uroot -p{password} app",
                       f"curl -u deploy:{password} https://ci.internal/api",
                       f"mysqldump --password '{password}' app > dump.sql",
                       f'curl --user "ci:{password}" https://ci.internal/api'])
    return Sample("cli-password", text, (password,))


def huggingface_token(rng: random.Random) -> Sample:
    token = "hf_" + _draw(rng, string.ascii_letters, 34)
    return Sample("huggingface-token", f"huggingface-cli login --token {token}", (token,))


def private_span(rng: random.Random) -> Sample:
    """What a person marked private in a message (docs/privacy.md), tags and all."""
    words = " ".join(_words(rng, 4)) + " " + _draw(rng, ALNUM, 12)
    tag = rng.choice(["private", "PRIVATE", "Private"])
    text = rng.choice([f"the client is <{tag}>{words}</{tag}>, go on",
                       f"<{tag}>\n{words}\n</{tag}>\nthen fix the build"])
    return Sample("private", text, (words,))


MAKERS: dict[str, Callable[[random.Random], Sample]] = {
    "private": private_span,
    "private-key": private_key,
    "aws-access-key-id": aws_access_key_id,
    "aws-secret-access-key": aws_secret_access_key,
    "gcp-service-account-key": gcp_service_account_key,
    "gcp-api-key": gcp_api_key,
    "azure-connection-string": azure_connection_string,
    "github-token": github_token,
    "gitlab-token": gitlab_token,
    "anthropic-key": anthropic_key,
    "openai-key": openai_key,
    "slack-token": slack_token,
    "stripe-key": stripe_key,
    "jwt": jwt,
    "url-password": url_password,
    "bearer-token": bearer_token,
    "assigned-secret": assigned_secret,
    "basic-auth": basic_auth,
    "cli-password": cli_password,
    "huggingface-token": huggingface_token,
}


# --- forms the format rules of a kind must also catch (issue 22) ----------------------


def _words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(5, 8)))
            for _ in range(n)]


def userless_url_password(rng: random.Random) -> Sample:
    password = _password(rng, 18)
    return Sample("url-password", f"REDIS_URL=redis://:{password}@cache.internal:6379/0",
                  (password,))


def column_aligned(rng: random.Random) -> Sample:
    value = _password(rng, 20)
    name, gap = rng.choice([("secret_key", " " * 6), ("API_TOKEN", "\t\t"),
                            ("db_password", " " * 11)])
    text = rng.choice([f'{name}{gap}= "{value}"', f"{name}:{gap}{value}",
                       f"{name}{gap}={gap}{value}"])
    return Sample("assigned-secret", f"[settings]\n{text}\nport = 8080", (value,))


def dashed_passphrase(rng: random.Random) -> Sample:
    value = "-".join(_words(rng, 4))
    name = rng.choice(["password", "DB_PASSWORD", "passwd"])
    text = rng.choice([f'{name} = "{value}"', f"{name}: {value}", f"export {name}='{value}'"])
    return Sample("assigned-secret", text, (value,))


def url_encoded_token(rng: random.Random) -> Sample:
    token = "ghp_" + _draw(rng, ALNUM, 36)
    return Sample("github-token", f"GET /login?next=%2Fbuild%3Ftoken%3D{token}%26x%3D1 302",
                  (token,))


def url_encoded_assignment(rng: random.Random) -> Sample:
    value = _password(rng, 18).replace("!", "x")
    return Sample("assigned-secret", f"redirect=%2Fcb%3Fapi_key%3D{value}%26page%3D2", (value,))


def url_encoded_slack_webhook(rng: random.Random) -> Sample:
    secret = _draw(rng, ALNUM, 24)
    url = (f"https%3A%2F%2Fhooks.slack.com%2Fservices%2FT{_draw(rng, ALNUM, 10)}%2F"
           f"B{_draw(rng, ALNUM, 10)}%2F{secret}")
    return Sample("slack-token", f"curl 'https://relay.example/forward?to={url}&m=hi'", (secret,))


def xml_element(rng: random.Random) -> Sample:
    value = _password(rng, 16).replace("<", "x")
    tag = rng.choice(["password", "apiKey", "client_secret", "Password"])
    return Sample("assigned-secret", f"<server><user>ci</user><{tag}>{value}</{tag}></server>",
                  (value,))


FORMS: dict[str, Callable[[random.Random], Sample]] = {
    "userless-url-password": userless_url_password,
    "column-aligned": column_aligned,
    "dashed-passphrase": dashed_passphrase,
    "url-encoded-token": url_encoded_token,
    "url-encoded-assignment": url_encoded_assignment,
    "url-encoded-slack-webhook": url_encoded_slack_webhook,
    "xml-element": xml_element,
}
"""Forms of known kinds the rules missed before issue 22 (each sample names its kind)."""

SECRET_ARGUMENTS: tuple[tuple[str, ...], ...] = (
    ("password",), ("env", "DB_PASSWORD"), ("headers", "X-Api-Key"), ("auth", "token"),
)
"""Key paths of tool-call arguments whose value is a secret by its name alone."""


# --- what must survive --------------------------------------------------------------


def survivors(rng: random.Random) -> list[tuple[str, str]]:
    """(text, word): assignments under secret-like names whose values are not credentials
    (git shas, uuids, public keys, field names, partition values, numbers, fingerprints),
    each with the word that must stay searchable."""
    sha = "".join(rng.choice("0123456789abcdef") for _ in range(40))
    uid = "-".join("".join(rng.choice("0123456789abcdef") for _ in range(n))
                   for n in (8, 4, 4, 4, 12))
    # (a "/" as real blobs have: each word fits the index's 64-character terms)
    public = "AAAAC3NzaC1lZDI1NTE5AAAAI" + _draw(rng, ALNUM, 20) + "/" + _draw(rng, ALNUM, 22)
    fingerprint = "SHA256:" + _draw(rng, ALNUM, 43)
    colon = ":".join(f"{rng.randrange(256):02x}" for _ in range(16))
    tenant = f"tenant_{rng.randrange(10, 99)}"
    vapid = "B" + _draw(rng, ALNUM, 60)
    return [
        (f"cache_key={sha}", sha),
        (f"idempotency_key: {uid}", uid),
        (f'public_key = "{public}"', public),
        (f"ssh_public_key: ssh-ed25519 {public} ci@build", public),
        (f"VAPID_PUBLIC_KEY={vapid}", vapid),
        ("sort_key: createdAt", "createdAt"),
        ("sort_key = updatedAtMs", "updatedAtMs"),
        (f"partition_key={tenant}", tenant),
        ("partition_key=2026-12-01", "2026-12-01"),
        ("partition_key=customer-42", "customer-42"),
        ("max_token=128000", "128000"),
        ("MAX_TOKENS=4096 token_limit=8192", "8192"),
        (f"host_key: {fingerprint}", fingerprint[7:]),
        (f"deploy_key: {colon}", colon),
        (f"commit {sha} token_count: 31337", "31337"),
        ("primary_key: user_id", "user_id"),
        ("foreign_key = orderLineId", "orderLineId"),
        ("PWD=/home/dev/project OLDPWD=/home/dev", "/home/dev/project"),
        ("SIGNING_KEY_FILE=~/.keys/release.pem signing_key: ./keys/release.pem",
         "./keys/release.pem"),
    ]


def samples(seed: int = 13, per_kind: int = 1) -> list[Sample]:
    """``per_kind`` samples of every kind, reproducible from ``seed``."""
    rng = random.Random(seed)
    return [make(rng) for make in MAKERS.values() for _ in range(per_kind)]


_HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{7,64}(?![0-9A-Za-z])")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def clean_corpus(roots: Iterable[Path],
                 line_texts: Callable[[object], Iterable[str]]) -> tuple[list[str], set[str]]:
    """The texts of the sessions under ``roots`` — each JSON line's (as ``line_texts`` gives
    them) and each normalized item's (with redaction as the caller has set it) — and the
    words that must survive redaction: rare facts, ids and addresses, sourceHashes, uuids
    and hex runs (git shas, hashes). Shared by the false-positive test and the scanner
    evaluation, so both judge precision on the same words."""
    from fabric_memory.memory.normalize import normalize_session
    from fabric_memory.session import iter_session_files, read_session

    from .corpus import corpus_index, corpus_json

    texts: list[str] = []
    protected: set[str] = set()
    for root in roots:
        for path in iter_session_files(root):
            for line in path.read_bytes().splitlines():
                try:
                    texts.extend(line_texts(orjson.loads(line)))
                except orjson.JSONDecodeError:
                    continue
            try:
                session = read_session(path)
            except Exception:
                continue
            protected.add(session.source_hash)
            for item in normalize_session(session).items:
                texts.append(item.text)
                protected.update((item.address, item.entry_id))
    for entry in corpus_index()["files"]:
        if entry.get("entryCount"):
            protected.update(f["fact"] for f in corpus_json(entry["truth"])["rareFacts"])
    for text in texts:
        protected.update(_HEX.findall(text))
        protected.update(_UUID.findall(text))
    return texts, protected
