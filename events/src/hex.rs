//! Lower-case hex, the one way Steward writes a digest: content ids of mail without a
//! Message-ID, ledger keys and argument hashes, the keys under which secrets are stored, and
//! the HMAC signatures of GitHub and Stripe webhooks (which write them the same way).
//!
//! It lives in the vocabulary crate because both the daemon and the tool layer name things by
//! digests and must spell them identically. One allocation per call: the webhook path runs it
//! for every signed delivery.

/// `bytes` as lower-case hex, two digits per byte.
pub fn to_hex(bytes: &[u8]) -> String {
    fn digit(nibble: u8) -> char {
        char::from(if nibble < 10 {
            b'0' + nibble
        } else {
            b'a' + nibble - 10
        })
    }
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(digit(byte >> 4));
        out.push(digit(byte & 0x0f));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::to_hex;

    #[test]
    fn writes_two_lower_case_digits_per_byte() {
        let cases: &[(&[u8], &str)] = &[
            (b"", ""),
            (&[0x00], "00"),
            (&[0x0f, 0xf0], "0ff0"),
            (&[0xde, 0xad, 0xbe, 0xef], "deadbeef"),
            (
                &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef],
                "0123456789abcdef",
            ),
        ];
        for (bytes, hex) in cases {
            assert_eq!(to_hex(bytes), *hex, "{bytes:?}");
        }
    }

    #[test]
    fn agrees_with_the_formatter_on_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        let formatted: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(to_hex(&all), formatted);
    }
}
