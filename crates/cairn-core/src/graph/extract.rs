//! Entity extraction without an LLM (docs/design.md §7): file paths, code identifiers (CamelCase,
//! snake_case, SCREAMING_CASE, `a::b` paths, `call()`, anything `backticked`), URLs, `#tags`,
//! `@names` and capitalized multi-word names.
//!
//! Deterministic: the same text always gives the same entities in the same order (order of
//! first occurrence, title before body). Every entity carries a normalized `key` — the identity
//! used to deduplicate within a note and to find the same entity again across notes; users'
//! spellings go through the same [`entity_key`] when they name an entity on the command line.
//!
//! The extractors run in a fixed priority order over one working copy of the text; each masks
//! what it took, so `src/http_client.rs` is a path and not also a snake_case identifier, and a
//! URL's path is not also a file path. Regexes are compiled once per process.

use regex::Regex;
use std::sync::LazyLock;

/// Most entities linked from one record: bounds the write cost of a very long note.
pub const MAX_ENTITIES_PER_RECORD: usize = 24;

/// Longest entity name kept, in characters.
const MAX_NAME_CHARS: usize = 120;

/// What kind of thing an extracted entity is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityKind {
    Path,
    Url,
    Code,
    Tag,
    Handle,
    Name,
}

impl EntityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Path => "path",
            EntityKind::Url => "url",
            EntityKind::Code => "code",
            EntityKind::Tag => "tag",
            EntityKind::Handle => "handle",
            EntityKind::Name => "name",
        }
    }
}

/// One entity found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    pub kind: EntityKind,
    /// How it is shown: its first spelling in the text, cleaned (`src/main.rs`, `#deploy`).
    pub name: String,
    /// Its identity: see [`entity_key`].
    pub key: String,
}

/// The normalized identity of an entity name: surrounding quotes and backticks, a leading `./`,
/// a trailing `/`, a `:line[:col]` suffix on a file path and a trailing `()` are dropped; the
/// rest is lowercased with whitespace collapsed. `Billing  Service`, `billing service` and
/// `` `billing service` `` are one entity.
pub fn entity_key(name: &str) -> String {
    let mut text = name.trim();
    for (open, close) in [('`', '`'), ('"', '"'), ('\'', '\'')] {
        if text.len() >= 2 && text.starts_with(open) && text.ends_with(close) {
            text = text[1..text.len() - 1].trim();
        }
    }
    let mut text = text.to_string();
    if !text.contains("://") {
        text = strip_line_suffix(&text).to_string();
    }
    if let Some(rest) = text.strip_prefix("./")
        && !rest.is_empty()
    {
        text = rest.to_string();
    }
    while text.len() > 1 && text.ends_with('/') {
        text.pop();
    }
    if let Some(call) = text.strip_suffix("()")
        && !call.is_empty()
    {
        text = call.to_string();
    }
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// `src/main.rs:42:7` → `src/main.rs`; anything else unchanged.
fn strip_line_suffix(text: &str) -> &str {
    static LINE: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(.*[./][^:]*?)(?::\d+){1,2}$").expect("line regex"));
    match LINE.captures(text) {
        Some(captures) => captures.get(1).map_or(text, |m| m.as_str()),
        None => text,
    }
}

const FILE_EXTENSIONS: &str = "rs|toml|ya?ml|jsonl?|md|mdx|txt|tsx?|jsx?|mjs|cjs|py|pyi|go|java|kt|kts|c|h|cc|cpp|hpp|cs|rb|php|swift|sql|sh|bash|zsh|fish|ps1|lock|ini|cfg|conf|env|html?|css|scss|sass|less|xml|csv|tsv|proto|tf|tfvars|gradle|db|sqlite|log|mk|vue|svelte|ex|exs|erl|hs|ml|scala|lua|dart|zig|nix|graphql|gql|wasm|ipynb|pdf|png|jpe?g|svg|gif";

struct Patterns {
    backtick: Regex,
    url: Regex,
    slash_path: Regex,
    bare_file: Regex,
    extension: Regex,
    tag: Regex,
    handle: Regex,
    scoped_code: Regex,
    identifier: Regex,
    name: Regex,
}

static PATTERNS: LazyLock<Patterns> = LazyLock::new(|| {
    let compile = |what: &str, pattern: &str| {
        Regex::new(pattern).unwrap_or_else(|e| panic!("extraction regex {what}: {e}"))
    };
    Patterns {
        backtick: compile("backtick", r"`([^`\n]{1,80})`"),
        url: compile("url", r#"\bhttps?://[^\s<>"'`\]\[{}|\\^]+"#),
        slash_path: compile(
            "slash path",
            r"(?:^|[\s(\[{<'\x22=,;])((?:~|\.{1,2})?/?[A-Za-z0-9_@+.\-]*[A-Za-z0-9_@+\-](?:/[A-Za-z0-9_@+.\-]+)+/?(?::\d+){0,2})",
        ),
        bare_file: compile(
            "bare file",
            &format!(r"\b([A-Za-z0-9_][A-Za-z0-9_.\-]*\.(?:{FILE_EXTENSIONS}))(?::\d+){{0,2}}\b"),
        ),
        extension: compile("extension", &format!(r"\.(?:{FILE_EXTENSIONS})$")),
        tag: compile("tag", r"(?:^|[^\w&#/])#([A-Za-z][A-Za-z0-9_\-]{1,48})\b"),
        handle: compile("handle", r"(?:^|[^\w.@/])@([A-Za-z][A-Za-z0-9_\-]{0,38})\b"),
        scoped_code: compile(
            "scoped code",
            r"\b[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?",
        ),
        identifier: compile(
            "identifier",
            r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+|[A-Z]{2,}[a-z][a-z0-9]+[A-Za-z0-9]*|[a-z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[a-z_][a-z0-9_]*\(\))",
        ),
        name: compile(
            "name",
            r"\b(?:[A-Z][a-z]+(?:['’\-][A-Za-z]+)?|[A-Z]{2,5})(?: (?:(?:of|de|van|von|der|la|du) )?(?:[A-Z][a-z]+(?:['’\-][A-Za-z]+)?|[A-Z]{2,5}))+\b",
        ),
    }
});

/// Capitalized words that start sentences far more often than they start names; dropped from
/// the front (and back) of a capitalized run. What is left must still be two words.
const NAME_STOP_WORDS: &[&str] = &[
    "A",
    "After",
    "Also",
    "Always",
    "An",
    "And",
    "Any",
    "Are",
    "As",
    "Ask",
    "At",
    "Be",
    "Because",
    "Before",
    "But",
    "By",
    "Call",
    "Check",
    "Could",
    "Did",
    "Do",
    "Does",
    "Don",
    "Each",
    "Every",
    "For",
    "From",
    "Had",
    "Has",
    "Have",
    "He",
    "Her",
    "Here",
    "His",
    "How",
    "I",
    "If",
    "In",
    "Into",
    "Is",
    "It",
    "Its",
    "Just",
    "Last",
    "Let",
    "Make",
    "May",
    "Maybe",
    "Monday",
    "Must",
    "Friday",
    "My",
    "Never",
    "New",
    "Next",
    "No",
    "Not",
    "Note",
    "Now",
    "Of",
    "On",
    "Once",
    "Only",
    "Or",
    "Our",
    "Please",
    "Run",
    "Saturday",
    "See",
    "She",
    "Should",
    "Since",
    "So",
    "Some",
    "Sunday",
    "Tell",
    "Than",
    "That",
    "The",
    "Their",
    "Then",
    "There",
    "These",
    "They",
    "This",
    "Those",
    "Thursday",
    "To",
    "Today",
    "Tomorrow",
    "Tuesday",
    "Until",
    "Use",
    "Was",
    "We",
    "Wednesday",
    "Were",
    "What",
    "When",
    "Where",
    "Which",
    "While",
    "Who",
    "Why",
    "Will",
    "With",
    "Would",
    "Yes",
    "Yesterday",
    "You",
    "Your",
    "TODO",
    "FIXME",
    "NOTE",
    "OK",
    // greetings and reactions that open a chat turn: "Hey John" is not a name
    "Hey",
    "Hi",
    "Hello",
    "Thanks",
    "Thank",
    "Yeah",
    "Yep",
    "Wow",
    "Oh",
    "Ok",
    "Okay",
    "Sure",
    "Great",
    "Congrats",
    "Congratulations",
    "Dear",
    "Good",
    "Well",
    "Sorry",
    "Nice",
    "Cool",
    "Awesome",
    "Absolutely",
    "Definitely",
    "Totally",
    "Honestly",
    "Haha",
    "Bye",
    "Woah",
    "Whoa",
    "Anytime",
    "Glad",
    "Hmm",
    "Cheers",
    "Morning",
    "Lol",
    "Aww",
    "Welcome",
];

const NAME_CONNECTORS: &[&str] = &["of", "de", "van", "von", "der", "la", "du"];

/// A working copy of the text: what an extractor took is overwritten with `\x01`, which is
/// neither a word character nor a space, so later extractors neither see it nor join across it.
struct Masked {
    bytes: Vec<u8>,
}

impl Masked {
    fn new(text: &str) -> Masked {
        Masked {
            bytes: text.as_bytes().to_vec(),
        }
    }

    fn text(&self) -> String {
        // Only whole UTF-8 sequences are ever overwritten (match bounds are char boundaries),
        // with ASCII, so the bytes stay valid UTF-8.
        String::from_utf8(self.bytes.clone()).expect("masking keeps UTF-8 valid")
    }

    fn mask(&mut self, start: usize, end: usize) {
        for byte in &mut self.bytes[start..end] {
            *byte = 0x01;
        }
    }
}

/// Collects found entities with their offsets, first spelling wins.
struct Found {
    items: Vec<(usize, Extracted)>,
}

impl Found {
    fn push(&mut self, offset: usize, kind: EntityKind, name: &str) {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            return;
        }
        let key = entity_key(name);
        if key.is_empty() || !key.chars().any(char::is_alphanumeric) {
            return;
        }
        let shown = match kind {
            EntityKind::Tag | EntityKind::Handle => key.clone(),
            EntityKind::Path => {
                let stripped = strip_line_suffix(name);
                let stripped = stripped.strip_prefix("./").unwrap_or(stripped);
                stripped.trim_end_matches('/').to_string()
            }
            EntityKind::Code => name.strip_suffix("()").unwrap_or(name).to_string(),
            _ => name.split_whitespace().collect::<Vec<_>>().join(" "),
        };
        self.items.push((
            offset,
            Extracted {
                kind,
                name: shown,
                key,
            },
        ));
    }
}

/// A token with a slash is a file path when it is rooted (`/`, `~/`, `./`, `../`), ends in a
/// known file extension, or has at least three segments — and holds a letter. `and/or`,
/// `TCP/IP`, `24/7` and dates are not paths.
fn looks_like_slash_path(token: &str) -> bool {
    let patterns = &*PATTERNS;
    let core = strip_line_suffix(token).trim_end_matches('/');
    if !core.chars().any(|c| c.is_ascii_alphabetic()) {
        return false;
    }
    let rooted = ["/", "~/", "./", "../"].iter().any(|p| core.starts_with(p));
    let segments = core.split('/').filter(|s| !s.is_empty()).count();
    if segments == 0 || core.contains("//") {
        return false;
    }
    rooted || patterns.extension.is_match(core) || segments >= 3
}

fn looks_like_url(text: &str) -> bool {
    PATTERNS
        .url
        .find(text)
        .is_some_and(|m| m.start() == 0 && m.end() == text.len())
}

/// Trailing sentence punctuation is not part of a URL or a path.
fn trim_trailing_punctuation(text: &str) -> &str {
    text.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '\''])
}

/// Extracts the entities of one record: its title, body and tags (tags become `#tag`
/// entities). Capitalized multi-word names are only looked for in the body — titles are often
/// written in Title Case.
pub fn extract(title: Option<&str>, body: &str, tags: &[String]) -> Vec<Extracted> {
    let mut found = Found { items: Vec::new() };
    let mut base = 0;
    if let Some(title) = title {
        extract_from(title, base, false, &mut found);
        base += title.len() + 1;
    }
    extract_from(body, base, true, &mut found);
    base += body.len() + 1;
    for tag in tags {
        let tag = tag.trim().trim_start_matches('#');
        if !tag.is_empty() {
            found.push(base, EntityKind::Tag, &format!("#{tag}"));
        }
    }
    // Stable sort: ties at one offset keep the extractor priority order.
    found.items.sort_by_key(|(offset, _)| *offset);
    let mut seen = std::collections::HashSet::new();
    let mut entities = Vec::new();
    for (_, item) in found.items {
        if seen.insert(item.key.clone()) {
            entities.push(item);
            if entities.len() == MAX_ENTITIES_PER_RECORD {
                break;
            }
        }
    }
    entities
}

fn extract_from(text: &str, base: usize, names: bool, found: &mut Found) {
    let patterns = &*PATTERNS;
    let mut masked = Masked::new(text);

    // `backticked`: whatever it is inside (a URL, a path, or code).
    let current = masked.text();
    for captures in patterns.backtick.captures_iter(&current) {
        let (Some(all), Some(inner)) = (captures.get(0), captures.get(1)) else {
            continue;
        };
        let content = inner.as_str().trim();
        let kind = if looks_like_url(content) {
            EntityKind::Url
        } else if (content.contains('/')
            && looks_like_slash_path(content)
            && !content.contains(' '))
            || (!content.contains(' ') && patterns.extension.is_match(strip_line_suffix(content)))
        {
            EntityKind::Path
        } else {
            EntityKind::Code
        };
        found.push(base + inner.start(), kind, content);
        masked.mask(all.start(), all.end());
    }

    let current = masked.text();
    for m in patterns.url.find_iter(&current) {
        let url = trim_trailing_punctuation(m.as_str());
        if url.len() > "https://".len() {
            found.push(base + m.start(), EntityKind::Url, url);
        }
        masked.mask(m.start(), m.end());
    }

    let current = masked.text();
    for captures in patterns.slash_path.captures_iter(&current) {
        let Some(token) = captures.get(1) else {
            continue;
        };
        let path = trim_trailing_punctuation(token.as_str());
        if looks_like_slash_path(path) {
            found.push(base + token.start(), EntityKind::Path, path);
            masked.mask(token.start(), token.end());
        }
    }
    let current = masked.text();
    for captures in patterns.bare_file.captures_iter(&current) {
        let (Some(all), Some(file)) = (captures.get(0), captures.get(1)) else {
            continue;
        };
        let name = file.as_str();
        // `v1.2.md` is a file, `3.5.rs` is not: the part before the extension needs a letter.
        let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
        if stem.chars().any(|c| c.is_ascii_alphabetic()) {
            found.push(base + file.start(), EntityKind::Path, name);
            masked.mask(all.start(), all.end());
        }
    }

    let current = masked.text();
    for captures in patterns.tag.captures_iter(&current) {
        let Some(tag) = captures.get(1) else { continue };
        found.push(
            base + tag.start() - 1,
            EntityKind::Tag,
            &format!("#{}", tag.as_str()),
        );
        masked.mask(tag.start() - 1, tag.end());
    }

    let current = masked.text();
    for captures in patterns.handle.captures_iter(&current) {
        let Some(handle) = captures.get(1) else {
            continue;
        };
        // `@types/node` is a package, not a person.
        if current[handle.end()..].starts_with('/') {
            continue;
        }
        found.push(
            base + handle.start() - 1,
            EntityKind::Handle,
            &format!("@{}", handle.as_str()),
        );
        masked.mask(handle.start() - 1, handle.end());
    }

    let current = masked.text();
    for m in patterns.scoped_code.find_iter(&current) {
        found.push(base + m.start(), EntityKind::Code, m.as_str());
        masked.mask(m.start(), m.end());
    }
    let current = masked.text();
    for m in patterns.identifier.find_iter(&current) {
        found.push(base + m.start(), EntityKind::Code, m.as_str());
        masked.mask(m.start(), m.end());
    }

    if !names {
        return;
    }
    let current = masked.text();
    for m in patterns.name.find_iter(&current) {
        let words: Vec<&str> = m.as_str().split(' ').collect();
        let mut start = 0;
        let mut end = words.len();
        while start < end
            && (NAME_STOP_WORDS.contains(&words[start]) || NAME_CONNECTORS.contains(&words[start]))
        {
            start += 1;
        }
        while end > start
            && (NAME_STOP_WORDS.contains(&words[end - 1])
                || NAME_CONNECTORS.contains(&words[end - 1]))
        {
            end -= 1;
        }
        let kept = &words[start..end];
        let capitalized = kept.iter().filter(|w| !NAME_CONNECTORS.contains(w)).count();
        if capitalized < 2 || kept.len() > 5 {
            continue;
        }
        let offset = m.start() + words[..start].iter().map(|w| w.len() + 1).sum::<usize>();
        found.push(base + offset, EntityKind::Name, &kept.join(" "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `note` → the entities as `kind:name` in order of first occurrence.
    fn check(title: Option<&str>, body: &str, expect: &[&str]) {
        let got: Vec<String> = extract(title, body, &[])
            .iter()
            .map(|e| format!("{}:{}", e.kind.as_str(), e.name))
            .collect();
        assert_eq!(got, expect, "\nbody: {body}");
    }

    #[test]
    fn file_paths() {
        check(
            None,
            "CI fails when pnpm-lock.yaml is stale; see .github/workflows/ci.yml.",
            &["path:pnpm-lock.yaml", "path:.github/workflows/ci.yml"],
        );
        check(
            None,
            "The panic is at crates/cairn-core/src/text.rs:212 in sanitize.",
            &["path:crates/cairn-core/src/text.rs"],
        );
        check(
            None,
            "Config lives in /etc/nginx/nginx.conf and ~/.config/cairn/ (see ./scripts/setup.sh)",
            &[
                "path:/etc/nginx/nginx.conf",
                "path:~/.config/cairn",
                "path:scripts/setup.sh",
            ],
        );
        check(
            None,
            "Bump the version in Cargo.toml and Cargo.lock, then tag.",
            &["path:Cargo.toml", "path:Cargo.lock"],
        );
        check(
            None,
            "and/or TCP/IP 24/7 on 2024/01/05, 3.5 stars, fly.io and example.com",
            &[],
        );
        check(
            None,
            "Components go under src/components/Button",
            &["path:src/components/Button"],
        );
    }

    #[test]
    fn urls() {
        check(
            None,
            "Docs: https://docs.rs/rusqlite/latest/rusqlite/. Also see (http://localhost:8080/health).",
            &[
                "url:https://docs.rs/rusqlite/latest/rusqlite/",
                "url:http://localhost:8080/health",
            ],
        );
        check(
            None,
            "Status page https://status.example.com, mirrored at https://status.example.com/",
            &["url:https://status.example.com"],
        );
    }

    #[test]
    fn code_identifiers() {
        check(
            None,
            "HttpClient retries 3 times; getUserById calls fetch_user with MAX_RETRIES.",
            &[
                "code:HttpClient",
                "code:getUserById",
                "code:fetch_user",
                "code:MAX_RETRIES",
            ],
        );
        check(
            None,
            "Use std::fs::read_to_string() instead of open(); XMLParser chokes on BOMs.",
            &[
                "code:std::fs::read_to_string",
                "code:open",
                "code:XMLParser",
            ],
        );
        check(
            None,
            "Run `cargo nextest run` and check `DATABASE_URL`; the `--json` flag prints `RememberOutcome`.",
            &[
                "code:cargo nextest run",
                "code:DATABASE_URL",
                "code:--json",
                "code:RememberOutcome",
            ],
        );
        check(
            None,
            "APIs and URLs are plain words; so are iPhone, I, OK and a_",
            &[],
        );
    }

    #[test]
    fn tags_and_handles() {
        check(
            None,
            "#deploy failed again, @alice and @bob-ops are on it (#42 is the issue). C# is fine.",
            &["tag:#deploy", "handle:@alice", "handle:@bob-ops"],
        );
        check(
            None,
            "Mail bob@example.com, install @types/node, headings like # Title are not tags",
            &[],
        );
        check(
            None,
            "#Deploy and #deploy are one tag; @Alice and @alice one person",
            &["tag:#deploy", "handle:@alice"],
        );
    }

    #[test]
    fn capitalized_names() {
        check(
            None,
            "The Billing Service talks to Amazon Web Services through the Payment Gateway.",
            &[
                "name:Billing Service",
                "name:Amazon Web Services",
                "name:Payment Gateway",
            ],
        );
        check(
            None,
            "Yesterday Grace Hopper met the Bank of America team. When Alice left, nothing changed.",
            &["name:Grace Hopper", "name:Bank of America"],
        );
        check(
            None,
            "We moved to AWS Lambda. It works.",
            &["name:AWS Lambda"],
        );
        // chat turns open with greetings
        check(
            None,
            "Hey John! Thanks Maria, that was great. Wow Grace Hopper!",
            &["name:Grace Hopper"],
        );
        // names are looked for in the body only: titles are often Title Case
        check(
            Some("Deploy Target Changed"),
            "It moved to Fly Machines.",
            &["name:Fly Machines"],
        );
    }

    #[test]
    fn real_looking_notes() {
        check(
            Some("pnpm lockfile drift"),
            "CI fails with ERR_PNPM_OUTDATED_LOCKFILE when pnpm-lock.yaml is stale; run `pnpm install` and commit. See https://pnpm.io/cli/install #ci",
            &[
                "code:ERR_PNPM_OUTDATED_LOCKFILE",
                "path:pnpm-lock.yaml",
                "code:pnpm install",
                "url:https://pnpm.io/cli/install",
                "tag:#ci",
            ],
        );
        check(
            Some("Queue backend: Postgres over Redis"),
            "Decided with @maria: the JobQueue uses SKIP LOCKED on Postgres (src/queue/pg.rs) instead of Redis Streams; retry_after is 30s.",
            &[
                "handle:@maria",
                "code:JobQueue",
                "path:src/queue/pg.rs",
                "name:Redis Streams",
                "code:retry_after",
            ],
        );
        check(
            None,
            "The staging box (staging-2) reboots nightly at 03:00 UTC; Grafana Cloud alerts page #oncall.",
            &["name:Grafana Cloud", "tag:#oncall"],
        );
    }

    #[test]
    fn duplicates_collapse_to_the_first_spelling() {
        let got = extract(
            Some("see src/main.rs"),
            "./src/main.rs:10 and src/main.rs again; `src/main.rs` too",
            &["deploy".to_string(), "#Deploy".to_string()],
        );
        let names: Vec<_> = got
            .iter()
            .map(|e| (e.name.as_str(), e.key.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![("src/main.rs", "src/main.rs"), ("#deploy", "#deploy")]
        );
    }

    #[test]
    fn keys_normalize_what_users_type() {
        let check = |given: &str, expect: &str| assert_eq!(entity_key(given), expect, "{given:?}");
        check("Billing  Service", "billing service");
        check("`src/main.rs`", "src/main.rs");
        check("./src/main.rs:42:7", "src/main.rs");
        check("src/", "src");
        check("open()", "open");
        check("#Deploy", "#deploy");
        check("https://Example.com/A/", "https://example.com/a");
        check("http://localhost:8080", "http://localhost:8080");
        check("  ", "");
    }

    #[test]
    fn the_number_of_entities_is_bounded() {
        let body: String = (0..100).map(|i| format!("file_{i}.rs ")).collect();
        assert_eq!(extract(None, &body, &[]).len(), MAX_ENTITIES_PER_RECORD);
    }

    #[test]
    fn extraction_is_deterministic_and_total_on_odd_text() {
        for text in [
            "",
            "`",
            "``",
            "#",
            "@",
            "/",
            "://",
            "a/b/",
            "ü/ö/ä.rs",
            "😀 `😀` #😀 @😀",
            "\u{1}\u{1}",
        ] {
            let first = extract(Some(text), text, &[]);
            assert_eq!(first, extract(Some(text), text, &[]));
        }
    }
}
