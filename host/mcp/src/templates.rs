//! URI templates (RFC 6570) as resource templates use them: whether a URI is one a
//! template describes, so a `resources/read` of it goes to the provider that offers the
//! template. Matching only — the hub never expands a template.

/// The longest URI matched against a template, and the most pieces a template may have
/// (beyond either, nothing matches): matching costs at most pieces × length² steps.
const MAX_URI: usize = 2048;
/// See [`MAX_URI`].
const MAX_PIECES: usize = 32;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    /// Text the URI must repeat.
    Literal(&'a str),
    /// An expression `{…}`, by its operator (`'\0'` when it has none).
    Expression(char),
}

/// The pieces of `template`; `None` when a brace is not closed.
fn pieces(template: &str) -> Option<Vec<Piece<'_>>> {
    let mut pieces = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let end = rest.find('}')?;
                let operator = rest[1..end].chars().next().filter(|c| "+#./;?&".contains(*c)).unwrap_or('\0');
                pieces.push(Piece::Expression(operator));
                rest = &rest[end + 1..];
            }
            Some(at) => {
                pieces.push(Piece::Literal(&rest[..at]));
                rest = &rest[at..];
            }
            None => {
                pieces.push(Piece::Literal(rest));
                rest = "";
            }
        }
    }
    Some(pieces)
}

/// The lengths of `rest`'s prefixes that an expression with `operator` can expand to, as
/// a range (found in one scan, so matching never rescans a prefix); `None`: not one.
fn expansions(operator: char, rest: &str) -> Option<std::ops::RangeInclusive<usize>> {
    let until = |stops: &[char]| rest.find(stops).unwrap_or(rest.len());
    Some(match operator {
        // Reserved expansion may hold anything.
        '+' => 1..=rest.len(),
        '#' | '/' if rest.starts_with(operator) => 1..=rest.len(),
        '.' | ';' if rest.starts_with(operator) => 1..=until(&['/', '?', '#']).max(1),
        // Query expansion may expand to nothing (every variable undefined).
        '?' | '&' if rest.starts_with(operator) => 0..=until(&['#']),
        '?' | '&' => 0..=0,
        '\0' => 1..=until(&['/', '?', '#']),
        _ => return None,
    })
}

/// Whether `uri[at..]` matches `pieces[piece..]`; `failed` remembers the (piece, at) pairs
/// that do not, so no pair is tried twice.
fn match_from(
    pieces: &[Piece<'_>],
    piece: usize,
    uri: &str,
    at: usize,
    failed: &mut std::collections::HashSet<(usize, usize)>,
) -> bool {
    if failed.contains(&(piece, at)) {
        return false;
    }
    let rest = &uri[at..];
    let found = match pieces.get(piece) {
        None => rest.is_empty(),
        Some(Piece::Literal(text)) => {
            rest.starts_with(text) && match_from(pieces, piece + 1, uri, at + text.len(), failed)
        }
        Some(Piece::Expression(operator)) => expansions(*operator, rest)
            .into_iter()
            .flatten()
            .filter(|end| rest.is_char_boundary(*end))
            .any(|end| match_from(pieces, piece + 1, uri, at + end, failed)),
    };
    if !found {
        failed.insert((piece, at));
    }
    found
}

/// Whether `uri` is one `template` describes.
#[must_use]
pub fn matches(template: &str, uri: &str) -> bool {
    uri.len() <= MAX_URI
        && pieces(template).is_some_and(|pieces| {
            pieces.len() <= MAX_PIECES && match_from(&pieces, 0, uri, 0, &mut std::collections::HashSet::new())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_matches_the_templates_that_describe_it() {
        assert!(matches("test://template/{id}/data", "test://template/42/data"));
        assert!(!matches("test://template/{id}/data", "test://template/4/2/data"), "one segment");
        assert!(!matches("test://template/{id}/data", "test://template//data"), "not empty");
        assert!(!matches("test://template/{id}/data", "test://template/42/data/more"));
        assert!(matches("file://{+path}", "file:///home/owner/notes.md"));
        assert!(matches("repo://{owner}/{name}{?ref}", "repo://a/b"));
        assert!(matches("repo://{owner}/{name}{?ref}", "repo://a/b?ref=main"));
        assert!(matches("x://{a}{/b}", "x://one/two"));
        assert!(matches("plain://fixed", "plain://fixed") && !matches("plain://fixed", "plain://fixe"));
        assert!(!matches("broken://{id", "broken://x"), "an unclosed brace matches nothing");
        assert!(!matches("t://{id}", &format!("t://{}", "a".repeat(MAX_URI))));
        // No match, many ways to try: every pair is tried once.
        assert!(!matches("t://{a}{b}{c}", &format!("t://{}/", "a".repeat(MAX_URI / 4))));
    }
}
