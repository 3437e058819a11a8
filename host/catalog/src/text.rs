//! Text echoed back to people (caller input in error messages, a child's stderr in a
//! failure): cut short, so that a message stays a message.

/// At most `max` characters of `text`, with `…` when it was cut.
#[must_use]
pub fn clip(text: &str, max: usize) -> String {
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_characters_and_says_so() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("exactly10!", 10), "exactly10!");
        assert_eq!(clip("ééééé", 3), "ééé…");
    }
}
