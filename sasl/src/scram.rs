//! SCRAM's primitives (RFC 5802, RFC 7677), shared by the client here and
//! the broker's server side (`ScramExchange`, salted credentials): the two
//! mechanisms Kafka offers, their HMAC, hash and Hi(), Kafka's bounds on
//! the iteration count, and the constant-time comparison proofs and
//! signatures are checked with.
//!
//! Owns: the cryptography and the mechanisms' names and admin type codes.
//! Must not: parse or build SCRAM messages (the client and the server
//! side do), or keep credentials.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Kafka's bounds on `iterations` (ScramMechanism.minIterations/maxIterations).
pub const MIN_ITERATIONS: u32 = 4096;
pub const MAX_ITERATIONS: u32 = 16384;

/// The two SCRAM mechanisms Kafka offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// By Kafka's name (`SCRAM-SHA-256`, `SCRAM-SHA-512`).
    pub fn parse(name: &str) -> Option<ScramMechanism> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's `ScramMechanism` type in the admin APIs (1 and 2).
    pub fn type_code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_type_code(code: i8) -> Option<ScramMechanism> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// HMAC(key, data[0] || data[1] || ...) with this mechanism's hash.
    pub fn hmac(self, key: &[u8], data: &[&[u8]]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[&[u8]]) -> Vec<u8> {
            // HMAC takes keys of any length.
            let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
            for part in data {
                mac.update(part);
            }
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            ScramMechanism::Sha256 => run::<Hmac<Sha256>>(key, data),
            ScramMechanism::Sha512 => run::<Hmac<Sha512>>(key, data),
        }
    }

    /// H(data).
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// ClientKey = HMAC(SaltedPassword, "Client Key"); H(ClientKey) is the
    /// StoredKey a server keeps.
    pub fn client_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, &[b"Client Key"])
    }

    /// ServerKey = HMAC(SaltedPassword, "Server Key").
    pub fn server_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, &[b"Server Key"])
    }

    /// ClientProof = ClientKey XOR HMAC(H(ClientKey), AuthMessage).
    pub fn client_proof(self, salted_password: &[u8], auth_message: &[u8]) -> Vec<u8> {
        let client_key = self.client_key(salted_password);
        let signature = self.hmac(&self.hash(&client_key), &[auth_message]);
        client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect()
    }

    /// RFC 5802's Hi(): PBKDF2 with this HMAC, one block.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut u = self.hmac(password, &[salt, &1u32.to_be_bytes()]);
        let mut result = u.clone();
        for _ in 1..iterations {
            u = self.hmac(password, &[&u]);
            result.iter_mut().zip(&u).for_each(|(r, x)| *r ^= x);
        }
        result
    }
}

/// Whether `a == b`, in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD as BASE64;
    use base64::Engine;

    use super::*;

    /// RFC 7677 section 3: the client proof and server signature of the
    /// example exchange (user "user", password "pencil").
    #[test]
    fn rfc7677_proof_and_signature() {
        let m = ScramMechanism::Sha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let auth = "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        assert_eq!(
            BASE64.encode(m.client_proof(&salted, auth.as_bytes())),
            "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let server_key = m.server_key(&salted);
        assert_eq!(
            BASE64.encode(m.hmac(&server_key, &[auth.as_bytes()])),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn names_type_codes_and_comparison() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            assert_eq!(ScramMechanism::parse(m.name()), Some(m));
            assert_eq!(ScramMechanism::from_type_code(m.type_code()), Some(m));
        }
        assert_eq!(ScramMechanism::parse("scram-sha-256"), None);
        assert_eq!(ScramMechanism::from_type_code(0), None);
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
