//! The hex input of `gyro decode`: what looks like hex, and its bytes.

/// Whether `data` reads as hex text (hex digits, whitespace, colons and
/// `0x` prefixes only).
pub fn looks_like_hex(data: &[u8]) -> bool {
    !data.is_empty()
        && data
            .iter()
            .all(|c| c.is_ascii_hexdigit() || c.is_ascii_whitespace() || matches!(c, b':' | b'x'))
}

/// Parses hex, ignoring whitespace, colons and `0x` prefixes; the error
/// says what is wrong with the text.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let mut digits = String::with_capacity(s.len());
    for word in s.split(|c: char| c.is_ascii_whitespace() || c == ':') {
        let w = word
            .strip_prefix("0x")
            .or_else(|| word.strip_prefix("0X"))
            .unwrap_or(word);
        digits.push_str(w);
    }
    if digits.is_empty() {
        return Err("no hex digits given".into());
    }
    if digits.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    hex::decode(&digits).map_err(|e| format!("invalid hex: {e}"))
}
