//! Office Math (OMML) -> LaTeX-like text, so equations keep their content in search
//! and in Markdown (`$...$` inline, `$$...$$` on their own line).

use crate::parse::office::xml::{Element, Node};

/// LaTeX for one `m:oMath` (or any OMML element).
pub fn to_latex(el: &Element) -> String {
    let mut s = String::new();
    node(el, &mut s);
    s.trim().to_owned()
}

fn node(el: &Element, out: &mut String) {
    let arg = |name: &str| el.child(name).map(to_latex).unwrap_or_default();
    match el.name() {
        n if n.ends_with("Pr") => {}
        "r" => {
            for t in el.children_named("t") {
                for c in t.text().chars() {
                    match symbol(c) {
                        Some(cmd) => {
                            out.push_str(cmd);
                            out.push(' ');
                        }
                        None => out.push(c),
                    }
                }
            }
        }
        "f" => out.push_str(&format!("\\frac{{{}}}{{{}}}", arg("num"), arg("den"))),
        "sSup" => out.push_str(&format!("{}^{{{}}}", arg("e"), arg("sup"))),
        "sSub" => out.push_str(&format!("{}_{{{}}}", arg("e"), arg("sub"))),
        "sSubSup" => out.push_str(&format!(
            "{}_{{{}}}^{{{}}}",
            arg("e"),
            arg("sub"),
            arg("sup")
        )),
        "sPre" => out.push_str(&format!(
            "{{}}_{{{}}}^{{{}}}{}",
            arg("sub"),
            arg("sup"),
            arg("e")
        )),
        "rad" => {
            let deg = arg("deg");
            if deg.is_empty() {
                out.push_str(&format!("\\sqrt{{{}}}", arg("e")));
            } else {
                out.push_str(&format!("\\sqrt[{deg}]{{{}}}", arg("e")));
            }
        }
        "d" => {
            let pr = el.child("dPr");
            let chr = |name: &str, default: &str| {
                pr.and_then(|p| p.child(name))
                    .and_then(|c| c.attr("val"))
                    .unwrap_or(default)
                    .to_owned()
            };
            let items: Vec<String> = el.children_named("e").map(to_latex).collect();
            out.push_str(&format!(
                "\\left{}{}\\right{}",
                chr("begChr", "("),
                items.join(&chr("sepChr", "|")),
                chr("endChr", ")")
            ));
        }
        "nary" => {
            let op = el
                .child("naryPr")
                .and_then(|p| p.child("chr"))
                .and_then(|c| c.attr("val"))
                .and_then(|v| v.chars().next())
                .unwrap_or('∫');
            let op = symbol(op)
                .map(str::to_owned)
                .unwrap_or_else(|| op.to_string());
            out.push_str(&format!(
                "{op}_{{{}}}^{{{}}}{}",
                arg("sub"),
                arg("sup"),
                arg("e")
            ));
        }
        "func" => out.push_str(&format!("{}{}", arg("fName"), arg("e"))),
        "limLow" => out.push_str(&format!("{}_{{{}}}", arg("e"), arg("lim"))),
        "limUpp" => out.push_str(&format!("{}^{{{}}}", arg("e"), arg("lim"))),
        "bar" => out.push_str(&format!("\\overline{{{}}}", arg("e"))),
        "m" => {
            let rows: Vec<String> = el
                .children_named("mr")
                .map(|r| {
                    r.children_named("e")
                        .map(to_latex)
                        .collect::<Vec<_>>()
                        .join(" & ")
                })
                .collect();
            out.push_str(&format!(
                "\\begin{{matrix}}{}\\end{{matrix}}",
                rows.join(" \\\\ ")
            ));
        }
        _ => {
            for c in &el.children {
                if let Node::Element(e) = c {
                    node(e, out);
                }
            }
        }
    }
}

/// The LaTeX command of a math symbol Word writes as a character.
fn symbol(c: char) -> Option<&'static str> {
    Some(match c {
        'π' => "\\pi",
        'α' => "\\alpha",
        'β' => "\\beta",
        'γ' => "\\gamma",
        'δ' => "\\delta",
        'Δ' => "\\Delta",
        'θ' => "\\theta",
        'λ' => "\\lambda",
        'μ' => "\\mu",
        'σ' => "\\sigma",
        'Σ' => "\\Sigma",
        'φ' => "\\phi",
        'ω' => "\\omega",
        'Ω' => "\\Omega",
        '∞' => "\\infty",
        '×' => "\\times",
        '÷' => "\\div",
        '±' => "\\pm",
        '≤' => "\\leq",
        '≥' => "\\geq",
        '≠' => "\\neq",
        '≈' => "\\approx",
        '→' => "\\rightarrow",
        '∑' => "\\sum",
        '∏' => "\\prod",
        '∫' => "\\int",
        '∬' => "\\iint",
        '∭' => "\\iiint",
        '∮' => "\\oint",
        '∯' => "\\oiint",
        '∰' => "\\oiiint",
        '⋃' => "\\bigcup",
        '⋂' => "\\bigcap",
        '⋀' => "\\bigwedge",
        '⋁' => "\\bigvee",
        '∩' => "\\cap",
        '∪' => "\\cup",
        '∈' => "\\in",
        '∂' => "\\partial",
        '∇' => "\\nabla",
        '⋯' | '…' => "\\ldots",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::office::xml;

    #[test]
    fn converts_fractions_and_powers() {
        let x = r#"<m:oMath xmlns:m="m"><m:r><m:t>A=π</m:t></m:r><m:sSup><m:e><m:r><m:t>r</m:t></m:r></m:e><m:sup><m:r><m:t>2</m:t></m:r></m:sup></m:sSup><m:f><m:num><m:r><m:t>1</m:t></m:r></m:num><m:den><m:r><m:t>2</m:t></m:r></m:den></m:f></m:oMath>"#;
        assert_eq!(
            to_latex(&xml::parse(x.as_bytes()).unwrap()),
            "A=\\pi r^{2}\\frac{1}{2}"
        );
    }
}
