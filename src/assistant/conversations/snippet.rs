//! Search snippets as people read them: cut on word boundaries (never inside a word or a
//! citation such as `[1]`), without citation markers, `…` where text was left out, and
//! the matched words still highlighted.

/// A highlighted excerpt: plain text, and HTML-escaped text with matches in `<b>..</b>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    pub plain: String,
    pub html: String,
}

/// Characters that continue a word (a citation such as `[12]` counts as one).
fn in_word(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '[' | ']' | '_' | '\'' | '’' | '-')
}

/// The index's excerpt (`html`, or `plain` when nothing was highlighted) tidied against
/// the `full` text it was cut from.
pub fn tidy(html: &str, plain: &str, full: Option<&str>) -> Snippet {
    let chars = if html.is_empty() {
        plain.chars().map(|c| (c, false)).collect()
    } else {
        parse(html)
    };
    let mut chars = chars;
    let text: String = chars.iter().map(|c| c.0).collect();
    // Where the excerpt sits in its text: what comes just before and after it. What is
    // left out but holds no letter (a final "?", a citation) is put back instead.
    let (mut before, mut after) = (None, None);
    match full.and_then(|f| f.find(&text).map(|at| (f, at))) {
        Some((f, at)) => {
            let (head, tail) = (&f[..at], &f[at + text.len()..]);
            if head.chars().any(char::is_alphabetic) {
                before = head.chars().next_back();
            } else {
                chars.splice(0..0, head.chars().map(|c| (c, false)));
            }
            if tail.chars().any(char::is_alphabetic) {
                after = tail.chars().next();
            } else {
                chars.extend(tail.chars().map(|c| (c, false)));
            }
        }
        // Not found as is: assume it was cut on both sides.
        None if full.is_some() => (before, after) = (Some('x'), Some('x')),
        None => {}
    }
    let mut v = chars.clone();
    if before.is_some_and(in_word) && v.first().is_some_and(|c| in_word(c.0)) {
        let cut = v.iter().position(|c| !in_word(c.0)).unwrap_or(v.len());
        v.drain(..cut);
    }
    if after.is_some_and(in_word) && v.last().is_some_and(|c| in_word(c.0)) {
        let keep = v.iter().rposition(|c| !in_word(c.0)).map_or(0, |i| i + 1);
        v.truncate(keep);
    }
    let mut v = without_citations(v);
    trim(&mut v);
    if v.is_empty() {
        // A one-word excerpt: better whole than nothing.
        v = without_citations(chars);
        trim(&mut v);
    }
    let (open, close) = (
        if before.is_some() { "…" } else { "" },
        if after.is_some() { "…" } else { "" },
    );
    let plain: String = v.iter().map(|c| c.0).collect();
    let mut html = String::from(open);
    let mut bold = false;
    for (c, b) in &v {
        if *b != bold {
            html.push_str(if *b { "<b>" } else { "</b>" });
            bold = *b;
        }
        match c {
            '&' => html.push_str("&amp;"),
            '<' => html.push_str("&lt;"),
            '>' => html.push_str("&gt;"),
            '"' => html.push_str("&quot;"),
            '\'' => html.push_str("&#x27;"),
            c => html.push(*c),
        }
    }
    if bold {
        html.push_str("</b>");
    }
    html.push_str(close);
    Snippet {
        plain: format!("{open}{plain}{close}"),
        html,
    }
}

fn trim(v: &mut Vec<(char, bool)>) {
    while v.last().is_some_and(|c| c.0.is_whitespace()) {
        v.pop();
    }
    let lead = v.iter().take_while(|c| c.0.is_whitespace()).count();
    v.drain(..lead);
}

/// Drops citation markers (`[3]`, with the space before them).
fn without_citations(v: Vec<(char, bool)>) -> Vec<(char, bool)> {
    let mut out: Vec<(char, bool)> = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i].0 == '[' {
            let digits = v[i + 1..]
                .iter()
                .take_while(|c| c.0.is_ascii_digit())
                .count();
            if (1..=3).contains(&digits) && v.get(i + 1 + digits).is_some_and(|c| c.0 == ']') {
                while out.last().is_some_and(|c| c.0 == ' ') {
                    out.pop();
                }
                i += digits + 2;
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    out
}

/// The characters of the index's HTML excerpt, each with whether it is highlighted.
fn parse(html: &str) -> Vec<(char, bool)> {
    let mut out = Vec::with_capacity(html.len());
    let mut bold = false;
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        if let Some(r) = rest.strip_prefix("<b>") {
            bold = true;
            rest = r;
            continue;
        }
        if let Some(r) = rest.strip_prefix("</b>") {
            bold = false;
            rest = r;
            continue;
        }
        if c == '&' {
            let entity = [
                ("&amp;", '&'),
                ("&lt;", '<'),
                ("&gt;", '>'),
                ("&quot;", '"'),
                ("&#x27;", '\''),
                ("&#39;", '\''),
            ]
            .into_iter()
            .find(|(e, _)| rest.starts_with(e));
            if let Some((e, ch)) = entity {
                out.push((ch, bold));
                rest = &rest[e.len()..];
                continue;
            }
        }
        out.push((c, bold));
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_cut_on_words_and_drop_citations() {
        let full =
            "A product can be returned within 45 days of delivery [1]. Refunds reach the card [2].";
        // The index cut inside "product" and inside the last citation (whose rest, with
        // no letter, is put back and dropped with it).
        let s = tidy(
            "oduct can be <b>returned</b> within 45 days of delivery [1]. Refunds reach the card [",
            "",
            Some(full),
        );
        assert_eq!(
            s.plain,
            "…can be returned within 45 days of delivery. Refunds reach the card."
        );
        assert_eq!(
            s.html,
            "…can be <b>returned</b> within 45 days of delivery. Refunds reach the card."
        );
        // Cut inside a citation with more text after it.
        let s = tidy(
            "<b>returned</b> within 45 days of delivery [",
            "",
            Some("returned within 45 days of delivery [1] and refunded."),
        );
        assert_eq!(s.plain, "returned within 45 days of delivery…");
    }

    #[test]
    fn what_is_left_out_without_letters_is_put_back() {
        let s = tidy(
            "How long do I have to <b>return</b> a product",
            "",
            Some("How long do I have to return a product?"),
        );
        assert_eq!(s.plain, "How long do I have to return a product?");
        let s = tidy(
            "A product can be <b>returned</b> within 30 days of delivery",
            "",
            Some("A product can be returned within 30 days of delivery [1]."),
        );
        assert_eq!(
            s.plain,
            "A product can be returned within 30 days of delivery."
        );
    }

    #[test]
    fn a_whole_text_is_left_whole_and_escaped() {
        let s = tidy(
            "Is 3 &lt; 4 &amp; <b>true</b>?",
            "",
            Some("Is 3 < 4 & true?"),
        );
        assert_eq!(s.plain, "Is 3 < 4 & true?");
        assert_eq!(s.html, "Is 3 &lt; 4 &amp; <b>true</b>?");
        let s = tidy("", "Pallets", Some("Pallets"));
        assert_eq!((s.plain.as_str(), s.html.as_str()), ("Pallets", "Pallets"));
    }
}
