//! Roman and alphabetic list numerals, as Word and PowerPoint print them.

/// 4 -> "IV" (capped at 3999).
pub fn roman(n: u32) -> String {
    const TABLE: &[(u32, &str)] = &[
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ];
    let mut n = n.min(3999);
    let mut out = String::new();
    for &(v, s) in TABLE {
        while n >= v {
            out.push_str(s);
            n -= v;
        }
    }
    out
}

/// 1 -> "A", 26 -> "Z", 27 -> "AA", 28 -> "BB" (Word repeats the letter past Z).
pub fn letters(n: u32) -> String {
    let n = n.max(1) - 1;
    let c = char::from(b'A' + (n % 26) as u8);
    c.to_string().repeat((n / 26 + 1).min(10) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numerals() {
        assert_eq!(roman(1994), "MCMXCIV");
        assert_eq!(letters(1), "A");
        assert_eq!(letters(28), "BB");
    }
}
