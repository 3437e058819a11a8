//! Credential redaction: the one redactor for everything the host stores of what clients and
//! extensions send it — the session collector's turns and the MCP activity log's payloads
//! (`mcp.logPayloads`).
//!
//! This module owns one job: before such text or JSON is stored, every credential in it is replaced
//! by [`REDACTED`]. [`redact_text`] works on a string, [`redact_value`] on a JSON value. The text
//! around a credential is kept, and so is whatever names it — the key, the provider prefix, the auth
//! scheme, the URL's scheme and host — so that a reader still sees what was there:
//! `password=[redacted]`, `ghp_[redacted]`, `Authorization: Bearer [redacted]`,
//! `https://[redacted]@db.example.com`.
//!
//! # What counts as a credential
//!
//! 1. **Provider keys**, by their fixed prefix and a body of realistic length (the prefix is kept):
//!    `OpenAI`-style `sk-…`, `sk-proj-…`, `sk-svcacct-…`, `sk-admin-…` (also `DeepSeek`, Moonshot: a
//!    body of ≥ 20 characters with a digit and a run of ≥ 16 without `-`/`_`); Anthropic
//!    `sk-ant-api03-…`; GitHub `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` (≥ 30) and `github_pat_…`; GitLab
//!    `glpat-…`; Slack `xoxa-`/`xoxb-`/`xoxp-`/`xoxr-`/`xoxs-` (with a digit); AWS access key ids
//!    `AKIA`/`ASIA` + 16 upper-case letters or digits; Google `AIza` + 35; Stripe `sk_live_`/`sk_test_`/
//!    `rk_live_`/`rk_test_`/`whsec_`; Hugging Face `hf_…`; npm `npm_…`; `PyPI` `pypi-AgE…`; Butler's
//!    profile tokens `bmt_…` (≥ 8); Slack and Discord incoming-webhook URLs (the host and fixed path
//!    are kept).
//! 2. **JWTs**: `eyJ….eyJ….signature`, replaced whole.
//! 3. **Private keys**: everything between a `-----BEGIN … PRIVATE KEY-----` line and its
//!    `-----END … PRIVATE KEY-----` line (RSA, EC, DSA, `OPENSSH`, ENCRYPTED, PKCS#8,
//!    `PGP PRIVATE KEY BLOCK`; real or JSON-escaped line breaks) becomes one [`REDACTED`]; the two
//!    armour lines stay and name the key type. A block cut off before its END line (a truncated tool
//!    output) loses the base64 and `Header: value` lines after its BEGIN line.
//! 4. **HTTP authorization**: the value of an `Authorization:` / `Proxy-Authorization:` header (also
//!    as a JSON key), after its scheme (`Bearer`, `Basic`, `token`, `Bot`, `ApiKey`), which is kept;
//!    without a scheme the value must look like a token. `Bearer <token>` anywhere else when the
//!    token looks like one: ≥ 8 characters with a digit, or random-looking; a text that is nothing
//!    but `Bearer <token>` (a header's value on its own, as a JSON string holds it) whatever the
//!    token, or `Basic <token-like or padded base64>`. `Cookie:` / `Set-Cookie:` header values
//!    (`name=value…` to the end of the line or quote).
//! 5. **URL userinfo with a password**: `scheme://user:password@host` (any scheme: `https`,
//!    `postgres`, `redis`, `mongodb+srv`, …) becomes `scheme://[redacted]@host` — user and password,
//!    since the user often is a key too. `user@host` without a colon has no password and stays.
//! 6. **Key/value pairs** whose key names a credential: the key ends in `password`, `passwd`,
//!    `passphrase`, `pwd`, `token`, `secret`, `api_key`/`api-key`/`apikey`, `access_key`, `secret_key`,
//!    `private_key` or `credential(s)` (any case, any `[A-Za-z0-9_.-]` prefix: `db_password`,
//!    `spring.datasource.password`, `x-api-key`, `GITHUB_TOKEN`, `SecretAccessKey`, `_authToken`), or
//!    is an upper-case environment name ending in `_KEY` (`STRIPE_KEY`, not `MONKEY`), or is
//!    `密码`/`口令`/`密钥`/`私钥`/`令牌`. The separator is `=`, `:`, `：`, `:=` or `=>`, with optional
//!    spaces, quotes around the key and Markdown bold (`"password": "x"`, `PASSWORD=x`, `token: x`,
//!    `?token=x&…`, `export OPENAI_API_KEY=x`, `\"apiKey\": \"x\"`, `**Password:** x`, `密码：x`).
//!    A bare value that is itself such a key and separator is the next pair's key (`The secret:
//!    password = x` loses `x`).
//!    - Percent-encoded, once or twice (`%3D`, `%3A`, `%253D`: a URL inside a URL, a form body), the
//!      value runs to the first encoded delimiter (`%26`, `%20`, `%23`, an encoded quote or
//!      bracket, …) — or, after an encoded quote, to the same quote — and is redacted unless,
//!      decoded, it is a placeholder or keyword (`%3Ftoken%3D%24%7BTOKEN%7D` stays).
//!    - A quoted value (`"…"`, `'…'`, `\"…\"`, closed on the same line) is redacted unless it is a
//!      placeholder, a path, a keyword or prose (more than four words).
//!    - A bare value starts with a printable ASCII character (so `密码：请输入` stays) and runs to the
//!      first white space, quote, backtick, `&`, `,`, `;`, bracket, backslash or full-width
//!      punctuation (so `?token=abc&x=1` keeps `&x=1`); a final `.` is left out. It is redacted
//!      unless it is one of the kept cases below.
//! 7. **Command lines**: `curl … -u user:password` (the user is kept) and `--password value`,
//!    `--token value`, `--api-key value` (and `--*-token`, …) when the value is quoted or more than a
//!    plain word.
//!
//! # What is kept
//!
//! Words like *password*, *token* or *secret* without a separator and value ("reset your password",
//! "the token limit is 4096", "the password is hunter2"), keys that only contain the word
//! (`max_tokens: 4096`, `token_type`, `password_hash`), commit hashes, UUIDs, paths, emails,
//! `user@host` URLs, `sk-` inside words (`task-list`, `desk-lamp`), public keys and certificates,
//! Markdown, Chinese prose (`密码是什么`: no separator). A key/value pair's value is *not* a
//! credential when it is:
//! - a placeholder or reference: `$VAR`, `${VAR}`, `$(cmd)`, `${{ secrets.X }}`, `<token>`, `{token}`,
//!   `%s`, `%(token)s`, `@file`, `****` (masked) or `*token` (a dereference), `sk-...` (elided),
//!   already [`REDACTED`], empty, or (bare) without an ASCII letter or digit;
//! - a path: `/…`, `~/…`, `./…`, `../…`, `C:\…` whose parts do not look random (`PWD=/home/me`,
//!   `GOOGLE_APPLICATION_CREDENTIALS=~/key.json`);
//! - a keyword or type: `true`, `false`, `null`, `None`, `undefined`, `required`, `str`, `string`,
//!   `u64`, … or a capitalised letters-only type name (`String`, `SecretString`); a count of ≤ 6
//!   digits under a `…token` key (`max_token=4096`);
//! - code — checked outside URL query strings and only for values that do not look random: a call,
//!   index or generic (`next_token()`, `env["X"]`, `Option<String>`), an attribute path
//!   (`args.token`, `os.environ`), the key's own name (`token=token`, `self.token = token`), a
//!   `snake_case`/`camelCase`/`SCREAMING_CASE` identifier (`api_key=api_key`, `apiKey: apiKey`), a
//!   bare word after a quoted key (`{"token": tok}`), a keyword argument (`f(token=tok)`), a bare
//!   word after a spaced `=` (`let token = tok;`, Python `password = pw`), an identifier before `;`;
//! - prose: after a spaced separator, a bare word (or ≤ 3 digits) that the line goes on from
//!   ("Password: must be 8 characters", "Error: invalid token: expected 3 segments",
//!   "Secret: it's in the vault").
//!
//! So `token: abc` and `PASSWORD=hunter2` are redacted, `let token = next_token();` is not. Not
//! caught: a value on the line after its key, a password in prose without a separator, XML elements
//! (`<password>…</password>`), `.netrc` lines.
//!
//! # JSON
//!
//! In [`redact_value`], object keys are kept. What a key that names a credential holds
//! (normalised — lower case, without `_`/`-`/`.`/spaces — the key ends in `token`, `secret`,
//! `password`, `passwd`, `passphrase`, `apikey`, `authorization`, `cookie(s)`, `privatekey`,
//! `accesskey`, `secretkey`, `clientsecret`, `credential(s)` or `sessionid`; so `token_type`,
//! `password_policy` do not) is replaced whole when it is a string, an object or an array
//! (`{"api_key": {"value": …}}` becomes `{"api_key": "[redacted]"}`); so is an object or array
//! under a plural of one (`tokens`, `secrets`, `passwords`, `api_keys`, `client_secrets`, …:
//! `{"tokens": […]}`). Empty values, numbers, booleans and null are kept (`"max_tokens": 4096`);
//! every other string goes through [`redact_text`].
//!
//! # Guarantees
//!
//! Idempotent: nothing above matches [`REDACTED`] or a kept prefix followed by it, and
//! [`redact_text`] repeats itself on its output until nothing changes; [`redact_value`] leaves
//! [`REDACTED`] as it is. Linear in the input: the
//! patterns are `regex` automata compiled once (in a `LazyLock`), values are scanned to their end at
//! most once and never past a line break (private-key blocks aside), and a bounded number of rounds.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

/// What replaces a credential.
pub const REDACTED: &str = "[redacted]";

/// `text` with every credential replaced by [`REDACTED`], and how many were replaced.
///
/// Nothing to redact gives back `Cow::Borrowed(text)` and 0. Overlapping findings (a JWT inside an
/// `Authorization` header) count once. The output is redacted again until nothing changes (at most
/// four rounds): a replacement ends in `]`, which can make a word boundary in front of a
/// credential glued to the one replaced, and a second round catches it — so that redacting the
/// output again changes nothing.
#[must_use]
pub fn redact_text(text: &str) -> (Cow<'_, str>, usize) {
    let Some((mut out, mut count)) = redact_round(text) else {
        return (Cow::Borrowed(text), 0);
    };
    for _ in 1..ROUNDS {
        let Some((again, more)) = redact_round(&out) else { break };
        out = again;
        count += more;
    }
    (Cow::Owned(out), count)
}

/// At most this many rounds of [`redact_round`] in [`redact_text`]; each is linear in the text.
const ROUNDS: usize = 4;

/// One pass of every rule over `text`: the redacted text and the count, or `None` if nothing was
/// found.
fn redact_round(text: &str) -> Option<(String, usize)> {
    let mut spans = Vec::new();
    for rule in RULES.iter() {
        rule.find(text, &mut spans);
    }
    if spans.is_empty() {
        return None;
    }
    spans.sort_unstable_by_key(|span| (span.start, span.end));
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for span in &merged {
        out.push_str(&text[at..span.start]);
        out.push_str(REDACTED);
        at = span.end;
    }
    out.push_str(&text[at..]);
    Some((out, merged.len()))
}

/// Every string in `value` redacted in place, and how many credentials were replaced.
///
/// Object keys are kept. What a key that names a credential (`token`, `secret`, `password`,
/// `passwd`, `api_key`/`apiKey`, `authorization`, `cookie`, `private_key`, `access_key`,
/// `client_secret`, `credentials`, `session_id`, … — see the module docs) holds is replaced whole
/// when it is a string (unless empty or already [`REDACTED`]), an object or an array (unless
/// empty); so is an object or array under a plural of one (`tokens`, `secrets`, `api_keys`, …).
/// Numbers, booleans and null are kept; every other string goes through [`redact_text`].
pub fn redact_value(value: &mut Value) -> usize {
    match value {
        Value::String(text) => redact_string(text),
        Value::Array(items) => items.iter_mut().map(redact_value).sum(),
        Value::Object(map) => map
            .iter_mut()
            .map(|(key, item)| {
                let whole = match item {
                    Value::String(text) => names_credential(key) && !(text.trim().is_empty() || text == REDACTED),
                    Value::Array(items) => !items.is_empty() && holds_credentials(key),
                    Value::Object(fields) => !fields.is_empty() && holds_credentials(key),
                    Value::Null | Value::Bool(_) | Value::Number(_) => false,
                };
                if whole {
                    *item = Value::String(REDACTED.to_owned());
                    1
                } else {
                    redact_value(item)
                }
            })
            .sum(),
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

/// [`redact_text`] on a JSON string, in place.
fn redact_string(text: &mut String) -> usize {
    let (redacted, count) = redact_text(text);
    if let Cow::Owned(redacted) = redacted {
        *text = redacted;
    }
    count
}

/// Whether a JSON object key names a credential, so that its string value is one whole.
fn names_credential(key: &str) -> bool {
    ends_with_any(key, CREDENTIAL_ENDINGS)
}

/// Whether a JSON object key names a credential or several (`tokens`, `api_keys`), so that the
/// object or array it holds is redacted whole.
fn holds_credentials(key: &str) -> bool {
    ends_with_any(key, CREDENTIAL_ENDINGS) || ends_with_any(key, PLURAL_ENDINGS)
}

/// How a key that names a credential ends, normalised (lower case, without `_`, `-`, `.` and spaces).
const CREDENTIAL_ENDINGS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "apikey",
    "authorization",
    "cookie",
    "cookies",
    "privatekey",
    "accesskey",
    "secretkey",
    "clientsecret",
    "credential",
    "credentials",
    "sessionid",
];

/// How a key that names several credentials ends, normalised as [`CREDENTIAL_ENDINGS`].
const PLURAL_ENDINGS: &[&str] = &[
    "tokens",
    "secrets",
    "passwords",
    "passphrases",
    "apikeys",
    "privatekeys",
    "accesskeys",
    "secretkeys",
    "clientsecrets",
    "authorizations",
    "sessionids",
];

/// Whether `key`, normalised (lower case, without `_`, `-`, `.` and spaces), ends in one of `endings`.
fn ends_with_any(key: &str, endings: &[&str]) -> bool {
    let normalised: String =
        key.chars().filter(|c| !matches!(c, '_' | '-' | '.' | ' ')).map(|c| c.to_ascii_lowercase()).collect();
    endings.iter().any(|ending| normalised.ends_with(ending))
}

/// How a rule reads the credential out of a match.
enum Pick {
    /// From the matched text alone: the credential's range within it. Runs on `find_iter`, so a
    /// very long match costs no capture-group search.
    Match(fn(&str) -> Option<Range<usize>>),
    /// From the capture groups, with the whole text for context.
    Groups(fn(&Captures<'_>, &str) -> Option<Range<usize>>),
    /// A credential-naming key and its separator, followed by a value read by [`value_after`]: the
    /// search resumes after the value, so no text is scanned twice.
    KeyValue,
}

/// One pattern and how to read a credential out of its match.
struct Rule {
    re: Regex,
    pick: Pick,
}

impl Rule {
    fn new(pattern: &str, pick: Pick) -> Self {
        Self { re: Regex::new(pattern).expect("redaction patterns are valid regexes"), pick }
    }

    /// Pushes every credential span of `text` that this rule finds; the search resumes after each
    /// match, taken or not.
    fn find(&self, text: &str, spans: &mut Vec<Range<usize>>) {
        let mut push = |span: Range<usize>| {
            if is_fresh_secret(text, &span) {
                spans.push(span);
            }
        };
        match self.pick {
            Pick::Match(pick) => {
                for m in self.re.find_iter(text) {
                    if let Some(span) = pick(m.as_str()) {
                        push(m.start() + span.start..m.start() + span.end);
                    }
                }
            }
            Pick::Groups(pick) => {
                for caps in self.re.captures_iter(text) {
                    if let Some(span) = pick(&caps, text) {
                        push(span);
                    }
                }
            }
            Pick::KeyValue => {
                let mut at = 0;
                while let Some(head) = self.re.find_at(text, at) {
                    let parts = KeyHead::parse(head.as_str());
                    let value = if parts.encoded {
                        encoded_value_after(text, head.end())
                    } else {
                        value_after(text, head.end())
                    };
                    let Some(value) = value else {
                        at = head.end();
                        continue;
                    };
                    if let PairValue::Bare(bare) = &value
                        && KEY_AT_START.is_match(&text[bare.start..])
                    {
                        // The search resumes at the next key, so its value is read as one.
                        at = bare.start;
                        continue;
                    }
                    at = value.end();
                    if let Some(span) = pick_key_value(text, head.range(), &parts, value) {
                        push(span);
                    }
                }
            }
        }
    }
}

/// A span is worth replacing when it holds something other than white space and [`REDACTED`].
fn is_fresh_secret(text: &str, span: &Range<usize>) -> bool {
    text.get(span.clone()).is_some_and(|s| {
        let s = s.trim();
        !s.is_empty() && s != REDACTED
    })
}

/// Every rule, in no particular order: their spans are merged.
static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    use Pick::{Groups, Match};
    vec![
        // A private key block with its END line: everything between the armour lines (which never
        // holds another armour line, so that a truncated block does not run to the next one's END).
        Rule::new(
            r"-----BEGIN[ A-Z0-9#]*PRIVATE KEY(?: BLOCK)?-----(?:[^-]|-{1,4}[^-])*?-----END[ A-Z0-9#]*PRIVATE KEY(?: BLOCK)?-----",
            Match(pick_block),
        ),
        // A private key block cut off before its END line: the base64 and `Header: value` lines.
        Rule::new(
            r"-----BEGIN[ A-Z0-9#]*PRIVATE KEY(?: BLOCK)?-----(?:(?:\r?\n|\\r\\n|\\n)(?:[A-Za-z0-9+/=]+|[A-Za-z][A-Za-z-]*:[ \t][^\r\n\\]*)?)+",
            Match(pick_block),
        ),
        // Provider keys: the prefix up to its last `-`/`_` (or its first four characters) is kept.
        Rule::new(r"(?-u:\b)sk-ant-(?:[a-z]+[0-9]*-)?[A-Za-z0-9_-]{20,}", Match(pick_anthropic)),
        Rule::new(r"(?-u:\b)sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,}", Match(pick_openai)),
        Rule::new(r"(?-u:\b)gh[pousr]_[A-Za-z0-9]{30,}", Match(|m| Some(4..m.len()))),
        Rule::new(r"(?-u:\b)github_pat_[A-Za-z0-9_]{22,}", Match(|m| Some(11..m.len()))),
        Rule::new(r"(?-u:\b)glpat-[A-Za-z0-9_-]{20,}", Match(|m| Some(6..m.len()))),
        Rule::new(
            r"(?-u:\b)xox[abprs]-[A-Za-z0-9-]{10,}",
            Match(|m| m.bytes().any(|b| b.is_ascii_digit()).then_some(5..m.len())),
        ),
        Rule::new(r"(?-u:\b)(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)", Match(|m| Some(4..m.len()))),
        Rule::new(r"(?-u:\b)AIza[0-9A-Za-z_-]{35}", Match(|m| Some(4..m.len()))),
        Rule::new(
            r"(?-u:\b)(?:(?:sk|rk)_(?:live|test)|whsec)_[0-9A-Za-z]{16,}",
            Match(|m| m.rfind('_').map(|i| i + 1..m.len())),
        ),
        Rule::new(r"(?-u:\b)hf_[A-Za-z0-9]{30,}", Match(|m| Some(3..m.len()))),
        Rule::new(r"(?-u:\b)npm_[A-Za-z0-9]{30,}", Match(|m| Some(4..m.len()))),
        Rule::new(r"(?-u:\b)pypi-AgE[A-Za-z0-9_-]{50,}", Match(|m| Some(5..m.len()))),
        // Butler's own profile tokens.
        Rule::new(r"(?-u:\b)bmt_[A-Za-z0-9]{8,}", Match(|m| Some(4..m.len()))),
        // Incoming-webhook URLs: the path after the fixed part.
        Rule::new(
            r"(?-u:\b)hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9]+/[A-Za-z0-9]+/[A-Za-z0-9]{16,}",
            Match(pick_slack_webhook),
        ),
        Rule::new(
            r"(?-u:\b)discord(?:app)?\.com/api/webhooks/[0-9]{10,}/[A-Za-z0-9_-]{40,}",
            Match(|m| m.rfind('/').map(|i| i + 1..m.len())),
        ),
        // JWTs, whole.
        Rule::new(r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", Match(|m| Some(0..m.len()))),
        // `scheme://user:password@`: the whole userinfo.
        Rule::new(
            r#"(?i)(?-u:\b)[a-z][a-z0-9+.-]*://(?P<s>[^\s/?#@:"'`<>\[\]\\]*:(?P<pw>[^\s/?#"'`<>\[\]\\]*))@"#,
            Groups(pick_userinfo),
        ),
        Rule::new(
            r#"(?i)(?-u:\b)(?:proxy-)?authorization(?:\\?["'`])?[ \t]*[:=][ \t]*(?:\\?["'])?(?:(?P<scheme>bearer|basic|token|bot|apikey|api-key)[ \t]+)?(?P<s>[A-Za-z0-9._~+/-]+=*)"#,
            Groups(pick_authorization),
        ),
        Rule::new(r"(?i)(?-u:\b)bearer[ \t]+(?P<s>[A-Za-z0-9._~+/-]+=*)", Groups(pick_bearer)),
        // A text that is nothing but an authorization value (a header's value on its own, as a JSON
        // string holds it): the credential after the scheme.
        Rule::new(
            r"(?i)\A[ \t]*(?P<scheme>bearer|basic)[ \t]+(?P<s>[A-Za-z0-9._~+/-]+=*)[ \t]*\z",
            Groups(pick_lone_authorization),
        ),
        Rule::new(r#"(?i)(?-u:\b)(?:set-)?cookie["']?[ \t]*:[ \t]*(?P<s>[^\s"';=]+=[^\r\n"']*)"#, Groups(pick_cookie)),
        Rule::new(
            r#"(?-u:\b)curl(?-u:\b)[^\r\n]*?[ \t](?:-u|--user)(?:[ \t]+|=)["']?[^\s:"']+:(?P<s>[^\s"']+)"#,
            Groups(|caps, _| caps.name("s").filter(|m| !is_placeholder(m.as_str())).map(|m| m.range())),
        ),
        Rule::new(
            r#"(?im)(?:^|[ \t])--(?:[a-z0-9]+-)*(?:password|passwd|passphrase|token|secret|api-?key|access-key|secret-key)[ \t]+(?:"(?P<dq>[^"\r\n]*)"|'(?P<sq>[^'\r\n]*)'|(?P<uq>[^\s"'`]+))"#,
            Groups(pick_flag),
        ),
        Rule::new(KEY_SEPARATOR, Pick::KeyValue),
    ]
});

/// A credential-naming key and its separator (see the module docs, rule 6), read by [`KeyHead`];
/// the value after it is read by [`value_after`]. In `x` mode white space is ignored, also inside
/// classes: a space is `\ `.
const KEY_SEPARATOR: &str = r#"(?x)
    (?:\\?["'`])?                             # an opening quote
    (?:
        (?-u:\b)
        (?:[A-Za-z0-9_][A-Za-z0-9_.\-]*)?
        (?i-u:password|passwd|passphrase|pwd|token|secret|api[_\-]?key|access[_\-]?key|secret[_\-]?key
            |private[_\-]?key|credentials?)
      | (?-u:\b)(?:[A-Z0-9]+_)+KEY               # STRIPE_KEY
      | 密码|口令|密钥|私钥|令牌
    )
    (?:\\?["'`]|\*\*)?                         # a closing quote, or Markdown bold
    [\ \t]*
    (?::=|=>|=|:|：|%(?:25)?3[DdAa])           # also percent-encoded (once or twice): `%3D`, `%253A`
    (?:\*\*)?
    [\ \t]*
"#;

/// [`KEY_SEPARATOR`] at the start of a text: a bare value that is itself a key with its separator
/// (`The secret: password = x`) is the next pair's key, not a value.
static KEY_AT_START: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^(?:{KEY_SEPARATOR})")).expect("redaction patterns are valid regexes"));

/// Anthropic: `sk-ant-api03-` is kept.
fn pick_anthropic(m: &str) -> Option<Range<usize>> {
    let rest = m.strip_prefix("sk-ant-")?;
    let kind = rest.split_once('-').map(|(kind, body)| (kind, body.len())).filter(|(kind, body)| {
        *body >= 20
            && kind.starts_with(|c: char| c.is_ascii_lowercase())
            && kind.trim_start_matches(|c: char| c.is_ascii_lowercase()).bytes().all(|b| b.is_ascii_digit())
    });
    let prefix = 7 + kind.map_or(0, |(kind, _)| kind.len() + 1);
    Some(prefix..m.len())
}

/// `sk-`, `sk-proj-`, … are kept. The body must hold a digit and a run of ≥ 16 characters without
/// `-`/`_`, so that a long kebab-case name after `sk-` is no key. `sk-ant-` is Anthropic's rule.
fn pick_openai(m: &str) -> Option<Range<usize>> {
    let rest = m.strip_prefix("sk-")?;
    let kind = ["proj-", "svcacct-", "admin-"]
        .into_iter()
        .find(|kind| rest.strip_prefix(kind).is_some_and(|body| body.len() >= 20))
        .map_or(0, str::len);
    let body = &rest[kind..];
    let keyish = !body.starts_with("ant-")
        && body.bytes().any(|b| b.is_ascii_digit())
        && body.split(['-', '_']).any(|run| run.len() >= 16);
    keyish.then_some(3 + kind..m.len())
}

/// `hooks.slack.com/services/` is kept; the workspace, channel and secret after it are not.
fn pick_slack_webhook(m: &str) -> Option<Range<usize>> {
    let kind = m.find('/')? + 1;
    let ids = kind + m[kind..].find('/')? + 1;
    Some(ids..m.len())
}

/// Private key material after the BEGIN line (and before the END line, if any), without the
/// line breaks around it (real or JSON-escaped).
fn pick_block(m: &str) -> Option<Range<usize>> {
    const BEGIN: usize = "-----BEGIN".len();
    let start = m.get(BEGIN..)?.find("-----")? + BEGIN + "-----".len();
    let end = m.rfind("-----END").filter(|&end| end >= start).unwrap_or(m.len());
    let (mut start, mut end) = (start, end);
    loop {
        let s = &m[start..end];
        if s.starts_with("\\n") || s.starts_with("\\r") {
            start += 2;
        } else if let Some(c) = s.chars().next().filter(|c| c.is_whitespace()) {
            start += c.len_utf8();
        } else if s.ends_with("\\n") || s.ends_with("\\r") {
            end -= 2;
        } else if let Some(c) = s.chars().next_back().filter(|c| c.is_whitespace()) {
            end -= c.len_utf8();
        } else {
            break;
        }
    }
    Some(start..end)
}

/// URL userinfo, unless its password is empty or a placeholder (`postgres://u:${PGPASSWORD}@h`).
fn pick_userinfo(caps: &Captures<'_>, _text: &str) -> Option<Range<usize>> {
    let password = caps.name("pw")?.as_str();
    (!password.is_empty() && !is_placeholder(password)).then(|| caps.name("s").map(|m| m.range()))?
}

/// Auth schemes, which are kept and never taken for the credential.
const SCHEMES: &[&str] = &["bearer", "basic", "token", "bot", "apikey", "api-key"];

/// An `Authorization` header value: after a scheme anything; without one, only a token-like value.
fn pick_authorization(caps: &Captures<'_>, _text: &str) -> Option<Range<usize>> {
    let value = caps.name("s")?;
    let s = value.as_str();
    let credential = if caps.name("scheme").is_some() {
        true
    } else {
        !SCHEMES.iter().any(|scheme| s.eq_ignore_ascii_case(scheme)) && looks_like_token(s)
    };
    credential.then(|| value.range())
}

/// A text that is only `Bearer <token>` or `Basic <credentials>`: after `Bearer` anything, after
/// `Basic` (also a plain word: "Basic setup") a token-like or padded base64 value.
fn pick_lone_authorization(caps: &Captures<'_>, _text: &str) -> Option<Range<usize>> {
    let value = caps.name("s")?;
    let bearer = caps.name("scheme").is_some_and(|scheme| scheme.as_str().eq_ignore_ascii_case("bearer"));
    (bearer || looks_like_token(value.as_str()) || value.as_str().ends_with('=')).then(|| value.range())
}

/// `Bearer <token>` in prose: only a token-like value ("Bearer tokens are…" stays).
fn pick_bearer(caps: &Captures<'_>, _text: &str) -> Option<Range<usize>> {
    caps.name("s").filter(|m| looks_like_token(m.as_str())).map(|m| m.range())
}

/// A cookie header's value, without trailing white space.
fn pick_cookie(caps: &Captures<'_>, _text: &str) -> Option<Range<usize>> {
    let value = caps.name("s")?;
    let trimmed = value.as_str().trim_end();
    Some(value.start()..value.start() + trimmed.len())
}

/// `--password value`: a quoted value, or an unquoted one that is not a plain word nor a flag.
fn pick_flag(caps: &Captures<'_>, _text: &str) -> Option<Range<usize>> {
    if let Some(quoted) = caps.name("dq").or_else(|| caps.name("sq")) {
        return quoted_is_secret(quoted.as_str()).then(|| quoted.range());
    }
    let value = caps.name("uq")?;
    let s = value.as_str();
    let secret = !s.starts_with('-')
        && !is_placeholder(s)
        && !is_path(s, None)
        && s.bytes().any(|b| b.is_ascii_alphanumeric())
        && !s.bytes().all(|b| b.is_ascii_alphabetic());
    secret.then(|| value.range())
}

/// A value after a key's separator, as [`value_after`] reads it.
enum PairValue {
    /// Between quotes (`"`, `'` or a JSON-escaped `\"`, named here): the range inside them.
    Quoted(&'static str, Range<usize>),
    /// Unquoted.
    Bare(Range<usize>),
}

impl PairValue {
    /// Where the value ends, closing quote included.
    fn end(&self) -> usize {
        match self {
            Self::Quoted(quote, range) => range.end + quote.len(),
            Self::Bare(range) => range.end,
        }
    }
}

/// Characters that end an unquoted value.
fn ends_bare_value(c: char) -> bool {
    c.is_whitespace() || "\"'`&,;()[]{}<>\\，。；、（）“”‘’".contains(c)
}

/// Reads the value that starts at `at`: a quoted string closed on the same line, or a bare value
/// that starts with a printable ASCII character other than a quote, bracket, `=`, `:` or one that
/// ends a bare value. The scan stops at the closing quote or the end of the line.
fn value_after(text: &str, at: usize) -> Option<PairValue> {
    let rest = &text[at..];
    for quote in ["\\\"", "\"", "'"] {
        let Some(body) = rest.strip_prefix(quote) else { continue };
        let start = at + quote.len();
        let mut chars = body.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\n' | '\r' => return None,
                '\\' if quote == "\\\"" => {
                    return body[i..].starts_with(quote).then(|| PairValue::Quoted(quote, start..start + i));
                }
                '\\' if quote == "\"" => {
                    chars.next();
                }
                '"' if quote == "\\\"" => return None,
                _ if body[i..].starts_with(quote) => return Some(PairValue::Quoted(quote, start..start + i)),
                _ => {}
            }
        }
        return None;
    }
    let first = rest.chars().next()?;
    if !first.is_ascii_graphic() || ends_bare_value(first) || matches!(first, '=' | ':') {
        return None;
    }
    let len = rest.find(ends_bare_value).unwrap_or(rest.len());
    Some(PairValue::Bare(at..at + len))
}

/// Reads the value after a percent-encoded separator (`password%3Dhunter2%26user%3Dme`): it runs
/// to the first encoded delimiter (`%26` `&`, `%20` space, `%23` `#`, an encoded quote or bracket,
/// …; also encoded twice, `%2526`) or to what ends a bare value. After an encoded quote it runs to
/// the same quote encoded alike (`password%3D%22p%40ss%20w0rd%22`), or to what ends a bare value.
fn encoded_value_after(text: &str, at: usize) -> Option<PairValue> {
    let quote = encoded_delimiter(&text[at..]).filter(|(b, _)| matches!(b, b'"' | b'\''));
    let start = at + quote.map_or(0, |(_, len)| len);
    let body = &text.as_bytes()[start..];
    let mut end = 0;
    while let Some(&b) = body.get(end) {
        let ends = if b == b'%' {
            let delimiter = encoded_delimiter(&text[start + end..]);
            quote.map_or(delimiter.is_some(), |quote| delimiter == Some(quote))
        } else {
            !b.is_ascii() || ends_bare_value(char::from(b))
        };
        if ends {
            break;
        }
        end += 1;
    }
    (end > 0).then_some(PairValue::Bare(start..start + end))
}

/// The delimiter that `text` starts with percent-encoded (once or twice), and its encoded length.
fn encoded_delimiter(text: &str) -> Option<(u8, usize)> {
    let hex = text.strip_prefix('%')?;
    let (hex, len) = hex.strip_prefix("25").map_or((hex, 3), |hex| (hex, 5));
    let byte = u8::from_str_radix(hex.get(..2)?, 16).ok()?;
    b"\t\n\r \"#&'(),;<>?[\\]{}".contains(&byte).then_some((byte, len))
}

/// The separator `text` starts with percent-encoded (`%3D`, `%3A`, or encoded twice: `%253D`), as
/// the plain separator, and its encoded length.
fn encoded_separator(text: &str) -> Option<(&'static str, usize)> {
    let hex = text.strip_prefix('%')?;
    let (hex, len) = hex.strip_prefix("25").map_or((hex, 3), |hex| (hex, 5));
    match hex.get(..2)? {
        "3D" | "3d" => Some(("=", len)),
        "3A" | "3a" => Some((":", len)),
        _ => None,
    }
}

/// The parts of a [`KEY_SEPARATOR`] match.
struct KeyHead<'t> {
    open_quote: Option<&'t str>,
    key: &'t str,
    /// A quote right after the key; Markdown bold (`**Password**:`) is none.
    close_quote: Option<&'t str>,
    sep: &'t str,
    /// The separator is percent-encoded (`password%3D…`).
    encoded: bool,
    /// White space around the separator.
    spaced: bool,
}

impl<'t> KeyHead<'t> {
    fn parse(head: &'t str) -> Self {
        fn quote(s: &str) -> (Option<&str>, &str) {
            ["\\\"", "\"", "'", "`"]
                .into_iter()
                .find_map(|quote| s.strip_prefix(quote).map(|rest| (Some(quote), rest)))
                .unwrap_or((None, s))
        }
        let (open_quote, rest) = quote(head);
        let key_len = rest.find(['\\', '"', '\'', '`', '*', ' ', '\t', '=', ':', '：', '%']).unwrap_or(rest.len());
        let (key, rest) = rest.split_at(key_len);
        let (close_quote, rest) = rest.strip_prefix("**").map_or_else(|| quote(rest), |rest| (None, rest));
        let separator = rest.trim_start_matches([' ', '\t']);
        let (sep, sep_len, encoded) = encoded_separator(separator).map_or_else(
            || {
                let sep =
                    [":=", "=>", "=", ":", "："].into_iter().find(|sep| separator.starts_with(sep)).unwrap_or("=");
                (sep, sep.len(), false)
            },
            |(sep, len)| (sep, len, true),
        );
        let spaced = separator.len() != rest.len() || separator.get(sep_len..).is_some_and(|s| s.contains([' ', '\t']));
        Self { open_quote, key, close_quote, sep, encoded, spaced }
    }
}

/// A key/value pair (rule 6): the value's range when it is a credential.
fn pick_key_value(text: &str, head: Range<usize>, parts: &KeyHead<'_>, value: PairValue) -> Option<Range<usize>> {
    let value = match value {
        PairValue::Quoted(quote, value) => {
            // `print("token: ", token)`: the key sits in a string, and this quote closes it.
            if parts.close_quote.is_none() && parts.open_quote == Some(quote) {
                return None;
            }
            return quoted_is_secret(&text[value.clone()]).then_some(value);
        }
        PairValue::Bare(value) if parts.encoded => {
            return encoded_is_secret(&text[value.clone()]).then_some(value);
        }
        PairValue::Bare(value) => value,
    };
    let pair = Pair {
        key: parts.key,
        value: &text[value.clone()],
        rest: &text[value.end..],
        sep: parts.sep,
        spaced: parts.spaced,
        key_quoted: parts.close_quote.is_some(),
        in_query: text[..head.start].ends_with(['?', '&', '#', ';']),
    };
    let kept = pair.secret_len()?;
    Some(value.start..value.start + kept)
}

/// The context of an unquoted value.
struct Pair<'t> {
    key: &'t str,
    value: &'t str,
    /// The text after the value.
    rest: &'t str,
    sep: &'t str,
    /// White space around the separator (`token: x`, `token = x`), as in prose, YAML and code.
    spaced: bool,
    /// The key was quoted (`"token": x`): JSON or code, where a bare word is a variable.
    key_quoted: bool,
    /// The key is a URL query parameter (`?token=x`, `&token=x`): code rules do not apply.
    in_query: bool,
}

impl Pair<'_> {
    /// The character right after the value.
    fn next(&self) -> Option<char> {
        self.rest.chars().next()
    }

    /// How many bytes of the value are a credential (a final `.` ends the sentence, not the value), or
    /// `None` when the value is not a credential.
    fn secret_len(&self) -> Option<usize> {
        let value = self.value.trim_end_matches('.');
        let value = if value.is_empty() { self.value } else { value };
        let not_secret = is_placeholder(self.value)
            || is_placeholder(value)
            || value.starts_with('@')
            || !value.bytes().any(|b| b.is_ascii_alphanumeric())
            || (value.starts_with('#') && self.spaced)
            || is_path(value, self.next())
            || is_keyword(value)
            || self.is_count(value)
            || (!self.in_query && self.is_code(value))
            || self.is_prose(value);
        (!not_secret).then_some(value.len())
    }

    /// `max_token=4096`: a number of ≤ 6 digits under a `token` key is a count, not a token.
    fn is_count(&self, value: &str) -> bool {
        self.key.to_ascii_lowercase().ends_with("token")
            && value.len() <= 6
            && value.bytes().all(|b| b.is_ascii_digit())
    }

    /// Whether the value reads as code rather than a literal (see the module docs).
    fn is_code(&self, value: &str) -> bool {
        if matches!(self.next(), Some('(' | '[' | '<')) && self.value.len() == value.len() {
            return true;
        }
        if looks_random(value) {
            return false;
        }
        if is_attribute_path(value) {
            return true;
        }
        if !is_identifier(value) {
            return false;
        }
        let word = value.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_');
        is_type_name(value)
            || is_code_identifier(value)
            || names_itself(self.key, value)
            || (word && self.key_quoted)
            || (word && self.sep == "=" && !self.spaced && matches!(self.next(), Some(')' | ',')))
            || (word && self.spaced && self.sep != ":" && self.sep != "：")
            || (self.spaced && self.next() == Some(';'))
    }

    /// "Password: must be…", "Token: it's…": a bare word (or ≤ 3 digits) after a spaced separator
    /// that the line goes on from.
    fn is_prose(&self, value: &str) -> bool {
        let short = value.bytes().all(|b| b.is_ascii_alphabetic())
            || (value.len() <= 3 && value.bytes().all(|b| b.is_ascii_digit()));
        if !self.spaced || !short || value.len() != self.value.len() {
            return false;
        }
        let mut rest = self.rest.chars();
        match rest.next() {
            Some('\'') => rest.next().is_some_and(char::is_alphabetic),
            Some(' ' | '\t') => rest.find(|c| !matches!(c, ' ' | '\t')).is_some_and(char::is_alphanumeric),
            _ => false,
        }
    }
}

/// Whether a percent-encoded value (after `%3D`) is a credential: decoded (twice, for a value
/// encoded twice), it is not a placeholder, a keyword, nor without an ASCII letter or digit.
fn encoded_is_secret(value: &str) -> bool {
    let once = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
    let decoded = percent_encoding::percent_decode_str(&once).decode_utf8_lossy();
    let decoded = decoded.trim_matches(['"', '\'']);
    !(is_placeholder(decoded) || is_keyword(decoded) || !decoded.bytes().any(|b| b.is_ascii_alphanumeric()))
}

/// Whether a quoted value is a credential: not empty, not a placeholder, not a path, not prose.
fn quoted_is_secret(value: &str) -> bool {
    let trimmed = value.trim();
    !(trimmed.is_empty()
        || is_placeholder(trimmed)
        || is_path(trimmed, None)
        || is_keyword(trimmed)
        || trimmed.split_whitespace().count() > 4)
}

/// A reference to a secret or a stand-in for one, not the secret itself: `$VAR`, `${VAR}`, `<token>`,
/// `{token}`, `%s`, `%(token)s`, `****` (masked; also `*token`, a dereference), `sk-...` (elided),
/// [`REDACTED`].
fn is_placeholder(value: &str) -> bool {
    let bytes = value.as_bytes();
    match bytes.first() {
        None | Some(b'$' | b'<' | b'{' | b'*') => true,
        Some(b'%') => bytes.get(1).is_some_and(|b| b.is_ascii_alphabetic() || *b == b'('),
        Some(_) => {
            value.starts_with(REDACTED)
                || value.ends_with("...")
                || value.ends_with('…')
                || value.chars().all(|c| matches!(c, '•' | '●'))
        }
    }
}

/// A file system path whose parts do not look random (`/home/me`, `~/.ssh/id_ed25519`, `C:\x`).
/// `next` is the character after an unquoted value (which stops at a backslash).
fn is_path(value: &str, next: Option<char>) -> bool {
    let bytes = value.as_bytes();
    let drive = bytes.len() >= 2
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && (bytes.get(2).is_some_and(|b| matches!(b, b'/' | b'\\')) || (bytes.len() == 2 && next == Some('\\')));
    let rooted = value.starts_with("~/")
        || value.starts_with("./")
        || value.starts_with("../")
        || value == "/"
        || (value.starts_with('/')
            && bytes.get(1).is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_')));
    (drive || rooted) && value.split(['/', '\\']).all(|part| !looks_random(part))
}

/// Literals and type names that are never a credential.
fn is_keyword(value: &str) -> bool {
    const KEYWORDS: &str = "true false null none nil undefined yes no on off required optional empty default unset \
        hidden masked redacted str string bool boolean int integer number float double any unknown object bytes void \
        char u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64";
    KEYWORDS.split_whitespace().any(|keyword| value.eq_ignore_ascii_case(keyword))
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_identifier(value: &str) -> bool {
    let mut bytes = value.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `os.environ`, `self.token`, `config::Token`, `req->token`: ≥ 2 letter-only identifiers.
fn is_attribute_path(value: &str) -> bool {
    let parts: Vec<&str> = value.split(['.', ':', '-', '>']).collect();
    let separators_ok =
        value.split(|c: char| c.is_ascii_alphabetic() || c == '_').all(|sep| matches!(sep, "" | "." | "::" | "->"));
    parts.iter().filter(|part| !part.is_empty()).count() >= 2
        && separators_ok
        && parts.iter().all(|part| part.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_'))
        && !value.ends_with(['.', ':', '-', '>'])
}

/// A capitalised type name: `String`, `SecretString`, `Token` (letters only: `Hunter2` is no type).
fn is_type_name(value: &str) -> bool {
    value.starts_with(|c: char| c.is_ascii_uppercase())
        && value.bytes().any(|b| b.is_ascii_lowercase())
        && value.bytes().all(|b| b.is_ascii_alphabetic())
}

/// The value is the key's own name, or its last part: `token=token`, `self.token = token`,
/// `auth_token: token`.
fn names_itself(key: &str, value: &str) -> bool {
    let (key, value) = (key.to_ascii_lowercase(), value.to_ascii_lowercase());
    key == value || key.strip_suffix(&value).is_some_and(|head| head.ends_with(['.', '_', '-']))
}

/// `snake_case`, `camelCase` or `SCREAMING_CASE`: an identifier with `_` or a lower-to-upper step.
fn is_code_identifier(value: &str) -> bool {
    value.contains('_') || value.as_bytes().windows(2).any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
}

/// Whether a value reads like a token: ≥ 8 characters with a digit, or random-looking.
fn looks_like_token(value: &str) -> bool {
    value.len() >= 8 && (value.bytes().any(|b| b.is_ascii_digit()) || looks_random(value))
}

/// Whether `value` reads like machine-made randomness rather than a name: ≥ 8 characters whose
/// "words" (split at `_`, `-`, `.`, lower-to-upper steps and letter/digit steps) average under three
/// characters — `xK9pQ2mR`, a hex digest — where names have longer words (`SecretString`, `api_key`).
fn looks_random(value: &str) -> bool {
    if value.len() < 8 || !value.is_ascii() {
        return false;
    }
    let (mut words, mut letters) = (0usize, 0usize);
    let mut previous: Option<u8> = None;
    for b in value.bytes() {
        if !b.is_ascii_alphanumeric() {
            previous = None;
            continue;
        }
        letters += 1;
        let starts_word = previous.is_none_or(|p| {
            (p.is_ascii_lowercase() && b.is_ascii_uppercase()) || (p.is_ascii_digit() != b.is_ascii_digit())
        });
        if starts_word {
            words += 1;
        }
        previous = Some(b);
    }
    words > 0 && letters < words * 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Fake keys of realistic shape and length. Provider prefixes and armour lines are split with
    // `concat!` so that secret scanners do not take this file for a leak.

    /// (input, expected output). The expected count is the number of `[redacted]` added.
    const POSITIVES: &[(&str, &str)] = &[
        // OpenAI, DeepSeek, Moonshot: `sk-`.
        (
            concat!("export OPENAI_API_KEY=sk", "-u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dKLzdocJ2isAj"),
            "export OPENAI_API_KEY=[redacted]",
        ),
        (
            concat!("My key is sk", "-u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dKLzdocJ2isAj, is it valid?"),
            "My key is sk-[redacted], is it valid?",
        ),
        (
            concat!(
                "Using sk-proj",
                "-pNxnyVmihA-2O76UMFxFkM-R5Kjp1vRt_1fjORS-6ilI8ihN5KXSc7Tvo-hBKqFYY-kv5ZJr3JT3BlbkFJ1TWDtkwtDDb_",
                "xHKas1VOqg6YYZYn9ZhyiA4uoRgnatmUdjAWtGSU8po_799NksnRH9ucAUsdMl now"
            ),
            "Using sk-proj-[redacted] now",
        ),
        (concat!("DEEPSEEK_API_KEY=\"sk", "-8b5b7a767c76fb008f86bebb2737f6a6\""), "DEEPSEEK_API_KEY=\"[redacted]\""),
        (
            concat!(
                "client = OpenAI(api_key=\"sk",
                "-EN5N1aE6PwZPf1Qh6yYTWmE4lBYOvfZ8UzDzV8fUkkibjL5D\", base_url=\"https://api.moonshot.cn/v1\")"
            ),
            "client = OpenAI(api_key=\"[redacted]\", base_url=\"https://api.moonshot.cn/v1\")",
        ),
        // Anthropic.
        (
            concat!(
                "x-api-key: sk-ant",
                "-api03-s8Stqcbnr3yBdGBLEPH1qhT61qtc4xatws8phP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY_",
                "uCu3ZR1zTOlAA"
            ),
            "x-api-key: [redacted]",
        ),
        (
            concat!(
                "The key sk-ant",
                "-api03-s8Stqcbnr3yBdGBLEPH1qhT61qtc4xatws8phP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY_",
                "uCu3ZR1zTOlAA was revoked."
            ),
            "The key sk-ant-api03-[redacted] was revoked.",
        ),
        // GitHub.
        (
            concat!("git clone https://gh", "p_UxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B2@github.com/acme/app.git"),
            "git clone https://ghp_[redacted]@github.com/acme/app.git",
        ),
        (concat!("oauth: gh", "o_6R08qzjI6GKFSufrdZSlB5er8bOfZqfM2oeq"), "oauth: gho_[redacted]"),
        (concat!("user-to-server gh", "u_3hDavJA76rNicHTp8hkqdlm7tOtHWnsCGRlr"), "user-to-server ghu_[redacted]"),
        (
            concat!("installation token gh", "s_wZbqcabUGJmGEp7CgQ0PBQFI14zGtSnovm14."),
            "installation token ghs_[redacted].",
        ),
        (concat!("refresh with gh", "r_TUOizwd1iaeOV4qBkdfQ1y3GQsMpSscDlkrC"), "refresh with ghr_[redacted]"),
        (
            concat!(
                "GH_TOKEN=github",
                "_pat_aqx9vJupc94tnwlavyfErG_PmpGXafq0fjzLczbttOofL9H2WjQ5TY4MyWuUFjsUNPjc01T5GOBUSZGi6H gh pr list"
            ),
            "GH_TOKEN=[redacted] gh pr list",
        ),
        (
            concat!(
                "fine-grained: github",
                "_pat_aqx9vJupc94tnwlavyfErG_PmpGXafq0fjzLczbttOofL9H2WjQ5TY4MyWuUFjsUNPjc01T5GOBUSZGi6H"
            ),
            "fine-grained: github_pat_[redacted]",
        ),
        // GitLab.
        (
            concat!(
                "curl --header \"PRIVATE-TOKEN: glpat",
                "-cDkdfrUnW5gcF_Ha6ili\" https://gitlab.example.com/api/v4/projects"
            ),
            "curl --header \"PRIVATE-TOKEN: [redacted]\" https://gitlab.example.com/api/v4/projects",
        ),
        (concat!("personal access token glpat", "-cDkdfrUnW5gcF_Ha6ili"), "personal access token glpat-[redacted]"),
        // Slack.
        (
            concat!("SLACK_BOT_TOKEN=xox", "b-741433377617-4093192544992-aEdFrRgSnRFsTHsDDDXh5Jmt"),
            "SLACK_BOT_TOKEN=[redacted]",
        ),
        (
            concat!("use xox", "p-170471874633-191284529841-5377602077642-dbca3a0aac36098b2cc2bd818319478d here"),
            "use xoxp-[redacted] here",
        ),
        // AWS.
        (concat!("aws_access_key_id = AKIA", "6UMX1BZ99NFD02IS"), "aws_access_key_id = AKIA[redacted]"),
        ("aws_secret_access_key = YpvujA+C5Q52ryFlwRlOEVHzc0X0AWIRh+JUqBlI", "aws_secret_access_key = [redacted]"),
        (
            concat!(
                "{\"AccessKeyId\": \"ASIA",
                "5D9IK40VSTQQZPT4\", \"SecretAccessKey\": \"YpvujA+C5Q52ryFlwRlOEVHzc0X0AWIRh+JUqBlI\", ",
                "\"SessionToken\": \"IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ\"}"
            ),
            "{\"AccessKeyId\": \"ASIA[redacted]\", \"SecretAccessKey\": \"[redacted]\", \"SessionToken\": \"[redacted]\"}",
        ),
        (
            concat!(
                "AWS_ACCESS_KEY_ID=AKIA",
                "6UMX1BZ99NFD02IS AWS_SECRET_ACCESS_KEY=YpvujA+C5Q52ryFlwRlOEVHzc0X0AWIRh+JUqBlI"
            ),
            "AWS_ACCESS_KEY_ID=AKIA[redacted] AWS_SECRET_ACCESS_KEY=[redacted]",
        ),
        // Google.
        (
            concat!(
                "https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key=AIza",
                "FXZ53Ncqe28_ajY75FnCttn6kfaqDeMqG3o"
            ),
            "https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key=AIza[redacted]",
        ),
        // Stripe.
        (
            concat!(
                "Stripe.api_key = 'sk_",
                "live_getH8LmyqoYMaaItDr9uP14pEHpJpb9ATPtdbmF4RPAfqoQB7xoFcSvTAxRzmaZsV2GenFmtX0moDoqW4sg8NFNl5oFA6Qd8Mj7'"
            ),
            "Stripe.api_key = '[redacted]'",
        ),
        (
            concat!(
                "restricted rk_",
                "live_zdnbMjAdTdlzC5T4uUhf7kvmlP7HVDctQUy1xvCkgafrfwA94hJ9WnywX0t0ZBfdTEmxI6CmuxV5EbOApZOXzcycDeZ6dqmVe5M"
            ),
            "restricted rk_live_[redacted]",
        ),
        (
            concat!(
                "curl https://api.stripe.com/v1/charges -u sk_",
                "test_vxrv99NcqVTSu7rtaUWM6ZO88eb0ogET9D9XyYq6B0Fi7FlaZ7Vt0SXjMpu3uDxYYMfGmzWkpAePcEJIukB4geqNfngAFTCloiA:"
            ),
            "curl https://api.stripe.com/v1/charges -u sk_test_[redacted]:",
        ),
        (
            concat!("STRIPE_WEBHOOK_SECRET=whsec", "_DN5RpVI2XQWhX1ssrKrxqVqmCplppjs4"),
            "STRIPE_WEBHOOK_SECRET=[redacted]",
        ),
        // Hugging Face, npm, PyPI.
        (
            concat!("huggingface-cli login --token hf", "_LmuezqpGHoPZgPDcgaEoCxcsohdmMLmexG"),
            "huggingface-cli login --token [redacted]",
        ),
        (
            concat!("model downloaded with hf", "_LmuezqpGHoPZgPDcgaEoCxcsohdmMLmexG"),
            "model downloaded with hf_[redacted]",
        ),
        (
            concat!("//registry.npmjs.org/:_authToken=npm", "_3lCMqXXQ8agOMTNwncxvjcnqcMUP6n0a0uAR"),
            "//registry.npmjs.org/:_authToken=[redacted]",
        ),
        (concat!("publish token npm", "_3lCMqXXQ8agOMTNwncxvjcnqcMUP6n0a0uAR"), "publish token npm_[redacted]"),
        (
            concat!(
                "twine upload -p pypi",
                "-AgEIcHlwaS5vcmc88ad3DNBYjvsedonuSsddfrfifiUziXnFAAoeelK9mqmALOR2HcSGKgVP8Kd dist/*"
            ),
            "twine upload -p pypi-[redacted] dist/*",
        ),
        // JWTs.
        (
            "id_token: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
            "id_token: [redacted]",
        ),
        (
            "the cookie held eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c (expired)",
            "the cookie held [redacted] (expired)",
        ),
        // Authorization.
        ("Authorization: Bearer xyz", "Authorization: Bearer [redacted]"),
        (
            "curl -H \"Authorization: Bearer xEuhnbzs0z-1wNiMg9aW37k5wCnHDepQHgI3HLBk\" https://api.example.com/me",
            "curl -H \"Authorization: Bearer [redacted]\" https://api.example.com/me",
        ),
        ("Authorization: Basic dXNlcjpodW50ZXIy", "Authorization: Basic [redacted]"),
        (
            concat!("authorization: token gh", "p_UxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B2"),
            "authorization: token [redacted]",
        ),
        (
            "headers = {\"Authorization\": \"Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U\"}",
            "headers = {\"Authorization\": \"Bearer [redacted]\"}",
        ),
        (
            concat!("Authorization: sk", "-u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dKLzdocJ2isAj"),
            "Authorization: [redacted]",
        ),
        ("Then pass Bearer abc123def456ghi789 with every request.", "Then pass Bearer [redacted] with every request."),
        ("Cookie: session_id=8f14e45fceea167a5a36dedd4bea2543; theme=dark", "Cookie: [redacted]"),
        // Private keys.
        (
            concat!(
                "-----BEGIN RSA PRIVATE",
                " KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MbEN7Ql7b1S5FvJR\n",
                "bgsYlVvsSKuvinX+zMqf9OgXluCZz8xBfZuXTptFyfePpX6N1NF2XV54wca+7E56\n",
                "-----END RSA PRIVATE KEY-----"
            ),
            concat!("-----BEGIN RSA PRIVATE", " KEY-----\n[redacted]\n-----END RSA PRIVATE KEY-----"),
        ),
        (
            concat!(
                "key.pem:\n-----BEGIN EC PRIVATE",
                " KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oc0fK7Gf3DdhoAoGCCqGSM49\n",
                "AwEHoUQDQgAE7QmCFqbQq6BlZ6jBnJkW7N2tY5q3xM0p9Dq1xGv0W1eR9w==\n-----END EC PRIVATE KEY-----\ndone"
            ),
            concat!("key.pem:\n-----BEGIN EC PRIVATE", " KEY-----\n[redacted]\n-----END EC PRIVATE KEY-----\ndone"),
        ),
        (
            concat!(
                "$ cat ~/.ssh/id_ed25519\n-----BEGIN OPENSSH PRIVATE",
                " KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n",
                "QyNTUxOQAAACDq1v7N3cZk2kQG5m3fQk0+7C0w8nY5eKXb1k2yq9z6vQAAAJgq3z8Wqt8/\n",
                "-----END OPENSSH PRIVATE KEY-----\n"
            ),
            concat!(
                "$ cat ~/.ssh/id_ed25519\n-----BEGIN OPENSSH PRIVATE",
                " KEY-----\n[redacted]\n-----END OPENSSH PRIVATE KEY-----\n"
            ),
        ),
        (
            concat!(
                "-----BEGIN PGP PRIVATE",
                " KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF0e3ZkBCADJ8K9vQ2m7hZ5x3kq0pP4yL1n6rT8wE2uI9oA5sD3fG7hJ1kL\n",
                "w8ZniqT3Ul4ffqkOkgWrdioyq+KvCiSGuPJ6sG9AHEOVezxZuJPWvHogU5nGYVHW\n=x7Qd\n",
                "-----END PGP PRIVATE KEY BLOCK-----"
            ),
            concat!("-----BEGIN PGP PRIVATE", " KEY BLOCK-----\n[redacted]\n-----END PGP PRIVATE KEY BLOCK-----"),
        ),
        (
            concat!(
                "-----BEGIN PRIVATE",
                " KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n",
                "VsUQk4DwgLGNOaeCtL31Ugq+DfcgaTMnTC0MrAU8urbFt5misIZHbhS4/FvafhdZ\n\n[output truncated]"
            ),
            concat!("-----BEGIN PRIVATE", " KEY-----\n[redacted]\n\n[output truncated]"),
        ),
        (
            concat!(
                "{\"content\": \"-----BEGIN RSA PRIVATE",
                " KEY-----\\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MbEN7Ql7b1S5FvJR\\n",
                "-----END RSA PRIVATE KEY-----\\n\"}"
            ),
            concat!(
                "{\"content\": \"-----BEGIN RSA PRIVATE",
                " KEY-----\\n[redacted]\\n-----END RSA PRIVATE KEY-----\\n\"}"
            ),
        ),
        // Key/value pairs.
        ("password=hunter2", "password=[redacted]"),
        ("PASSWORD=hunter2", "PASSWORD=[redacted]"),
        ("{\"password\": \"hunter2\"}", "{\"password\": \"[redacted]\"}"),
        ("token: abc", "token: [redacted]"),
        (
            "GET https://api.example.com/v1/items?token=abc&x=1",
            "GET https://api.example.com/v1/items?token=[redacted]&x=1",
        ),
        ("secret=s3cr3t-Value!", "secret=[redacted]"),
        ("api_key=abc123def456", "api_key=[redacted]"),
        ("apikey: 'AbC123xYz'", "apikey: '[redacted]'"),
        ("access_token=ya29.a0AfH6SMBx3kQ9vL2pR7tY1uW4zE8nC5jF0hG6dS", "access_token=[redacted]"),
        ("passwd=Tr0ub4dor-3", "passwd=[redacted]"),
        ("pwd=Sup3rS3cret", "pwd=[redacted]"),
        ("export GITHUB_TOKEN=abc123def456ghi789", "export GITHUB_TOKEN=[redacted]"),
        ("DB_PASSWORD: \"correct horse battery staple\"", "DB_PASSWORD: \"[redacted]\""),
        ("ENCRYPTION_KEY=0123456789abcdef0123456789abcdef", "ENCRYPTION_KEY=[redacted]"),
        ("client_secret=GOCSPX-abcDEF123_xyz", "client_secret=[redacted]"),
        ("spring.datasource.password=Hunter2!", "spring.datasource.password=[redacted]"),
        ("password := \"hunter2\"", "password := \"[redacted]\""),
        ("'password' => 'hunter2',", "'password' => '[redacted]',"),
        ("**Password:** hunter2", "**Password:** [redacted]"),
        ("Use token=abc123.", "Use token=[redacted]."),
        ("private_key: \"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\"", "private_key: \"[redacted]\""),
        ("{\\\"apiKey\\\": \\\"AbCdEf123456\\\"}", "{\\\"apiKey\\\": \\\"[redacted]\\\"}"),
        (
            "Server=db;Database=app;User Id=sa;Password=P@ssw0rd;",
            "Server=db;Database=app;User Id=sa;Password=[redacted];",
        ),
        ("password: hunter2 # change me", "password: [redacted] # change me"),
        ("print(\"token: \" + t, \"password=hunter2\")", "print(\"token: \" + t, \"password=[redacted]\")"),
        ("密码: hunter2", "密码: [redacted]"),
        ("密码：Hunter2024，请妥善保管", "密码：[redacted]，请妥善保管"),
        ("密码：123456", "密码：[redacted]"),
        (
            "UPDATE users SET password = 'hunter2' WHERE id = 7;",
            "UPDATE users SET password = '[redacted]' WHERE id = 7;",
        ),
        ("data:\n  password: cGFzc3dvcmQxMjM=\n", "data:\n  password: [redacted]\n"),
        (
            "jdbc:postgresql://db:5432/app?user=app&password=s3cr3t",
            "jdbc:postgresql://db:5432/app?user=app&password=[redacted]",
        ),
        // URLs with a password.
        ("https://user:pass@host/path", "https://[redacted]@host/path"),
        (
            "DATABASE_URL=postgres://app:s3cr3t@db.example.com:5432/prod",
            "DATABASE_URL=postgres://[redacted]@db.example.com:5432/prod",
        ),
        ("redis://:p4ssw0rd@cache.internal:6379/0", "redis://[redacted]@cache.internal:6379/0"),
        (
            "mongodb+srv://admin:Xk9pQ2mR@cluster0.ab1cd.mongodb.net/?retryWrites=true",
            "mongodb+srv://[redacted]@cluster0.ab1cd.mongodb.net/?retryWrites=true",
        ),
        ("mysql://root:hunter2@localhost:3306/app", "mysql://[redacted]@localhost:3306/app"),
        // Command lines.
        (
            "curl -u admin:hunter2 https://jenkins.example.com/api/json",
            "curl -u admin:[redacted] https://jenkins.example.com/api/json",
        ),
        (
            "docker login --password 'p@ss w0rd' registry.example.com",
            "docker login --password '[redacted]' registry.example.com",
        ),
        // Butler's profile tokens.
        (
            concat!("my butler token is bmt", "_9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"),
            "my butler token is bmt_[redacted]",
        ),
        // A key whose value is the next pair's key: the next pair's value goes.
        ("The secret: password = hunter2", "The secret: password = [redacted]"),
        ("token: api_key=AbC123xYz", "token: api_key=[redacted]"),
        // Percent-encoded pairs (in a URL inside a URL, a form body), also encoded twice.
        (
            "GET /login?next=%2Fcb%3Faccess_token%3Dya29a0AfH6SMBx3kQ9vL2pR7tY1%26state%3Dxyz",
            "GET /login?next=%2Fcb%3Faccess_token%3D[redacted]%26state%3Dxyz",
        ),
        (
            "body: user%3Dalice%26password%3Dhunter2%26remember%3D1",
            "body: user%3Dalice%26password%3D[redacted]%26remember%3D1",
        ),
        ("q=password%3D%22p%40ss%20w0rd%22&x=1", "q=password%3D%22[redacted]%22&x=1"),
        (
            "redirect=%252Fcb%253Ftoken%253DAbC123xYz%2526x%253D1",
            "redirect=%252Fcb%253Ftoken%253D[redacted]%2526x%253D1",
        ),
        ("api_key%3Aabc123def456 sent", "api_key%3A[redacted] sent"),
    ];

    /// Text that must come back unchanged.
    const NEGATIVES: &[&str] = &[
        "Please reset your password from the settings page.",
        "The token limit is 4096 for this model.",
        "\"max_tokens\": 4096, \"temperature\": 0.2",
        "usage: {\"input_tokens\": 1200, \"output_tokens\": 350}",
        "token_count: 512",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b\nAuthor: Alice <alice@example.com>",
        "request id 550e8400-e29b-41d4-a716-446655440000",
        "Edit /home/alice/.ssh/config and src/auth/token.rs, then C:\\Users\\alice\\tokens.txt",
        "Open the task-list and the desk-lamp-controller-2024-final-version-12345.",
        "See https://example.com/a@b and ssh://git@github.com/org/repo.git or git@github.com:org/repo.git",
        "Contact alice@example.com for access.",
        "let token = next_token();",
        "fn new(token: String, password: &str, secret: Option<String>) -> Self {",
        "def login(username: str, password: str) -> bool:",
        "client = OpenAI(api_key=api_key)",
        "token = os.environ[\"GITHUB_TOKEN\"]",
        "export GITHUB_TOKEN=$(gh auth token)",
        "curl -H \"Authorization: Bearer $TOKEN\" https://api.github.com/user",
        "password = getpass.getpass(\"Password: \")",
        "## Password reset\n\nUse **Forgot password?** to get a reset link by email.",
        "密码是什么？我忘记了密码。",
        "请输入密码：",
        "这个模型的 token 上限是 4096。",
        "PWD=/home/alice/projects/butler\nOLDPWD=/home/alice",
        "Bearer tokens are described in RFC 6750.",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        "{\"password\": \"\"}",
        "password: ********",
        "if token == \"\" { return Err(Error::Missing); }",
        "const headers = { Authorization: `Bearer ${token}` };",
        "self.token = token",
        "Password: must be at least 12 characters.",
        "Error: invalid token: expected 3 segments",
        "print(f\"token={token}\")",
        "log.info(\"token=%s\", token)",
        concat!(
            "-----BEGIN PUBLIC",
            " KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE7QmCFqbQq6BlZ6jBnJkW7N2tY5q3\n-----END PUBLIC KEY-----"
        ),
        "{\"access_token_expires_in\": 3600, \"token_type\": \"Bearer\"}",
        "secret: true",
        "git commit -m \"Rotate the API key\"",
        "| Name | Type |\n|------|------|\n| token | string |",
        "mongodb+srv://<username>:<password>@cluster0.mongodb.net/test",
        "api_key: Optional[str] = None",
        "interface Session { token: string; expiresAt: number }",
        "docker run -u 1000:1000 -e PASSWORD_FILE=/run/secrets/db app",
        "connect(host, token=tok, retries=3)",
        "const body = {\"token\": token, \"password\": pw};",
        "let password = input;",
        "tokens.map(token => token.trim())",
        "Secret: it's stored in the vault.",
        "AKIA prefix marks an access key id; sk- marks OpenAI keys.",
        "Use the --token flag or set --password-stdin.",
        "postgres://app@db.example.com:5432/prod",
        "api_key = settings.OPENAI_API_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS=~/.config/gcloud/application_default_credentials.json",
        "Config { token: *token, secret: secret.clone() }",
        "generate(prompt, max_token=4096, temperature=0.7)",
        "const session = { token: await getToken(), apiKey: process.env.OPENAI_API_KEY };",
        "const schema = z.object({ password: z.string().min(8) });",
        "secret = secrets.token_hex(16)",
        "$password = $_POST['password'];",
        "<input type=\"password\" name=\"password\" autocomplete=\"current-password\">",
        "SELECT * FROM sessions WHERE token = $1 AND expires_at > now()",
        "密码: 8 位以上，包含数字",
        "- `token`: the token used to authenticate",
        "llm --max-tokens 4096 --token-limit 10",
        "export OPENAI_API_KEY=sk-...",
        "Authorization: Digest username=\"bob\", realm=\"api\"",
        "next=%2Fcb%3Ftoken%3D%24%7BTOKEN%7D%26x%3D1",
        "https%3A%2F%2Fexample.com%2Fsearch%3Fq%3Dpassword%2Breset",
        "bmt_name and bmt_ are no tokens",
        "Basic setup",
    ];

    fn added_redactions(input: &str, expected: &str) -> usize {
        expected.matches(REDACTED).count() - input.matches(REDACTED).count()
    }

    #[test]
    fn corpus_sizes() {
        assert!(POSITIVES.len() >= 40, "{} positives", POSITIVES.len());
        assert!(NEGATIVES.len() >= 25, "{} negatives", NEGATIVES.len());
    }

    #[test]
    fn positives_are_redacted() {
        let mut failures = Vec::new();
        for (input, expected) in POSITIVES {
            let (out, count) = redact_text(input);
            if out != *expected || count != added_redactions(input, expected) {
                failures.push(format!("input:    {input}\nexpected: {expected}\ngot:      {out} ({count})"));
            }
        }
        assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
    }

    #[test]
    fn negatives_are_untouched() {
        let mut failures = Vec::new();
        for input in NEGATIVES {
            let (out, count) = redact_text(input);
            if !matches!(out, Cow::Borrowed(_)) || count != 0 {
                failures.push(format!("input: {input}\ngot:   {out} ({count})"));
            }
        }
        assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
    }

    #[test]
    fn redaction_is_idempotent() {
        for (_, expected) in POSITIVES {
            let (out, count) = redact_text(expected);
            assert!(matches!(out, Cow::Borrowed(_)) && count == 0, "redacting again changed {expected:?} to {out:?}");
        }
    }

    #[test]
    fn a_whole_corpus_in_one_text() {
        let input: String =
            POSITIVES.iter().map(|(input, _)| *input).chain(NEGATIVES.iter().copied()).collect::<Vec<_>>().join("\n");
        let expected: String = POSITIVES
            .iter()
            .map(|(_, expected)| *expected)
            .chain(NEGATIVES.iter().copied())
            .collect::<Vec<_>>()
            .join("\n");
        let (out, count) = redact_text(&input);
        assert_eq!(out, expected);
        assert_eq!(count, added_redactions(&input, &expected));
    }

    #[test]
    fn redact_value_covers_a_chat_turn() {
        let private_key = concat!(
            "-----BEGIN OPENSSH PRIVATE",
            " KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n",
            "-----END OPENSSH PRIVATE KEY-----\n"
        );
        let openai = concat!("sk", "-u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dKLzdocJ2isAj");
        let mut turn = json!({
            "session": "7c9e6679-7425-40de-944b-e07fc1f69f5e",
            "max_tokens": 4096,
            "messages": [
                {"role": "user", "content": format!("My key is {openai}, call the API and read ~/.ssh/id_ed25519")},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "I'll call the weather API, then read the key file."},
                        {
                            "type": "tool_use",
                            "id": "toolu_01A09q90qw90lq917835lq9",
                            "name": "http_request",
                            "input": {
                                "url": "https://api.example.com/v1/weather?city=Paris&token=abc123def456",
                                "headers": {"apiKey": "AbCdEf123456", "Accept": "application/json"},
                                "token_type": "Bearer"
                            }
                        }
                    ],
                    "tool_calls": [{
                        "id": "call_abc123",
                        "type": "function",
                        "function": {
                            "name": "http_request",
                            "arguments": "{\"url\": \"https://api.example.com\", \"apiKey\": \"AbCdEf123456\"}"
                        }
                    }]
                },
                {"role": "tool", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": [
                    {"type": "text", "text": format!("$ cat ~/.ssh/id_ed25519\n{private_key}")}
                ]},
                {"role": "tool", "content": "HTTP/1.1 200 OK", "credentials": {"username": "alice", "password": "hunter2"}}
            ],
            "usage": {"input_tokens": 1200, "output_tokens": 350, "secret": true}
        });
        let count = redact_value(&mut turn);
        let expected = json!({
            "session": "7c9e6679-7425-40de-944b-e07fc1f69f5e",
            "max_tokens": 4096,
            "messages": [
                {"role": "user", "content": "My key is sk-[redacted], call the API and read ~/.ssh/id_ed25519"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "I'll call the weather API, then read the key file."},
                        {
                            "type": "tool_use",
                            "id": "toolu_01A09q90qw90lq917835lq9",
                            "name": "http_request",
                            "input": {
                                "url": "https://api.example.com/v1/weather?city=Paris&token=[redacted]",
                                "headers": {"apiKey": "[redacted]", "Accept": "application/json"},
                                "token_type": "Bearer"
                            }
                        }
                    ],
                    "tool_calls": [{
                        "id": "call_abc123",
                        "type": "function",
                        "function": {
                            "name": "http_request",
                            "arguments": "{\"url\": \"https://api.example.com\", \"apiKey\": \"[redacted]\"}"
                        }
                    }]
                },
                {"role": "tool", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": [
                    {"type": "text", "text": concat!(
                        "$ cat ~/.ssh/id_ed25519\n-----BEGIN OPENSSH PRIVATE",
                        " KEY-----\n[redacted]\n-----END OPENSSH PRIVATE KEY-----\n"
                    )}
                ]},
                {"role": "tool", "content": "HTTP/1.1 200 OK", "credentials": "[redacted]"}
            ],
            "usage": {"input_tokens": 1200, "output_tokens": 350, "secret": true}
        });
        assert_eq!(turn, expected);
        assert_eq!(count, 6);
        assert_eq!(redact_value(&mut turn), 0, "redacting a value twice changes nothing");
        assert_eq!(turn, expected);
    }

    #[test]
    fn json_keys_that_name_credentials() {
        for key in [
            "token",
            "access_token",
            "refreshToken",
            "client_secret",
            "password",
            "passwd",
            "api_key",
            "apiKey",
            "x-api-key",
            "Authorization",
            "Cookie",
            "set-cookie",
            "private_key",
            "aws_access_key",
            "credentials",
        ] {
            assert!(names_credential(key), "{key}");
        }
        for key in ["max_tokens", "token_type", "tokenizer", "secret_name", "password_policy", "pwd", "key", "id"] {
            assert!(!names_credential(key), "{key}");
        }
        let mut value = json!({"Authorization": "Bearer abc", "token": "", "password": REDACTED, "api_key": 12345});
        assert_eq!(redact_value(&mut value), 1);
        assert_eq!(value, json!({"Authorization": REDACTED, "token": "", "password": REDACTED, "api_key": 12345}));
        for key in ["tokens", "api_keys", "clientSecrets", "session_ids", "max_tokens"] {
            assert!(holds_credentials(key) && !names_credential(key), "{key}");
        }
        for key in ["keys", "tokenizer", "token_type", "password_policy"] {
            assert!(!holds_credentials(key), "{key}");
        }
    }

    /// What a credential-naming key holds goes whole, whatever its shape; what a plural one holds
    /// when it is an object or array. Numbers, booleans, null and empty values are kept.
    #[test]
    fn credential_keys_take_their_whole_value() {
        let mut value = json!({
            "api_key": {"value": "v-AbC123xYz", "note": "rotated"},
            "tokens": ["t-AbC123xYz", {"id": 1}],
            "refresh_tokens": {"github": "r-AbC123xYz"},
            "credentials": [{"user": "alice", "pass": "p-AbC123xYz"}],
            "Authorization": ["Bearer b-AbC123xYz"],
            "max_tokens": 4096,
            "input_tokens": [1200],
            "secret": true,
            "password": null,
            "token": {},
            "secrets": [],
            "token_count": {"total": 12},
            "headers": {"Cookie": {"session": "c-AbC123xYz"}, "Accept": "application/json"},
        });
        assert_eq!(redact_value(&mut value), 7);
        assert_eq!(
            value,
            json!({
                "api_key": REDACTED,
                "tokens": REDACTED,
                "refresh_tokens": REDACTED,
                "credentials": REDACTED,
                "Authorization": REDACTED,
                "max_tokens": 4096,
                "input_tokens": REDACTED,
                "secret": true,
                "password": null,
                "token": {},
                "secrets": [],
                "token_count": {"total": 12},
                "headers": {"Cookie": REDACTED, "Accept": "application/json"},
            })
        );
        assert_eq!(redact_value(&mut value), 0, "redacting a value twice changes nothing");
    }

    /// One case of the shared corpus: what redacting `input` must drop and must keep.
    struct Case {
        input: &'static str,
        /// None of these is left.
        secrets: &'static [&'static str],
        /// All of these are.
        kept: &'static [&'static str],
    }

    /// Every case the host's stores have met — the secrets planted in the MCP activity log
    /// (`mcp.logPayloads`), the collector's misses — as text; [`POSITIVES`] and [`NEGATIVES`]
    /// join them in [`shared_corpus`].
    const LEAKS: &[Case] = &[
        Case {
            input: concat!(
                "{\"note\": \"send Authorization: Bearer gh",
                "p_UxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B2 along\"}"
            ),
            secrets: &["UxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B2"],
            kept: &["send Authorization: Bearer ", "along"],
        },
        Case {
            input: "curl -sS -H 'Authorization: Bearer xEuhnbzs0z-1wNiMg9aW37k5wCnHDepQHgI3HLBk' https://api.example.com/me",
            secrets: &["xEuhnbzs0z-1wNiMg9aW37k5wCnHDepQHgI3HLBk"],
            kept: &["curl -sS -H 'Authorization: Bearer ", "' https://api.example.com/me"],
        },
        Case {
            input: concat!(
                "my butler token is bmt",
                "_9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            ),
            secrets: &["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],
            kept: &["my butler token is bmt_"],
        },
        Case {
            input: concat!("GITHUB_TOKEN=gh", "p_UxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B2 gh repo list"),
            secrets: &["UxbvJDCTbyvHNsG9eh6Yo4gfqrc5XlrWi0B2"],
            kept: &["GITHUB_TOKEN=", " gh repo list"],
        },
        Case {
            input: "DSN: postgres://app:s3cr3t-db-pass@db.example.com:5432/prod?sslmode=require",
            secrets: &["s3cr3t-db-pass", "app:"],
            kept: &["postgres://", "@db.example.com:5432/prod?sslmode=require"],
        },
        Case {
            input: "https://app.example.com/login?next=%2Fcallback%3Faccess_token%3Dya29a0AfH6SMBx3kQ9vL2p%26state%3Dq1",
            secrets: &["ya29a0AfH6SMBx3kQ9vL2p"],
            kept: &["%3Faccess_token%3D", "%26state%3Dq1"],
        },
        Case {
            input: "POST /session body=user%3Dalice%26password%3Dhunter2%26remember%3Don",
            secrets: &["hunter2"],
            kept: &["user%3Dalice%26password%3D", "%26remember%3Don"],
        },
        Case {
            input: "The secret: password = Tr0ub4dor-3 (do not share)",
            secrets: &["Tr0ub4dor-3"],
            kept: &["The secret: password = ", " (do not share)"],
        },
        Case { input: "Bearer abc", secrets: &["abc"], kept: &["Bearer "] },
        Case { input: "  basic dXNlcjpodW50ZXIy ", secrets: &["dXNlcjpodW50ZXIy"], kept: &["basic "] },
        Case {
            input: "{\"api_key\": \"AbCdEf123456\", \"token\": \"t-4711-secret\"}",
            secrets: &["AbCdEf123456", "t-4711-secret"],
            kept: &["\"api_key\": \"", "\"token\": \""],
        },
    ];

    /// What `out`, redacted from `input`, still holds of `secrets` and lost of `kept`.
    fn misses(what: &str, input: &str, out: &str, secrets: &[&str], kept: &[&str]) -> Vec<String> {
        let held = secrets.iter().filter(|secret| out.contains(**secret)).map(|secret| format!("kept {secret:?}"));
        let lost = kept.iter().filter(|text| !out.contains(**text)).map(|text| format!("lost {text:?}"));
        held.chain(lost).map(|miss| format!("{what}: {miss}\ninput: {input}\ngot:   {out}")).collect()
    }

    /// The one corpus, through both ways in: each leak as text, as a JSON string and (where it
    /// parses) as a JSON document; the exact cases as JSON strings; structured values whose
    /// credential keys hold objects and arrays.
    #[test]
    fn shared_corpus() {
        let mut failures = Vec::new();
        for case in LEAKS {
            let (out, count) = redact_text(case.input);
            failures.extend(misses("text", case.input, &out, case.secrets, case.kept));
            if count == 0 {
                failures.push(format!("text: nothing counted\ninput: {}", case.input));
            }
            let mut string = json!(case.input);
            redact_value(&mut string);
            let out = string.as_str().unwrap_or_default();
            failures.extend(misses("JSON string", case.input, out, case.secrets, case.kept));
            if let Ok(mut document) = serde_json::from_str::<Value>(case.input) {
                redact_value(&mut document);
                failures.extend(misses("JSON document", case.input, &document.to_string(), case.secrets, &[]));
            }
        }
        for (input, expected) in POSITIVES {
            let mut string = json!(input);
            redact_value(&mut string);
            if string != json!(expected) {
                failures.push(format!("JSON string\ninput:    {input}\nexpected: {expected}\ngot:      {string}"));
            }
        }
        for input in NEGATIVES {
            let mut string = json!(input);
            if redact_value(&mut string) != 0 || string != json!(input) {
                failures.push(format!("JSON string changed\ninput: {input}\ngot:   {string}"));
            }
        }
        let structured = [
            (json!({"api_key": {"value": "AbC123xYz-nested"}}), "AbC123xYz-nested"),
            (json!({"tokens": ["tok-AbC123xYz", "tok-Zz9"]}), "tok-"),
            (json!({"params": {"auth": {"client_secret": {"v1": "cs-AbC123xYz"}}}}), "cs-AbC123xYz"),
            (json!({"headers": [["Authorization", "Bearer short"]]}), "short"),
        ];
        for (mut value, secret) in structured {
            let input = value.to_string();
            redact_value(&mut value);
            failures.extend(misses("JSON value", &input, &value.to_string(), &[secret], &[]));
        }
        assert!(LEAKS.len() >= 10, "{} leaks", LEAKS.len());
        assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n\n"));
    }

    #[test]
    fn handles_a_mebibyte() {
        const MIB: usize = 1 << 20;
        let paragraph = concat!(
            "The assistant read src/auth/token.rs (commit 3f786850e387550fdab836ed7e6dc881de23001b) and ",
            "found password=hunter2 plus \"apiKey\": \"AbCdEf123456\" in the config; 密码是什么? ",
            "let token = next_token(); see https://example.com/a@b — reset your password.\n"
        );
        let text = paragraph.repeat(MIB / paragraph.len() + 1);
        assert!(text.len() >= MIB);
        let (out, count) = redact_text(&text);
        let paragraphs = text.len() / paragraph.len();
        assert_eq!(count, 2 * paragraphs);
        assert!(!out.contains("hunter2") && !out.contains("AbCdEf123456"));

        // Degenerate input: one 1 MiB line of near-misses (unclosed quotes, key prefixes without a
        // body, armour lines without a key, Chinese prose), ending in a very long value.
        let parts =
            ["a", concat!("sk", "-"), "\"token: \"", concat!("-----BEGIN RSA PRIVATE", " KEY-----"), "密码是什么？"];
        let mut line: String = parts.iter().map(|part| part.repeat(MIB / 6 / part.len())).collect();
        line.push_str("token=");
        line.push_str(&"x1".repeat(MIB / 8));
        assert!(line.len() >= MIB);
        let (out, count) = redact_text(&line);
        assert_eq!(count, 1);
        assert!(out.ends_with("token=[redacted]"));
    }

    /// Corpus pieces spliced at random (a fixed xorshift sequence), cut at random characters and
    /// glued together: redacting the output again changes nothing, and nothing panics.
    #[test]
    fn idempotent_on_spliced_corpus() {
        let mut pieces: Vec<&str> = POSITIVES.iter().flat_map(|(input, expected)| [*input, *expected]).collect();
        pieces.extend(NEGATIVES);
        pieces.extend(LEAKS.iter().map(|case| case.input));
        pieces
            .extend(["密", "\"", "'", "=", ":", "：", " ", "\t", "\n", "\\", "-----", "sk-", "token", "**", "`", "@"]);
        pieces.extend([
            "://", "é", REDACTED, "(", ")", ",", ";", "&", "?", "#", "/", "*", "$", "<", ">", "{", "}", "x", "_",
        ]);
        let mut state: usize = 0x9E37_79B9;
        let mut random = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..=random(6) {
                let chars: Vec<char> = pieces[random(pieces.len())].chars().collect();
                let from = random(chars.len() + 1);
                let to = from + random(chars.len() - from + 1);
                let (from, to) = if random(2) == 0 { (0, chars.len()) } else { (from, to) };
                text.extend(&chars[from..to]);
            }
            let (once, _) = redact_text(&text);
            let (twice, count) = redact_text(&once);
            assert!(count == 0 && twice == once, "not idempotent:\n{text:?}\n{once:?}\n{twice:?}");
        }
    }
}
