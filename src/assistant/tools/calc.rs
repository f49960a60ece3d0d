//! The `calculate` tool's evaluator: arithmetic only, never code. Numbers, `+ - * / %
//! ^` (power, right-associative), parentheses, unary minus and plus, the constants `pi`
//! and `e`, and the functions `sqrt abs round floor ceil ln log10 sin cos tan min max`.
//! Bounded in length and nesting; division by zero and non-finite results are errors.

/// Longest expression, in characters.
pub const MAX_LEN: usize = 500;
/// Deepest nesting of parentheses, unary signs and function calls.
const MAX_DEPTH: usize = 64;

/// Evaluates `expr`; the error says what is wrong and where.
pub fn evaluate(expr: &str) -> Result<f64, String> {
    if expr.chars().count() > MAX_LEN {
        return Err(format!("expression longer than {MAX_LEN} characters"));
    }
    let tokens = lex(expr)?;
    if tokens.is_empty() {
        return Err("empty expression".into());
    }
    let mut p = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let v = p.expr()?;
    if let Some(t) = p.tokens.get(p.pos) {
        return Err(format!("unexpected {} after the expression", t.show()));
    }
    finite(v)
}

fn finite(v: f64) -> Result<f64, String> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err("the result is not a finite number".into())
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Ident(String),
    Op(char),
}

impl Tok {
    fn show(&self) -> String {
        match self {
            Tok::Num(n) => format!("number {n}"),
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Op(c) => format!("'{c}'"),
        }
    }
}

fn lex(s: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            // Exponent: 1e3, 2.5E-4.
            if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                let mut j = i + 1;
                if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                    j += 1;
                }
                if j < chars.len() && chars[j].is_ascii_digit() {
                    i = j;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            let text: String = chars[start..i].iter().filter(|c| **c != '_').collect();
            let n = text
                .parse::<f64>()
                .map_err(|_| format!("'{text}' is not a number"))?;
            out.push(Tok::Num(n));
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(
                chars[start..i].iter().collect::<String>().to_lowercase(),
            ));
        } else if "+-*/%^(),".contains(c) {
            out.push(Tok::Op(c));
            i += 1;
        } else if c == '×' || c == '÷' {
            out.push(Tok::Op(if c == '×' { '*' } else { '/' }));
            i += 1;
        } else {
            return Err(format!("unexpected character '{c}' at position {}", i + 1));
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos)
    }
    fn eat(&mut self, op: char) -> bool {
        if self.peek() == Some(&Tok::Op(op)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("expression nested deeper than {MAX_DEPTH} levels"));
        }
        Ok(())
    }

    // expr := term (('+' | '-') term)*
    fn expr(&mut self) -> Result<f64, String> {
        let mut v = self.term()?;
        loop {
            if self.eat('+') {
                v += self.term()?;
            } else if self.eat('-') {
                v -= self.term()?;
            } else {
                return Ok(v);
            }
        }
    }

    // term := unary (('*' | '/' | '%') unary)*
    fn term(&mut self) -> Result<f64, String> {
        let mut v = self.unary()?;
        loop {
            if self.eat('*') {
                v *= self.unary()?;
            } else if self.eat('/') {
                let d = self.unary()?;
                if d == 0.0 {
                    return Err("division by zero".into());
                }
                v /= d;
            } else if self.eat('%') {
                let d = self.unary()?;
                if d == 0.0 {
                    return Err("modulo by zero".into());
                }
                v %= d;
            } else {
                return Ok(v);
            }
        }
    }

    // unary := ('-' | '+') unary | power
    fn unary(&mut self) -> Result<f64, String> {
        if self.eat('-') {
            self.enter()?;
            let v = -self.unary()?;
            self.depth -= 1;
            return Ok(v);
        }
        if self.eat('+') {
            self.enter()?;
            let v = self.unary()?;
            self.depth -= 1;
            return Ok(v);
        }
        self.power()
    }

    // power := atom ('^' unary)?   (right-associative; -2^2 = -4, 2^-1 = 0.5)
    fn power(&mut self) -> Result<f64, String> {
        let base = self.atom()?;
        if self.eat('^') {
            self.enter()?;
            let exp = self.unary()?;
            self.depth -= 1;
            return finite(base.powf(exp));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<f64, String> {
        match self.tokens.get(self.pos).cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(n)
            }
            Some(Tok::Op('(')) => {
                self.pos += 1;
                self.enter()?;
                let v = self.expr()?;
                self.depth -= 1;
                if !self.eat(')') {
                    return Err("missing ')'".into());
                }
                Ok(v)
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                match name.as_str() {
                    "pi" => return Ok(std::f64::consts::PI),
                    "e" => return Ok(std::f64::consts::E),
                    _ => {}
                }
                if !self.eat('(') {
                    return Err(format!(
                        "unknown name '{name}' (no variables; functions need parentheses)"
                    ));
                }
                self.enter()?;
                let mut args = vec![self.expr()?];
                while self.eat(',') {
                    args.push(self.expr()?);
                }
                self.depth -= 1;
                if !self.eat(')') {
                    return Err(format!("missing ')' after the arguments of {name}"));
                }
                call(&name, &args)
            }
            Some(t) => Err(format!("unexpected {}", t.show())),
            None => Err("the expression ends too early".into()),
        }
    }
}

fn call(name: &str, args: &[f64]) -> Result<f64, String> {
    let one = |f: fn(f64) -> f64| -> Result<f64, String> {
        match args {
            [x] => finite(f(*x)),
            _ => Err(format!("{name} takes one argument, got {}", args.len())),
        }
    };
    match name {
        "sqrt" => match args {
            [x] if *x < 0.0 => Err("sqrt of a negative number".into()),
            _ => one(f64::sqrt),
        },
        "abs" => one(f64::abs),
        "floor" => one(f64::floor),
        "ceil" => one(f64::ceil),
        "sin" => one(f64::sin),
        "cos" => one(f64::cos),
        "tan" => one(f64::tan),
        "ln" | "log10" => match args {
            [x] if *x <= 0.0 => Err(format!("{name} of a number that is not positive")),
            _ => one(if name == "ln" { f64::ln } else { f64::log10 }),
        },
        "round" => match args {
            [x] => Ok(x.round()),
            [x, d] if d.fract() == 0.0 && (0.0..=15.0).contains(d) => {
                let m = 10f64.powi(*d as i32);
                Ok((x * m).round() / m)
            }
            [_, _] => Err("round's second argument must be a whole number of digits, 0-15".into()),
            _ => Err(format!("round takes one or two arguments, got {}", args.len())),
        },
        "min" => Ok(args.iter().copied().fold(f64::INFINITY, f64::min)),
        "max" => Ok(args.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        other => Err(format!(
            "unknown function '{other}' (known: sqrt, abs, round, floor, ceil, ln, log10, sin, cos, tan, min, max)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_arithmetic() {
        let cases = [
            ("1 + 2 * 3", 7.0),
            ("(1 + 2) * 3", 9.0),
            ("-2^2", -4.0),
            ("2^3^2", 512.0),
            ("2^-1", 0.5),
            ("10 % 4", 2.0),
            ("--3", 3.0),
            ("sqrt(16) + abs(-2)", 6.0),
            ("round(1.23456, 2)", 1.23),
            ("min(3, 1, 2) + max(4, 5)", 6.0),
            ("1e3 / 4", 250.0),
            ("1_000 × 2", 2000.0),
            ("round(pi)", 3.0),
        ];
        for (e, want) in cases {
            assert!((evaluate(e).unwrap() - want).abs() < 1e-9, "{e}");
        }
    }

    #[test]
    fn refuses_what_is_not_arithmetic() {
        assert_eq!(evaluate("1/0").unwrap_err(), "division by zero");
        assert_eq!(evaluate("5 % 0").unwrap_err(), "modulo by zero");
        assert!(evaluate("").is_err());
        assert!(evaluate("x + 1").unwrap_err().contains("unknown name"));
        assert!(evaluate("__import__('os')").is_err());
        assert!(evaluate("1 +").is_err());
        assert!(evaluate("(1 + 2").unwrap_err().contains("missing ')'"));
        assert!(evaluate("1 2").is_err());
        assert!(evaluate("sqrt(-1)").is_err());
        assert!(evaluate("10^400").unwrap_err().contains("finite"));
        assert!(evaluate(&"(".repeat(100)).unwrap_err().contains("nested"));
        assert!(evaluate(&"1+".repeat(300)).unwrap_err().contains("longer"));
        assert!(evaluate("foo(1)").unwrap_err().contains("unknown function"));
    }
}
