//! What an endpoint tells its clients of itself (`instructions`, at `initialize` and
//! `server/discover`): the hub's own words, then the instructions of the providers it
//! offers, each under a heading that names its namespace — within [`BUDGET`] bytes of the
//! providers' texts, shared fairly: a text within its share is passed whole, and what the
//! short ones leave is shared among the long ones, each cut saying so.

/// The most bytes of providers' instructions an endpoint passes on.
pub const BUDGET: usize = 16 * 1024;

/// `own`, then each `(namespace, instructions)` under a `## <namespace>` heading, in the
/// order given; blank instructions are left out.
#[must_use]
pub fn merged(own: &str, said: &[(String, String)]) -> String {
    let said: Vec<&(String, String)> = said.iter().filter(|(_, text)| !text.trim().is_empty()).collect();
    if said.is_empty() {
        return own.to_owned();
    }
    let lengths: Vec<usize> = said.iter().map(|(_, text)| text.len()).collect();
    let mut merged = format!(
        "{own}\n\nWhat the providers say of themselves, each under its namespace (their tools are <namespace>__<tool>):"
    );
    for ((namespace, text), share) in said.iter().zip(shares(&lengths, BUDGET)) {
        merged.push_str(&format!("\n\n## {namespace}\n\n{}", cut(text.trim_end(), share)));
    }
    merged
}

/// One provider's instructions alone (an endpoint that is that provider under its own
/// names): as it gave them, cut only past [`BUDGET`].
#[must_use]
pub fn alone(text: &str) -> String {
    cut(text, BUDGET)
}

/// Each text's share of `budget`: its length when the texts fit, else the same share for
/// every text longer than it, the shorter ones whole (what they leave goes to the others).
fn shares(lengths: &[usize], budget: usize) -> Vec<usize> {
    let mut shares = vec![0; lengths.len()];
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| lengths[i]);
    let mut left = budget;
    for (done, &i) in order.iter().enumerate() {
        let fair = left / (order.len() - done);
        shares[i] = lengths[i].min(fair);
        left -= shares[i];
    }
    shares
}

/// `text`, at most `limit` bytes of it (on a character boundary), with a note saying how
/// much was cut when any was.
fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n\n[cut: {end} of these instructions' {} bytes are shown; the hub passes on {} KiB of its providers' instructions at most]",
        &text[..end],
        text.len(),
        BUDGET / 1024
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_are_whole_and_the_long_ones_share_what_they_leave() {
        assert_eq!(shares(&[10, 20], 100), [10, 20]);
        assert_eq!(shares(&[10, 500, 300], 100), [10, 45, 45]);
        assert_eq!(shares(&[40, 500, 10], 100), [40, 50, 10]);
        assert_eq!(shares(&[], 100), [0usize; 0]);
        let many = shares(&[BUDGET; 3], BUDGET);
        assert!(many.iter().sum::<usize>() <= BUDGET && many.iter().all(|s| s.abs_diff(BUDGET / 3) <= 1), "{many:?}");
    }

    #[test]
    fn each_provider_is_under_its_namespace_and_a_cut_says_so() {
        let said = vec![
            ("small".to_owned(), "Use small for small things.\n".to_owned()),
            ("quiet".to_owned(), "  \n".to_owned()),
            ("large".to_owned(), "é".repeat(BUDGET)),
        ];
        let text = merged("The hub.", &said);
        assert!(text.starts_with("The hub.\n\nWhat the providers say of themselves"), "{text}");
        assert!(text.contains("\n\n## small\n\nUse small for small things.\n\n## large\n\né"), "{text}");
        assert!(!text.contains("## quiet"), "blank instructions are left out");
        let large = text.split("## large\n\n").nth(1).unwrap_or_default();
        let shown = BUDGET - said[0].1.len();
        // On a character boundary: `é` is two bytes.
        let shown = shown - shown % 2;
        assert!(large.ends_with(&format!("[cut: {shown} of these instructions' {} bytes are shown; the hub passes on 16 KiB of its providers' instructions at most]", 2 * BUDGET)), "{large}");
        assert_eq!(merged("The hub.", &said[1..2]), "The hub.", "nothing to add");
        assert_eq!(alone("verbatim\n"), "verbatim\n");
        assert!(alone(&"x".repeat(BUDGET + 1)).contains("[cut: 16384 of these instructions' 16385 bytes"));
    }
}
